"""Two time axes: event time (valid_from/valid_until, when a fact was true) and system time
(recorded_at/retired_at, when Stash believed it), on every path that writes or reads facts:
assert_fact, the facts stage, supersession, contradiction checks, recall/query_facts/get_fact,
the MCP tools and CLI, the tree export/import and the 0008 migration's backfill."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from mcp import Client

from stash_pipeline import errors, recall
from stash_pipeline.config import load_settings
from stash_pipeline.consolidation import runner
from stash_pipeline.db.migrate import migrate
from stash_pipeline.interchange import export, readers
from stash_pipeline.memory import facts, graph, namespaces
from stash_pipeline.operations.facts import ASSERT_FACT, QUERY_FACTS
from stash_pipeline.store import Store
from stash_serve.cli import cli
from stash_serve.mcp.server import build_server
from tests.integration.consolidation.conftest import cstore, model, rows, seed, server  # noqa: F401 (fixtures)

NS = "/time"
DAY = [datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=n) for n in range(10)]


def _engine(store: Store, content: str, value: str, **kwargs: Any) -> dict[str, Any]:
    return facts.assert_fact(store, NS, content, entity="db", property="engine", value=value, **kwargs)


def _ids(found: list[Any]) -> list[int]:
    return [f.id for f in found]


def _recalled(store: Store, **kwargs: Any) -> set[int]:
    return {h.id for h in recall.recall(store, "which database engine", [NS], **kwargs) if h.kind == "fact"}


def test_a_late_old_statement_is_history_and_supersedes_nothing(store):
    namespaces.create(store, NS)
    pg16 = _engine(store, "The database runs Postgres 16", "postgres 16", valid_from=DAY[5]).fact
    late = _engine(store, "The database ran Postgres 14", "postgres 14", valid_from=DAY[1], supersede=True)
    old = late.fact
    assert late.superseded_fact_ids == [] and late.contradictions == []
    assert (old.valid_from, old.valid_until, old.current) == (DAY[1], DAY[5], False)
    # the newer fact is untouched and still the current one
    now = facts.get(store, pg16.id)
    assert (now.valid_until, now.superseded_by, now.retired_at, now.current) == (None, None, None, True)
    assert _ids(facts.query(store, NS)) == [pg16.id]
    # history: inside its interval it is what was true
    assert _ids(facts.query(store, NS, as_of=DAY[3])) == [old.id]
    assert _recalled(store, as_of=DAY[3]) == {old.id}
    assert _recalled(store) == {pg16.id}
    assert _ids(facts.query(store, NS, as_of=DAY[5])) == [pg16.id]  # the end is exclusive


def test_as_of_and_known_at_answer_different_questions(store):
    """Recorded on "day 1" as valid from day 0; superseded on "day 5" by a fact valid from day 3."""
    namespaces.create(store, NS)
    before_anything = datetime.now(UTC)
    time.sleep(0.05)
    old = _engine(store, "The database runs MySQL 8", "mysql 8", valid_from=DAY[0]).fact
    time.sleep(0.05)
    day4 = datetime.now(UTC)  # system time between the two recordings
    time.sleep(0.05)
    result = _engine(store, "The database runs Postgres 16", "postgres 16", valid_from=DAY[3], supersede=True)
    new = result.fact
    assert result.superseded_fact_ids == [old.id]

    retired = facts.get(store, old.id)
    assert (retired.valid_until, retired.superseded_by, retired.current) == (DAY[3], new.id, False)
    assert retired.recorded_at is not None and retired.retired_at is not None and retired.retired_at > day4

    # what was true on day 2, as known now: the old fact
    assert _ids(facts.query(store, NS, as_of=DAY[2])) == [old.id]
    # what Stash believed at day 4 about now: the old fact, still open-ended then
    assert _ids(facts.query(store, NS, known_at=day4)) == [old.id]
    # what is true now, as known now: the new fact
    assert _ids(facts.query(store, NS)) == [new.id]
    # event time after the new start, as known at day 4: the old fact (its end was not known)
    assert _ids(facts.query(store, NS, as_of=DAY[6], known_at=day4)) == [old.id]
    assert _ids(facts.query(store, NS, as_of=DAY[6])) == [new.id]
    # before either was recorded, nothing was known
    assert facts.query(store, NS, known_at=before_anything) == []

    assert _recalled(store, as_of=DAY[2]) == {old.id}
    assert _recalled(store, known_at=day4) == {old.id}
    assert _recalled(store) == {new.id}

    # get_fact reads a fact as it was believed at known_at
    then = facts.get(store, old.id, known_at=day4)
    assert (then.valid_until, then.superseded_by, then.current) == (None, None, True)
    assert facts.get(store, old.id, as_of=DAY[2]).current is True
    with pytest.raises(errors.RecordNotFound):
        facts.get(store, new.id, known_at=day4)


def test_event_time_is_validated(store):
    namespaces.create(store, NS)
    with pytest.raises(errors.InvalidInput, match="valid_until must be later"):
        _engine(store, "The database runs Oracle", "oracle", valid_from=DAY[3], valid_until=DAY[2])
    with pytest.raises(errors.InvalidInput, match="valid_until must be later"):
        _engine(store, "The database runs Oracle", "oracle", valid_until=DAY[2])  # before the default now
    # the times themselves are parsed once, by the operations' arguments models
    with pytest.raises(errors.InvalidInput, match="valid_from: must lie between 1000-01-01 and 9000-01-01"):
        ASSERT_FACT.parse({"content": "The database runs Oracle", "namespace": NS, "valid_from": "9999-06-01T00:00:00Z"})
    with pytest.raises(errors.InvalidInput, match="valid_from: not an ISO 8601 time"):
        ASSERT_FACT.parse({"content": "The database runs Oracle", "namespace": NS, "valid_from": "last tuesday"})
    with pytest.raises(errors.InvalidInput, match="known_at: not an ISO 8601 time"):
        QUERY_FACTS.parse({"namespaces": NS, "known_at": "soon"})
    assert facts.query(store, NS, include_history=True) == []


def test_values_only_contradict_when_their_intervals_overlap(store):
    namespaces.create(store, NS)
    january = _engine(store, "The database ran MySQL in January", "mysql", valid_from=DAY[0],
                      valid_until=DAY[0] + timedelta(days=31)).fact
    march = _engine(store, "The database runs Postgres since March", "postgres",
                    valid_from=datetime(2026, 3, 1, tzinfo=UTC))
    assert march.contradictions == [] and march.fact.current is True  # from March on
    overlapping = _engine(store, "The database ran SQLite mid January", "sqlite", valid_from=DAY[9],
                          valid_until=DAY[9] + timedelta(days=5))
    assert [c.old_fact_id for c in overlapping.contradictions] == [january.id]
    assert overlapping.contradictions[0].classification == "contradiction"


def test_resolving_keep_new_closes_the_old_interval_where_the_new_begins(store):
    from stash_pipeline.memory import contradictions

    namespaces.create(store, NS)
    old = _engine(store, "The database runs MySQL 8", "mysql 8", valid_from=DAY[0]).fact
    [open_one] = _engine(store, "The database runs Postgres 16", "postgres 16", valid_from=DAY[3]).contradictions
    assert open_one.old_fact_id == old.id and not open_one.resolved
    contradictions.resolve(store, open_one.id, "keep_new")
    retired = facts.get(store, old.id)
    assert (retired.valid_until, retired.superseded_by) == (DAY[3], open_one.new_fact_id)
    assert retired.retired_at is not None
    assert _ids(facts.query(store, NS, as_of=DAY[2])) == [old.id]


def test_stage_facts_take_event_time_from_their_evidence(cstore, server, model):  # noqa: F811 (fixtures)
    paris_at = datetime(2026, 3, 1, 9, tzinfo=UTC)
    seed(cstore, "/t", ["Alice lives in Paris near the river Seine"], occurred_at=paris_at)
    runner.run_stage(cstore, "/t", "facts")
    [paris] = rows(cstore, "SELECT id, valid_from, valid_until, recorded_at FROM facts")
    assert paris["valid_from"] == paris_at and paris["valid_until"] is None
    assert paris["recorded_at"] > paris_at

    # an older statement arriving late becomes history before the current fact
    seed(cstore, "/t", ["Alice lives in Lyon since the spring"], occurred_at=datetime(2025, 6, 1, tzinfo=UTC))
    report = runner.run_stage(cstore, "/t", "facts")
    assert report.details["facts_created"] == 1 and "superseded" not in report.details
    lyon = rows(cstore, "SELECT * FROM facts WHERE value = 'Lyon'")[0]
    assert (lyon["valid_from"], lyon["valid_until"]) == (datetime(2025, 6, 1, tzinfo=UTC), paris_at)
    assert lyon["recorded_valid_until"] == paris_at and lyon["retired_at"] is None
    current = rows(cstore, "SELECT valid_until, superseded_by FROM facts WHERE id = %(id)s", id=paris["id"])[0]
    assert current == {"valid_until": None, "superseded_by": None}
    assert model.calls["contradictions"] == 0 and rows(cstore, "SELECT * FROM contradictions") == []

    # a newer statement with a date in its text holds from that date and supersedes at it
    stated = datetime(2026, 6, 15, tzinfo=UTC)
    seed(cstore, "/t", ["Alice lives in Berlin since 2026-06-15"], occurred_at=datetime(2026, 7, 1, tzinfo=UTC))
    report = runner.run_stage(cstore, "/t", "facts")
    assert report.details["superseded"] == 1
    berlin = rows(cstore, "SELECT id, valid_from FROM facts WHERE value = 'Berlin'")[0]
    assert berlin["valid_from"] == stated
    old = rows(cstore, "SELECT valid_until, superseded_by, retired_at FROM facts WHERE id = %(id)s", id=paris["id"])[0]
    assert (old["valid_until"], old["superseded_by"]) == (stated, berlin["id"]) and old["retired_at"] is not None
    assert model.calls["contradictions"] == 1  # Lyon's interval does not overlap Berlin's: no pair

    by_value = {f.value: f.id for f in facts.query(cstore, "/t", include_history=True)}
    for when, value in [(datetime(2025, 12, 1, tzinfo=UTC), "Lyon"), (datetime(2026, 4, 1, tzinfo=UTC), "Paris"),
                        (None, "Berlin")]:
        assert _ids(facts.query(cstore, "/t", as_of=when)) == [by_value[value]], value


def test_relationships_and_causal_links_carry_event_time(store):
    namespaces.create(store, NS)
    old = _engine(store, "The database runs MySQL 8", "mysql 8", valid_from=DAY[0]).fact
    slow = facts.assert_fact(store, NS, "The app got slow", entity="app", property="speed", value="slow",
                             valid_from=DAY[2]).fact
    with store.db.transaction() as tx:
        tx.all("stage_relationship_insert", namespace_id=namespaces.resolve_id(tx, NS), from_entity="db",
               relation_type="runs", to_entity="mysql", confidence=0.9, fact_id=old.id)
    link = graph.create_causal_link(store, NS, old.id, effect_id=slow.id)
    # a relationship holds while its source fact does: superseding the fact closes it too
    new = _engine(store, "The database runs Postgres 16", "postgres 16", valid_from=DAY[3], supersede=True).fact
    [rel] = rows(store, "SELECT valid_from, valid_until, recorded_at, retired_at FROM relationships")
    assert (rel["valid_from"], rel["valid_until"]) == (DAY[0], DAY[3]) and rel["retired_at"] is not None
    # a causal link holds from when both its facts did
    [stored] = rows(store, "SELECT valid_from, valid_until, retired_at FROM causal_links WHERE id = %(id)s",
                    id=link.id)
    assert stored == {"valid_from": DAY[2], "valid_until": None, "retired_at": None}
    assert graph.get_causal_link(store, link.id).valid_from == DAY[2]
    [listed] = graph.query_relationships(store, [NS])
    assert (listed.valid_from, listed.valid_until) == (DAY[0], DAY[3])
    # withdrawal retires the fact and, through the cascade, what was drawn from it
    facts.withdraw(store, old.id, "wrong")
    assert rows(store, "SELECT retired_at IS NOT NULL AS retired FROM causal_links") == [{"retired": True}]
    assert facts.get(store, new.id).retired_at is None


def test_tree_export_import_keeps_both_axes(store, tmp_path):
    namespaces.create(store, NS)
    _engine(store, "The database runs MySQL 8", "mysql 8", valid_from=DAY[0])
    _engine(store, "The database runs Postgres 16", "postgres 16", valid_from=DAY[3], supersede=True)
    _engine(store, "The database ran Oracle", "oracle", valid_from=DAY[0] - timedelta(days=30),
            valid_until=DAY[0] - timedelta(days=20))  # a stated end travels too
    columns = ("valid_from, valid_until, recorded_at, retired_at, recorded_valid_until, stated_valid_until, "
               "superseded_by IS NOT NULL AS s")
    before = rows(store, f"SELECT {columns} FROM facts ORDER BY id")
    path = tmp_path / "tree.jsonl"
    export.export_tree(store, NS, path)
    exported = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    assert all("recorded_valid_until" in r["row"] for r in exported if r["type"] == "fact")
    readers.import_export(store, path, into="/copy")
    after = rows(store, f"SELECT f.{columns.replace(', ', ', f.')} FROM facts f JOIN namespaces n "
                 "ON n.id = f.namespace_id WHERE n.slug = '/copy' ORDER BY f.id")
    assert after == before


def test_a_file_without_system_time_gets_it_derived(store, tmp_path):
    """An export written before facts had recorded_at/retired_at imports like the migration backfills."""
    namespaces.create(store, NS)
    _engine(store, "The database runs MySQL 8", "mysql 8", valid_from=DAY[0])
    _engine(store, "The database runs Postgres 16", "postgres 16", valid_from=DAY[3], supersede=True)
    path = tmp_path / "tree.jsonl"
    export.export_tree(store, NS, path)
    lines = path.read_text().splitlines()
    stripped = [lines[0]]
    for line in lines[1:]:
        record = json.loads(line)
        if record["type"] == "fact":
            for column in ("recorded_at", "retired_at", "recorded_valid_until"):
                record["row"].pop(column)
        stripped.append(json.dumps(record))
    path.write_text("\n".join(stripped) + "\n")
    readers.import_export(store, path, into="/copy")
    got = rows(store, "SELECT f.recorded_at = f.created_at AS recorded, f.retired_at = f.valid_until AS retired, "
               "f.valid_until FROM facts f JOIN namespaces n ON n.id = f.namespace_id WHERE n.slug = '/copy' "
               "ORDER BY f.id")
    assert got == [{"recorded": True, "retired": True, "valid_until": DAY[3]},
                   {"recorded": True, "retired": None, "valid_until": None}]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_mcp_tools_take_both_times(store):
    namespaces.create(store, NS)
    async with Client(build_server(store, auth=False)) as client:
        async def call(tool: str, arguments: dict[str, Any]) -> Any:
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, result.content[0].text
            return result.structured_content

        first = await call("assert_fact", {"content": "The database runs MySQL 8", "namespace": NS, "entity": "db",
                                           "property": "engine", "value": "mysql", "valid_from": "2026-01-01T00:00:00Z"})
        late = await call("assert_fact", {"content": "The database ran SQLite", "namespace": NS, "entity": "db",
                                          "property": "engine", "value": "sqlite", "supersede": True,
                                          "valid_from": "2025-01-01T00:00:00Z"})
        assert late["superseded_fact_ids"] == [] and late["fact"]["valid_until"].startswith("2026-01-01")
        page = await call("query_facts", {"namespaces": NS, "as_of": "2025-06-01T00:00:00Z"})
        assert [f["id"] for f in page["items"]] == [late["fact"]["id"]]
        page = await call("query_facts", {"namespaces": NS, "known_at": "2020-01-01T00:00:00Z"})
        assert page["items"] == []
        got = await call("get_fact", {"id": first["fact"]["id"], "as_of": "2025-06-01T00:00:00Z"})
        assert got["current"] is False
        hits = await call("recall", {"query": "database engine", "namespaces": NS, "as_of": "2025-06-01T00:00:00Z"})
        assert [h["id"] for h in hits["results"] if h["kind"] == "fact"] == [late["fact"]["id"]]
        bad = await client.call_tool("assert_fact", {"content": "x y", "namespace": NS,
                                                     "valid_from": "2026-01-02T00:00:00Z",
                                                     "valid_until": "2026-01-01T00:00:00Z"})
        assert bad.is_error and "valid_until" in bad.content[0].text


def test_cli_flags(store, database_url, tmp_path):
    namespaces.create(store, NS)
    env = {"STASH_DATABASE_URL": database_url, "STASH_HOME": str(tmp_path / "home"), "STASH_EMBEDDER": "hash"}
    runner = CliRunner()

    def run(*args: str) -> Any:
        result = runner.invoke(cli, list(args), env=env, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    made = run("fact", "assert", "The database runs MySQL 8", "-n", NS, "--entity", "db", "--property", "engine",
               "--value", "mysql", "--valid-from", "2026-01-01T00:00:00Z", "--valid-until", "2026-02-01T00:00:00Z",
               "--json")
    assert made["fact"]["valid_until"].startswith("2026-02-01")
    assert [f["id"] for f in run("facts", "-n", NS, "--as-of", "2026-01-15T00:00:00Z", "--json")] == [made["fact"]["id"]]
    assert run("facts", "-n", NS, "--as-of", "2026-01-15T00:00:00Z", "--known-at", "2020-01-01T00:00:00Z",
               "--json") == []
    shown = run("fact", "show", str(made["fact"]["id"]), "--as-of", "2026-01-15T00:00:00Z", "--json")
    assert shown["current"] is True


@pytest.fixture
def pre_bitemporal_dsn(database_at: Any) -> str:
    """A database migrated only up to 0007, the revision before the two time axes."""
    return str(database_at("0007"))


def test_migration_backfills_event_time_from_lineage(pre_bitemporal_dsn: str, tmp_path: Path) -> None:
    vector = "array_fill(0.1, ARRAY[384])::vector"
    with psycopg.connect(pre_bitemporal_dsn, autocommit=True) as conn:
        def one(sql: str, *params: Any) -> Any:
            return conn.execute(sql, params).fetchone()[0]

        ns = one("INSERT INTO namespaces (slug) VALUES ('/old') RETURNING id")
        episode_ids = [one(f"INSERT INTO episodes (namespace_id, content, occurred_at, embedding, embedding_model) "
                           f"VALUES (%s, %s, %s, {vector}, 'hash-384') RETURNING id", ns, text, when)
                       for text, when in [("we run MySQL", DAY[0]), ("MySQL again", DAY[1]), ("moved to Postgres", DAY[3])]]

        def fact(content: str, value: str) -> int:
            return one(f"INSERT INTO facts (namespace_id, content, entity, property, value, origin, embedding, "
                       f"embedding_model) VALUES (%s, %s, 'db', 'engine', %s, 'synthesis', {vector}, 'hash-384') "
                       "RETURNING id", ns, content, value)

        old, new, loose = fact("The db runs MySQL", "mysql"), fact("The db runs Postgres", "postgres"), fact(
            "The db is fast", "fast")
        for child, parent in [(old, episode_ids[0]), (old, episode_ids[1]), (new, episode_ids[2])]:
            conn.execute("INSERT INTO lineage (child_kind, child_id, parent_kind, parent_id, namespace_id) "
                         "VALUES ('fact', %s, 'episode', %s, %s)", (child, parent, ns))
        # supersession and withdrawal as 0007 stored them: valid_until = the moment it happened
        conn.execute("UPDATE facts SET valid_until = now(), superseded_by = %s WHERE id = %s", (new, old))
        conn.execute("UPDATE facts SET withdrawn_at = now(), withdrawn_reason = 'wrong' WHERE id = %s", (loose,))
        conn.execute("INSERT INTO relationships (namespace_id, from_entity, relation_type, to_entity, source_fact_id) "
                     "VALUES (%s, 'db', 'runs', 'postgres', %s)", (ns, new))
        conn.execute("INSERT INTO causal_links (namespace_id, cause_fact_id, effect_fact_id) VALUES (%s, %s, %s)",
                     (ns, old, new))
        stored = {r[0]: r[1:] for r in conn.execute("SELECT id, created_at, valid_until, withdrawn_at FROM facts")}

    settings = load_settings(database_url=pre_bitemporal_dsn, home=tmp_path, embedder="hash", vector_dim=384)
    migrate(settings, pre_bitemporal_dsn)
    with psycopg.connect(pre_bitemporal_dsn) as conn:
        got = {r[0]: r[1:] for r in conn.execute(
            "SELECT id, valid_from, valid_until, recorded_at, retired_at, recorded_valid_until FROM facts")}
        rel = conn.execute("SELECT valid_from, valid_until, recorded_at = created_at FROM relationships").fetchone()
        link = conn.execute("SELECT valid_from, valid_until, recorded_at = created_at FROM causal_links").fetchone()
    assert got[old] == (DAY[0], DAY[3], stored[old][0], stored[old][1], None)  # earliest evidence .. replacement
    assert got[new] == (DAY[3], None, stored[new][0], None, None)
    assert got[loose] == (stored[loose][0], None, stored[loose][0], stored[loose][2], None)  # no evidence
    assert rel == (DAY[3], None, True)
    assert link == (DAY[3], None, True)
    with Store.open(settings) as store:
        assert _ids(facts.query(store, "/old", as_of=DAY[2])) == [old]
        assert _ids(facts.query(store, "/old")) == [new]
