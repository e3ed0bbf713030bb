"""The history of ends (migration 0016): every change of a fact's end, and of a
relationship's or causal link's end or withdrawal, is kept with its system time, on every
write path (a trigger), travels with an export, and an old database's retired rows get
the one change their columns describe, so known_at reads of old data answer as before."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from stash_pipeline.config import load_settings
from stash_pipeline.db.migrate import migrate
from stash_pipeline.interchange import export, readers
from stash_pipeline.memory import facts, graph, namespaces
from stash_pipeline.store import Store
from stash_serve.mcp.server import build_server
from tests.integration.consolidation.conftest import rows
from tests.mcp.conftest import ok

NS = "/ends"


def year(n: int) -> datetime:
    return datetime(n, 1, 1, tzinfo=UTC)


def _works(store: Store, company: str, since: int, ns: str = NS, **kwargs: Any) -> int:
    return facts.assert_fact(store, ns, f"Alice works at {company}", entity="Alice", property="works_at",
                             value=company, valid_from=year(since), **kwargs).fact.id


def _moment() -> datetime:
    time.sleep(0.05)
    moment = datetime.now(UTC)
    time.sleep(0.05)
    return moment


def _changed_three_times(store: Store) -> dict[str, Any]:
    """Acme from 2010 with a relationship; its end: 2014 (Globex), 2012 (Initech learnt
    late), 2014 again (Initech withdrawn). ``between``: after the 2nd change, before the 3rd."""
    namespaces.create(store, NS)
    acme = _works(store, "Acme", 2010)
    with store.db.transaction() as tx:
        rel = int(tx.scalar("stage_relationship_insert", namespace_id=namespaces.resolve_id(tx, NS),
                            from_entity="alice", relation_type="works_at", to_entity="acme", confidence=0.9,
                            fact_id=acme))
    _moment()
    _works(store, "Globex", 2014, supersede=True)
    initech = _works(store, "Initech", 2012, supersede=True)
    between = _moment()
    facts.withdraw(store, initech, "wrong")
    return {"acme": acme, "rel": rel, "between": between}


def _read(store: Store, ns: str, known: datetime) -> dict[str, Any]:
    at = datetime(2013, 7, 1, tzinfo=UTC)
    return {"facts": sorted(f.value for f in facts.query(store, ns, as_of=at, known_at=known)),
            "relationships": [r.to_entity for r in graph.query_relationships(store, [ns], as_of=at, known_at=known)],
            "now": sorted(f.value for f in facts.query(store, ns, as_of=at))}


def test_every_change_of_an_end_is_kept_once_per_transaction(store):
    h = _changed_three_times(store)
    ends = rows(store, "SELECT valid_until FROM fact_ends WHERE fact_id = %(id)s ORDER BY replaced_at", id=h["acme"])
    assert [e["valid_until"] for e in ends] == [None, year(2014), year(2012)]
    rel = rows(store, "SELECT valid_until, withdrawn_since FROM relationship_ends WHERE relationship_id = %(id)s "
               "ORDER BY replaced_at", id=h["rel"])
    assert rel == [{"valid_until": None, "withdrawn_since": None}, {"valid_until": year(2014), "withdrawn_since": None},
                   {"valid_until": year(2012), "withdrawn_since": None}]
    # a change made while recording a fact is no change anyone could read
    with store.db.transaction() as tx:
        made = tx.conn.execute("SELECT count(*) AS n FROM fact_ends").fetchone()["n"]
    _works(store, "Hooli", 2009, supersede=True)  # recorded ending at 2010 in one transaction
    assert rows(store, "SELECT count(*) AS n FROM fact_ends") == [{"n": made}]
    # decay's expiry (a path outside the timeline) is kept too
    with store.db.transaction() as tx:
        tx.execute("decay_expire_facts", namespace_id=namespaces.resolve_id(tx, NS), threshold=2.0)
    expired = rows(store, "SELECT f.value, e.valid_until FROM fact_ends e JOIN facts f ON f.id = e.fact_id "
                   "WHERE f.value = 'Globex'")
    assert expired == [{"value": "Globex", "valid_until": None}]  # open-ended until it expired
    # any path that changes an end, even one written by hand, leaves its history
    with store.db.transaction() as tx:
        tx.conn.execute("UPDATE facts SET valid_until = %s WHERE id = %s", (year(2013), h["acme"]))
        tx.conn.execute("UPDATE facts SET valid_until = %s WHERE id = %s", (year(2015), h["acme"]))
    ends = rows(store, "SELECT valid_until FROM fact_ends WHERE fact_id = %(id)s ORDER BY replaced_at", id=h["acme"])
    assert [e["valid_until"] for e in ends] == [None, year(2014), year(2012), year(2014)]  # one change: the first end


def test_the_history_travels_with_an_export(store, tmp_path):
    h = _changed_three_times(store)
    expected = {"facts": ["Initech"], "relationships": [], "now": ["Acme"]}
    assert _read(store, NS, h["between"]) == expected
    tree = tmp_path / "tree.jsonl"
    export.export_tree(store, NS, tree)
    readers.import_export(store, tree, into="/copy")
    assert _read(store, "/copy", h["between"]) == expected
    tables = tmp_path / "tables"
    export.export_tables(store, NS, tables)
    readers.import_export(store, tables, into="/copy2")
    assert _read(store, "/copy2", h["between"]) == expected
    # the same history, replacements included, and nothing more (an import's own updates are no change)
    query = ("SELECT f.content, e.valid_until, r.content AS replacement, e.replaced_at FROM fact_ends e "
             "JOIN facts f ON f.id = e.fact_id LEFT JOIN facts r ON r.id = e.superseded_by "
             "JOIN namespaces n ON n.id = e.namespace_id WHERE n.slug = %(ns)s ORDER BY 1, 4")
    assert rows(store, query, ns="/copy") == rows(store, query, ns="/copy2") == rows(store, query, ns=NS)


def test_a_replacement_reads_as_known_between_a_restore_and_the_next_supersession(store):
    """Acme superseded by Globex (t1), Globex withdrawn so Acme is restored (t2), Acme
    superseded by Initech (t3): known between t1 and t2, Acme was superseded by Globex and
    ended in 2012; between t2 and t3 by nothing, open-ended. With 0013's rule (none before
    the fact was last retired, else the current replacement) the first read said none."""
    namespaces.create(store, NS)
    acme = _works(store, "Acme", 2010)
    globex = _works(store, "Globex", 2012, supersede=True)
    after_t1 = _moment()
    facts.withdraw(store, globex, "wrong")
    after_t2 = _moment()
    initech = _works(store, "Initech", 2014, supersede=True)
    held = {known: (facts.get(store, acme, known_at=known).superseded_by, facts.get(store, acme, known_at=known).valid_until)
            for known in (after_t1, after_t2)}
    assert held == {after_t1: (globex, year(2012)), after_t2: (None, None)}
    assert (facts.get(store, acme).superseded_by, facts.get(store, acme).valid_until) == (initech, year(2014))
    in_2011 = datetime(2011, 7, 1, tzinfo=UTC)
    [then] = facts.query(store, NS, as_of=in_2011, known_at=after_t1)
    assert (then.id, then.superseded_by) == (acme, globex)
    history = {f.id: f.superseded_by for f in facts.query(store, NS, include_history=True)}
    assert history[acme] == initech

    async def through_mcp() -> tuple[Any, Any, Any]:  # the tools, through the SDK's client
        async with Client(build_server(store, auth=False)) as client:
            got = await ok(client, "get_fact", {"id": acme, "known_at": after_t1.isoformat()})
            listed = await ok(client, "query_facts", {"namespaces": NS, "as_of": in_2011.isoformat(),
                                                      "known_at": after_t1.isoformat()})
            now = await ok(client, "query_facts", {"namespaces": NS, "include_history": True})
        return got, listed, now

    got, listed, now = anyio.run(through_mcp)
    assert got["superseded_by"] == globex and got["current"] is False
    assert [(f["id"], f["superseded_by"]) for f in listed["items"]] == [(acme, globex)]
    assert {f["id"]: f.get("superseded_by") for f in now["items"]}[acme] == initech


@pytest.fixture
def at_0015(database_at: Any) -> str:
    return str(database_at("0015"))


def test_old_retired_rows_read_as_they_did(at_0015: str, tmp_path: Path) -> None:
    settings = load_settings(database_url=at_0015, home=tmp_path, embedder="hash", vector_dim=384)
    with Store.open(settings) as store:
        namespaces.create(store, "/old")
        acme = _works(store, "Acme", 2010, ns="/old")
        with store.db.transaction() as tx:
            rel = int(tx.scalar("stage_relationship_insert", namespace_id=namespaces.resolve_id(tx, "/old"),
                                from_entity="alice", relation_type="works_at", to_entity="acme", confidence=0.9,
                                fact_id=acme))
        before = _moment()
        _works(store, "Globex", 2014, ns="/old", supersede=True)
        after = _moment()

        def read() -> list[Any]:  # the relationships by the visibility function both schemas have
            return [(sorted(f.value for f in facts.query(store, "/old", as_of=year(2015), known_at=known)),
                     [r["id"] for r in rows(store, "SELECT id FROM relationships r "
                                            "WHERE relationship_visible(r, %(at)s, %(known)s, false)",
                                            at=year(2015), known=known)])
                    for known in (before, after, None)]

        old = read()
    assert old == [(["Acme"], [rel]), (["Globex"], []), (["Globex"], [])]
    migrate(settings, at_0015)
    with Store.open(settings) as store:
        assert rows(store, "SELECT fact_id, valid_until FROM fact_ends") == [{"fact_id": acme, "valid_until": None}]
        assert rows(store, "SELECT relationship_id, valid_until FROM relationship_ends") == [
            {"relationship_id": rel, "valid_until": None}]
        assert read() == old
        # and the next change is kept on top: Globex withdrawn, Acme runs on again
        globex = next(f.id for f in facts.query(store, "/old") if f.value == "Globex")
        facts.withdraw(store, globex, "wrong")
        assert read()[:2] == old[:2]


def test_a_purged_replacement_is_gone_from_the_history(store, tmp_path):
    """Acme superseded by Globex, Globex purged: as known before the purge Acme ended when
    it did, replaced by nothing (not by the id of a row that no longer exists), and an
    export carries no such id (its import reported it as a dropped reference)."""
    namespaces.create(store, NS)
    acme = _works(store, "Acme", 2010)
    globex = _works(store, "Globex", 2012, supersede=True)
    known = _moment()
    assert (facts.get(store, acme, known_at=known).superseded_by, facts.get(store, acme).superseded_by) == (globex, globex)
    facts.purge(store, globex)
    assert rows(store, "SELECT count(*) AS n FROM fact_ends WHERE superseded_by = %(id)s", id=globex) == [{"n": 0}]
    then = facts.get(store, acme, known_at=known)
    assert (then.superseded_by, then.valid_until) == (None, year(2012))  # its end as it was, kept
    assert (facts.get(store, acme).superseded_by, facts.get(store, acme).valid_until) == (None, None)
    tree = tmp_path / "tree.jsonl"
    export.export_tree(store, NS, tree)
    report = readers.import_export(store, tree, into="/copy")
    assert (report["problems"], report["skipped"]) == ([], {})
    [copied] = [f.id for f in facts.query(store, "/copy")]
    assert facts.get(store, copied, known_at=known).valid_until == year(2012)
