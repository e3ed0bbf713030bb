"""The pipeline page, in Chromium: every stage of a namespace with its cursor and backlog,
model calls and tokens, open dead letters with their errors shown as text."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

from stash_pipeline.memory import namespaces
from stash_pipeline.stages import STAGE_NAMES
from stash_serve.console.pipeline import asset_url, bar, runs_url
from testkit.browser import Browser
from tests.console.conftest import XSS, World, call, needs_chromium, never_ran_script, screenshot, sign_in

pytestmark = needs_chromium

#: a namespace of these tests' own, so the others' counts do not change
OWN = "/ops/pipeline"


def status_of(url: str, token: str) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def rows(browser: Browser, table: str) -> dict[str, list[str]]:
    """The rows of the stage table of a namespace, by stage: their cells' text."""
    found = browser.evaluate(
        f"Object.fromEntries([...document.querySelectorAll('table.stages[data-namespace=\"{table}\"] tbody tr')]"
        ".map(r => [r.dataset.stage, [...r.cells].map(c => c.innerText.trim())]))")
    assert isinstance(found, dict)
    return found


def test_every_stage_of_a_namespace_shows_its_cursor_and_backlog(browser: Browser, world: World) -> None:
    sign_in(browser, world, "alpha", "/pipeline?ns=/team/alpha")
    browser.wait_for("table.stages")
    stages = rows(browser, "/team/alpha")
    assert list(stages) == list(STAGE_NAMES)
    cursor, head, backlog = stages["facts"][1:4]
    assert (cursor, head, backlog) == ("0", str(max(world.ids["alpha_episodes"])), "4")  # four episodes waiting
    assert browser.evaluate("!!document.querySelector('tr[data-stage=\"facts\"] svg.bar rect + rect')")
    assert "/team/beta" not in browser.text()
    # another tree is out of reach, asked by name
    browser.goto(world.url("/pipeline?ns=/team/beta"))
    assert "outside this token's namespaces" in browser.text()


def test_dead_letters_and_model_calls_show_with_their_errors_as_text(browser: Browser, world: World,
                                                                      tmp_path: Path) -> None:
    call(world.store, "create_namespace", namespace=OWN)
    episode = call(world.store, "remember", content="The nightly export stalls on large tables", namespace=OWN).id
    with world.store.db.transaction() as tx:
        nsid = namespaces.resolve_id(tx, OWN)
        tx.conn.execute(
            "INSERT INTO dead_letters (namespace_id, stage, item_kind, item_id, attempts, last_error, status)"
            " VALUES (%s, 'facts', 'episode', %s, 3, %s, 'dead')", (nsid, episode, f"model answer invalid: {XSS}"))
        tx.conn.execute(
            "INSERT INTO model_calls (namespace_id, stage, model, prompt_tokens, completion_tokens, ok, error)"
            " VALUES (%s, 'facts', 'small-model', 1200, 300, true, NULL),"
            " (%s, 'facts', 'small-model', 800, 0, false, 'timed out after 60 s')", (nsid, nsid))
    sign_in(browser, world, "admin", f"/pipeline?ns={OWN}")
    browser.wait_for("table.dead-letters")
    facts = rows(browser, OWN)["facts"]
    assert facts[7] == "0 / 1"  # pending / dead
    assert facts[8:11] == ["2", "2000 / 300", "1"]  # calls, tokens in / out, errors
    error = browser.evaluate("document.querySelector('table.dead-letters td.error-text').innerText")
    assert error.startswith("model answer invalid: <script>window.__pwned = 1</script>")
    assert never_ran_script(browser)
    assert f"episode {episode}" in browser.text()
    # among several namespaces, one where nothing ran and nothing waits is one line
    browser.goto(world.url("/pipeline?ns=/ops"))
    browser.wait_for("table.dead-letters")
    assert browser.evaluate("document.querySelector('p.quiet').innerText").endswith("/ops.")
    assert browser.evaluate("[...document.querySelectorAll('table.stages')].map(t => t.dataset.namespace)") == [OWN]
    assert never_ran_script(browser)
    browser.set_viewport(1280, 960)  # the stages and the dead letters in one picture
    try:
        screenshot(browser, tmp_path, "pipeline")
    finally:
        browser.set_viewport(1280, 800)
    # a token for another tree sees none of it
    assert status_of(world.url(f"/pipeline?ns={OWN}"), world.tokens["alpha"]) == 403
    sign_in(browser, world, "alpha", "/pipeline")
    assert "model answer invalid" not in browser.text()


def test_a_bad_window_is_refused_and_the_dagster_links_have_the_uis_shape(world: World) -> None:
    assert status_of(world.url("/pipeline?days=3"), world.tokens["admin"]) == 400
    assert status_of(world.url("/pipeline?offset=-1"), world.tokens["admin"]) == 400
    assert runs_url("http://127.0.0.1:3000", "/team/alpha") == (
        "http://127.0.0.1:3000/runs?q%5B%5D=tag%3Adagster%2Fpartition%3D%2Fteam%2Falpha")
    assert asset_url("http://127.0.0.1:3000", "causal_links") == "http://127.0.0.1:3000/assets/causal_links"
    assert (bar(0, 10), bar(1, 1000), bar(10, 10)) == (0, 2, 100)
