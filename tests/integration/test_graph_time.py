"""as_of and known_at on the graph: query_relationships, list_causal_links,
trace_causal_chain and get_entity read the graph as it was, with query_facts' meaning
(library, MCP tools and CLI)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from click.testing import CliRunner
from mcp import Client

from stash_pipeline.memory import entities, facts, graph, namespaces
from stash_pipeline.store import Store
from stash_serve.cli import cli
from stash_serve.mcp.server import build_server

NS = "/people"


def year(n: int) -> datetime:
    return datetime(n, 1, 1, tzinfo=UTC)


def _works(store: Store, company: str, since: int, **kwargs: Any) -> int:
    return facts.assert_fact(store, NS, f"Alice works at {company}", entity="Alice", property="works_at",
                             value=company, valid_from=year(since), **kwargs).fact.id


def _relationship(store: Store, fact_id: int, to: str) -> int:
    with store.db.transaction() as tx:
        return int(tx.scalar("stage_relationship_insert", namespace_id=namespaces.resolve_id(tx, NS),
                             from_entity="alice", relation_type="works_at", to_entity=to, confidence=0.9,
                             fact_id=fact_id))


def _ids(found: list[Any]) -> list[int]:
    return [r.id for r in found]


@pytest.fixture
def history(store: Store) -> dict[str, Any]:
    """Acme from 2020 (relationship), recorded; then Globex from 2023 superseding it (relationship),
    a causal link from Globex to a slow app; ``before_globex`` is a system time in between."""
    namespaces.create(store, NS)
    acme = _works(store, "Acme", 2020)
    acme_rel = _relationship(store, acme, "acme")
    time.sleep(0.05)
    before_globex = datetime.now(UTC)
    time.sleep(0.05)
    globex = _works(store, "Globex", 2023, supersede=True)
    globex_rel = _relationship(store, globex, "globex")
    slow = facts.assert_fact(store, NS, "The app got slow", entity="app", property="speed", value="slow",
                             valid_from=year(2024)).fact.id
    link = graph.create_causal_link(store, NS, globex, effect_id=slow).id
    return {"acme": acme, "globex": globex, "acme_rel": acme_rel, "globex_rel": globex_rel, "slow": slow,
            "link": link, "before_globex": before_globex}


def test_relationships_as_of_and_known_at(store, history):
    h = history
    assert _ids(graph.query_relationships(store, [NS])) == [h["acme_rel"], h["globex_rel"]]  # every state
    assert _ids(graph.query_relationships(store, [NS], as_of=year(2021))) == [h["acme_rel"]]
    assert _ids(graph.query_relationships(store, [NS], as_of=year(2024))) == [h["globex_rel"]]
    assert _ids(graph.query_relationships(store, [NS], known_at=datetime.now(UTC))) == [h["globex_rel"]]
    # as Stash knew it before Globex: Acme's relationship was open-ended, and the only one
    assert _ids(graph.query_relationships(store, [NS], as_of=year(2024), known_at=h["before_globex"])) == [
        h["acme_rel"]]
    assert graph.query_relationships(store, [NS], known_at=year(2000)) == []
    facts.withdraw(store, h["acme"], "wrong")
    assert graph.query_relationships(store, [NS], as_of=year(2021)) == []
    assert _ids(graph.query_relationships(store, [NS], as_of=year(2021), known_at=h["before_globex"])) == [
        h["acme_rel"]]


def test_causal_links_and_traces_as_of_and_known_at(store, history):
    h = history
    assert _ids(graph.list_causal_links(store, [NS])) == [h["link"]]
    assert graph.list_causal_links(store, [NS], as_of=year(2023)) == []  # both ends hold from 2024
    assert _ids(graph.list_causal_links(store, [NS], as_of=year(2025))) == [h["link"]]
    assert graph.list_causal_links(store, [NS], known_at=h["before_globex"]) == []
    assert [s.link_id for s in graph.trace_causal_chain(store, h["globex"])] == [h["link"]]
    assert graph.trace_causal_chain(store, h["globex"], known_at=h["before_globex"]) == []
    assert graph.trace_causal_chain(store, h["slow"], direction="backward", as_of=year(2023)) == []
    after_link = datetime.now(UTC)
    time.sleep(0.05)
    facts.withdraw(store, h["slow"], "not slow")  # the cascade withdraws the link
    assert graph.list_causal_links(store, [NS], as_of=year(2025)) == []
    assert _ids(graph.list_causal_links(store, [NS], as_of=year(2025), known_at=after_link)) == [h["link"]]
    assert [s.link_id for s in graph.trace_causal_chain(store, h["globex"], known_at=after_link)] == [h["link"]]


def test_get_entity_as_of_and_known_at(store, history):
    h = history
    now = entities.get_entity(store, name="Alice", namespaces=[NS])
    assert [f["id"] for f in now.facts] == [h["globex"]]
    then = entities.get_entity(store, name="Alice", namespaces=[NS], as_of=year(2021))
    assert [f["id"] for f in then.facts] == [h["acme"]]
    known = entities.get_entity(store, name="Alice", namespaces=[NS], known_at=h["before_globex"])
    assert [f["id"] for f in known.timeline] == [h["acme"]]
    assert known.timeline[0]["valid_until"] is None and known.facts[0]["id"] == h["acme"]


def test_get_entity_finds_causal_links_by_either_end(store, history):
    h = history
    # Alice's fact is the link's cause, the app's its effect: each entity lists it once
    for name in ("Alice", "app"):
        assert [c["id"] for c in entities.get_entity(store, name=name, namespaces=[NS]).causal_links] == [h["link"]]
        assert entities.get_entity(store, name=name, namespaces=[NS], as_of=year(2023)).causal_links == []
    # a link between two facts of one entity is listed once, not once per end
    own = facts.assert_fact(store, NS, "Alice moved to Berlin", entity="Alice", property="lives_in",
                            value="Berlin", valid_from=year(2024)).fact.id
    inner = graph.create_causal_link(store, NS, h["globex"], effect_id=own).id
    found = entities.get_entity(store, name="Alice", namespaces=[NS]).causal_links
    assert [c["id"] for c in found] == [h["link"], inner]


def _moment() -> datetime:
    """A system time strictly between the change before and the change after."""
    time.sleep(0.05)
    moment = datetime.now(UTC)
    time.sleep(0.05)
    return moment


def test_a_relationship_read_between_the_second_and_third_change_of_its_end(store, history):
    """Acme's relationship ends in 2023 (Globex, 1st change), then in 2021 (Initech learnt
    late, 2nd), then in 2023 again (Initech withdrawn, 3rd): known between the 2nd and 3rd
    change it ended in 2021; with one earlier state per row it read open-ended there."""
    h = history
    initech = _works(store, "Initech", 2021, supersede=True)
    between = _moment()
    facts.withdraw(store, initech, "wrong")
    mid_2022 = datetime(2022, 6, 1, tzinfo=UTC)
    assert graph.query_relationships(store, [NS], as_of=mid_2022, known_at=between) == []
    assert _ids(graph.query_relationships(store, [NS], as_of=mid_2022)) == [h["acme_rel"]]
    assert _ids(graph.query_relationships(store, [NS], as_of=mid_2022, known_at=h["before_globex"])) == [
        h["acme_rel"]]


def test_a_link_withdrawn_and_derived_again_was_gone_in_between(store, history):
    """A rebuild withdraws a relationship and a causal link, the stages derive them again:
    read as known while they were withdrawn, neither holds; before and after, both do."""
    h = history
    before = _moment()
    with store.db.transaction() as tx:
        tx.all("lineage_withdraw_relationships", ids=[h["globex_rel"]], fact_ids=[])
        tx.all("lineage_withdraw_causal_links", ids=[h["link"]], fact_ids=[])
    withdrawn = _moment()
    _relationship(store, h["globex"], "globex")  # brought back: the same row
    with store.db.transaction() as tx:
        assert tx.scalar("stage_causal_insert", namespace_id=namespaces.resolve_id(tx, NS), cause_id=h["globex"],
                         effect_id=h["slow"], confidence=0.9, rationale="again") == h["link"]
    at = year(2025)
    for known, held in ((before, True), (withdrawn, False), (None, True)):
        assert _ids(graph.query_relationships(store, [NS], as_of=at, known_at=known)) == (
            [h["globex_rel"]] if held else []), known
        assert _ids(graph.list_causal_links(store, [NS], as_of=at, known_at=known)) == (
            [h["link"]] if held else []), known


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_mcp_tools_take_both_times(store, history):
    h = history
    async with Client(build_server(store, auth=False)) as client:
        async def call(tool: str, arguments: dict[str, Any]) -> Any:
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, result.content[0].text
            return result.structured_content

        rels = await call("query_relationships", {"namespaces": NS, "as_of": "2021-06-01T00:00:00Z"})
        assert [r["id"] for r in rels["items"]] == [h["acme_rel"]]
        links = await call("list_causal_links", {"namespaces": NS, "as_of": "2023-06-01T00:00:00Z"})
        assert links["items"] == []
        trace = await call("trace_causal_chain", {"fact_id": h["globex"], "known_at": "2001-01-01T00:00:00Z"})
        assert trace["steps"] == []
        got = await call("get_entity", {"name": "Alice", "namespaces": NS, "as_of": "2021-06-01T00:00:00Z"})
        assert [f["id"] for f in got["facts"]] == [h["acme"]]
        bad = await client.call_tool("query_relationships", {"namespaces": NS, "as_of": "soon"})
        assert bad.is_error and "as_of" in bad.content[0].text


def test_cli_flags(store, history, database_url, tmp_path):
    h = history
    env = {"STASH_DATABASE_URL": database_url, "STASH_HOME": str(tmp_path / "home"), "STASH_EMBEDDER": "hash"}

    def run(*args: str) -> Any:
        result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    assert [r["id"] for r in run("relationships", "-n", NS, "--as-of", "2021-06-01", "--json")] == [h["acme_rel"]]
    assert run("causal", "list", "-n", NS, "--known-at", "2001-01-01", "--json") == []
    assert run("causal", "trace", str(h["globex"]), "--as-of", "2023-06-01", "--json") == []
    shown = run("entities", "show", "Alice", "-n", NS, "--as-of", "2021-06-01", "--json")
    assert [f["id"] for f in shown["facts"]] == [h["acme"]]
