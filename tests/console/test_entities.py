"""The Entities pages in Chromium: the list, an entity with the graph around it, merge with a
preview, and the scope and rights rules (another tree's entity is 404, a read-only token
sees no forms and its POST is refused)."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stash_pipeline.config import load_settings
from stash_pipeline.consolidation import runner
from stash_pipeline.consolidation.reasoner import reset_mode_cache
from stash_pipeline.models import GraphEdge, GraphNode, Neighbourhood
from stash_pipeline.store import Store
from stash_serve.console.graph import draw
from testkit.browser import Browser
from testkit.openai_server import ScriptedOpenAI
from testkit.scripted_model import ScriptedModel
from tests.console.conftest import (
    World,
    call,
    needs_chromium,
    never_ran_script,
    screenshot,
    sign_in,
    status_of,
)

pytestmark = needs_chromium

GRAPH = "/team/graph"
MERGE = "/team/merge"
#: facts whose relationships the scripted model reads: first capitalised name -> second
GRAPH_FACTS = [
    ("Alice", "employer", "Acme", "Alice works at Acme"),
    ("Acme", "city", "Lyon", "Acme is based in Lyon"),
    ("Bob", "reports", "Alice", "Bob manages Alice"),
    ("Dana", "mentor", "Bob", "Dana mentors Bob"),
    ("Alice", "city", "Berlin", "Alice lives in Berlin"),
    ("Alice", "database", "Postgres", "Alice maintains Postgres"),
    ("Carol", "pair", "Alice", "Carol pairs with Alice"),
]
#: the entities the relationships name
NAMES = ("Alice", "Acme", "Lyon", "Bob", "Dana", "Berlin", "Postgres", "Carol")


@pytest.fixture(scope="module")
def graph(world: World) -> Iterator[dict[str, int]]:
    """A namespace of its own whose relationships come from the relationships stage, run
    with the scripted model; the entity ids by name."""
    call(world.store, "create_namespace", namespace=GRAPH)
    for entity, prop, value, content in GRAPH_FACTS:
        call(world.store, "assert_fact", content=content, namespace=GRAPH, entity=entity, property=prop, value=value)
    reset_mode_cache()
    with ScriptedOpenAI(ScriptedModel(timeout_s=1.5)) as server:
        store = Store.open(load_settings(
            database_url=world.store.settings.database_url, home=world.store.settings.home, embedder="hash",
            vector_dim=384, openai_base_url=server.base_url, reasoner_model="scripted",
            reasoner_backoff_s=0.01, reasoner_timeout_s=5.0, reasoner_max_retries=1, reasoner_max_attempts=2))
        try:
            report = runner.run_stage(store, GRAPH, "relationships")
        finally:
            store.close()
    reset_mode_cache()
    assert report.rows_written == len(GRAPH_FACTS), report
    ids = {}
    for name in NAMES:
        ids[name] = entity_id(world, name, GRAPH)
    yield ids


def entity_id(world: World, name: str, namespace: str) -> int:
    """The id of the entity ``name`` in ``namespace``."""
    return int(call(world.store, "get_entity", name=name, namespaces=[namespace]).entity["id"])


def post(world: World, path: str, token: str, fields: dict[str, Any]) -> tuple[int, str]:
    request = urllib.request.Request(
        world.url(path), data=urllib.parse.urlencode(fields, doseq=True).encode(),
        headers={"Authorization": f"Bearer {world.tokens[token]}", "Origin": world.base,
                 "Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_list_shows_entities_with_their_facts_and_finds_by_name(browser: Browser, world: World,
                                                                   graph: dict[str, int]) -> None:
    sign_in(browser, world, "admin", f"/entities?ns={GRAPH}")
    browser.wait_for("table.entities")
    rows = browser.evaluate(
        "[...document.querySelectorAll('table.entities tbody tr')].map(r => [...r.cells].map(c => c.innerText.trim()))")
    names = {row[0].split(" #")[0]: row for row in rows}
    assert set(names) == set(NAMES)
    assert names["Alice"][3] == "3" and names["Lyon"][3] == "0"
    browser.goto(world.url(f"/entities?ns={GRAPH}&q=dan"))
    assert [r.split(" #")[0] for r in browser.evaluate(
        "[...document.querySelectorAll('table.entities tbody tr td:first-child')].map(c => c.innerText)")] == ["Dana"]


def test_an_entity_shows_its_facts_relationships_and_the_graph_around_it(browser: Browser, world: World,
                                                                        graph: dict[str, int],
                                                                        tmp_path: Path) -> None:
    sign_in(browser, world, "writer", f"/entities/{graph['Alice']}")
    browser.wait_for("svg.graph")
    text = browser.text()
    assert "Alice works at Acme" in text and "works_at" in text and "manages" in text
    nodes = browser.evaluate(
        "[...document.querySelectorAll('svg.graph a.node')].map(a => [a.dataset.entity, a.getAttribute('href')])")
    # Alice in the centre, Acme, Bob, Berlin, Postgres and Carol one hop away, Lyon and Dana two
    assert {int(i) for i, _ in nodes} == set(graph.values())
    assert all(href == f"/console/entities/{i}" for i, href in nodes)
    labels = browser.evaluate("[...document.querySelectorAll('svg.graph g.edge text')].map(t => t.textContent)")
    assert sorted(labels) == ["is_based_in", "lives_in", "maintains", "manages", "mentors", "pairs_with", "works_at"]
    screenshot(browser, tmp_path, "entity")
    # a node is a link to its entity's page
    browser.goto(world.url(nodes[-1][1].removeprefix("/console")))
    browser.wait_for("svg.graph")
    assert never_ran_script(browser)


def test_a_merge_is_previewed_then_made(browser: Browser, world: World) -> None:
    call(world.store, "create_namespace", namespace=MERGE)
    call(world.store, "assert_fact", content="Alice lives in Rome", namespace=MERGE, entity="Alice",
         property="city", value="Rome")
    call(world.store, "assert_fact", content="Ally drinks tea", namespace=MERGE, entity="Ally",
         property="drink", value="tea")
    keep = entity_id(world, "Alice", MERGE)
    gone = entity_id(world, "Ally", MERGE)
    sign_in(browser, world, "writer", f"/entities/{keep}")
    browser.wait_for("form.merge")
    browser.fill("form.merge input[name=merge]", "ally")  # by a name (or its id)
    browser.click("form.merge button")
    browser.wait_for("div.preview")
    assert browser.evaluate("document.querySelector('.moved .tag').innerText") == "ally"
    assert browser.evaluate("document.querySelector('.moved-facts').innerText") == "1"
    # nothing moved yet
    assert "ally" not in [a["normalised"] for a in call(world.store, "get_entity", id=keep).aliases]
    browser.fill("form.confirm input[name=note]", "Ally is Alice")
    browser.click("form.confirm button")
    browser.wait_for_text(f"Merged entity {gone} into this one")
    view = call(world.store, "get_entity", id=keep)
    assert {a["normalised"] for a in view.aliases} == {"alice", "ally"}
    assert {f["content"] for f in view.facts} == {"Alice lives in Rome", "Ally drinks tea"}
    assert "Ally is Alice" in browser.text()
    # and split off again: the preview says the merged entity comes back
    browser.click("form.split input[value=Ally]")
    browser.click("form.split button")
    browser.wait_for("div.preview")
    assert "back to" in browser.text() and f"#{gone}" in browser.text()
    browser.click("form.confirm button")
    browser.wait_for_text(f"Split the chosen aliases off to entity {gone}")
    assert {a["normalised"] for a in call(world.store, "get_entity", id=keep).aliases} == {"alice"}
    assert {a["normalised"] for a in call(world.store, "get_entity", id=gone).aliases} == {"ally"}


def test_a_read_only_token_sees_no_forms_and_its_post_is_refused(browser: Browser, world: World) -> None:
    alice = entity_id(world, "Alice", "/team/alpha")
    sign_in(browser, world, "alpha", f"/entities/{alice}")
    browser.wait_for_text("Alice lives in Berlin")
    assert browser.evaluate("document.querySelectorAll('form.merge, form.split, form.confirm').length") == 0
    assert "Correct it" not in browser.text()
    status, body = post(world, f"/entities/{alice}/merge", "alpha", {"merge_id": alice + 1})
    assert status == 403 and "write" in body
    status, _ = post(world, f"/entities/{alice}/split", "alpha", {"aliases": "Alice"})
    assert status == 403
    browser.goto(world.url(f"/entities/{alice}/merge?merge={alice + 1}"))
    assert "lacks the 'write' right" in browser.text()


def test_another_trees_entity_is_not_found(browser: Browser, world: World) -> None:
    bluebird = entity_id(world, "Bluebird", "/team/beta")
    sign_in(browser, world, "alpha", f"/entities/{bluebird}")
    text = browser.text()
    assert "not found" in text and "Bluebird" not in text
    sign_in(browser, world, "alpha", "/entities")
    assert "Bluebird" not in browser.text() and "Alice" in browser.text()
    browser.goto(world.url("/entities?ns=/team/beta"))
    assert "outside this token's namespaces" in browser.text() and "Bluebird" not in browser.text()


def test_an_entity_page_fits_a_phone(browser: Browser, world: World, graph: dict[str, int]) -> None:
    sign_in(browser, world, "writer", f"/entities/{graph['Alice']}")
    browser.set_viewport(390, 844)
    try:
        browser.goto(world.url(f"/entities/{graph['Alice']}"))
        assert browser.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 1
        assert browser.evaluate("document.querySelector('svg.graph').getBoundingClientRect().width") <= 390
    finally:
        browser.set_viewport(1280, 800)


def test_the_picture_escapes_every_name() -> None:
    payload = '<script>window.__pwned = 1</script>"><img src=x onerror=alert(1)>'
    hood = Neighbourhood(centre=1, truncated=False, nodes=[
        GraphNode(id=1, namespace="/x", name=payload, kind=None, hop=0),
        GraphNode(id=2, namespace="/x", name="Bob", kind=payload, hop=1)],
        edges=[GraphEdge(id=9, from_id=1, to_id=2, relation_type="knows", confidence=0.9)])
    picture = str(draw(hood))
    assert "<script" not in picture and "<img" not in picture and 'onerror=alert(1)>' not in picture
    assert "&lt;script&gt;" in picture and picture.count("<a ") == 2


def test_a_crowded_picture_names_its_commonest_relation_once() -> None:
    nodes = [GraphNode(id=1, namespace="/x", name="Hub", hop=0)]
    nodes += [GraphNode(id=i, namespace="/x", name=f"N{i}", hop=1) for i in range(2, 30)]
    edges = [GraphEdge(id=i, from_id=1, to_id=i, relation_type="knows" if i % 7 else "manages", confidence=0.9)
             for i in range(2, 30)]
    picture = str(draw(Neighbourhood(centre=1, nodes=nodes, edges=edges, truncated=False)))
    assert picture.count("<a ") == 29 and picture.count('class="edge"') == 28
    assert "unlabelled arrows: knows" in picture
    assert picture.count(">manages</text>") == 4 and ">knows</text>" not in picture


def test_only_an_admin_is_offered_the_erasure_of_an_entity(world: World) -> None:
    alice = entity_id(world, "Alice", "/team/alpha")

    assert f"/console/erase/entity/{alice}" in status_of(world, "admin", f"/entities/{alice}")[1]
    assert "/console/erase/" not in status_of(world, "writer", f"/entities/{alice}")[1]
