"""Erasure in Chromium: the preview lists everything the purge takes, the confirmation
erases exactly that, and only an admin inside the record's trees may do it."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest

from stash_pipeline import errors
from stash_pipeline.memory import facts, namespaces
from testkit.browser import Browser
from tests.console.conftest import XSS, World, call, needs_chromium, never_ran_script, screenshot, sign_in

pytestmark = needs_chromium

#: a namespace of these tests' own: what they erase is theirs
OWN = "/erasing/console"


def status_of(url: str, token: str, data: bytes | None = None, origin: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {token}"}
    if data is not None:
        headers |= {"Content-Type": "application/x-www-form-urlencoded", "Origin": origin or ""}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers, data=data), timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def listed(browser: Browser, kind: str) -> list[int]:
    found = browser.evaluate(
        f"[...document.querySelectorAll('tbody.kind[data-kind=\"{kind}\"] tr[data-id]')].map(r => +r.dataset.id)")
    assert isinstance(found, list)
    return found


def test_the_preview_lists_what_the_purge_erases_and_the_confirmation_erases_it(
        browser: Browser, world: World, tmp_path: Path) -> None:
    store = world.store
    call(store, "create_namespace", namespace=OWN)
    episode = call(store, "remember", content="Rosa keeps the vault codes in a red notebook", namespace=OWN).id
    kept = call(store, "remember", content="Rosa's office is on the third floor", namespace=OWN).id
    stated = call(store, "assert_fact", content="Rosa keeps the vault codes in a notebook", namespace=OWN,
                  entity="Rosa", property="notebook", value="red", source_episode_ids=[episode]).fact.id
    with store.db.transaction() as tx:
        derived = int(facts.insert_fact(tx, store, namespace_id=namespaces.resolve_id(tx, OWN),
                                        content="The vault codes are <b>written down</b>", origin="synthesis",
                                        confidence=0.8, parents=[("fact", stated)])["id"])

    sign_in(browser, world, "admin", f"/erase/episode/{episode}")
    browser.wait_for("form.erase")
    assert listed(browser, "episode") == [episode]
    assert listed(browser, "fact") == [stated, derived]
    assert "The vault codes are <b>written down</b>" in browser.text()  # stored text, shown as text
    assert browser.evaluate("document.querySelector('form.erase').dataset.confirm").startswith("Erase episode")
    screenshot(browser, tmp_path, "erase")
    # the preview changed nothing
    assert call(store, "get_fact", id=derived).id == derived

    # without the box ticked nothing goes
    browser.evaluate("document.querySelector('input[name=confirm]').required = false; window.confirm = () => true")
    browser.click("form.erase button")
    browser.wait_for_text("nothing was erased")
    assert call(store, "get_episode", id=episode).id == episode

    browser.evaluate("window.confirm = () => true")  # the little script asks first; a person says yes
    browser.click("input[name=confirm]")
    browser.click("form.erase button")
    browser.wait_for_text(f"Erased episode {episode}")
    assert browser.evaluate("document.querySelector('.erased-facts').innerText") == f"{stated}, {derived}"
    for name, ident in (("get_fact", stated), ("get_fact", derived), ("get_episode", episode)):
        with pytest.raises(errors.RecordNotFound):
            call(store, name, id=ident)
    assert call(store, "get_episode", id=kept).id == kept


def test_a_stored_script_in_the_preview_is_text_and_facts_and_entities_preview_too(browser: Browser, world: World) -> None:
    sign_in(browser, world, "admin", f"/erase/episode/{world.ids['alpha_episodes'][3]}")
    browser.wait_for("form.erase")
    assert "<script>window.__pwned = 1</script>" in browser.text()
    assert XSS.startswith("<script>") and never_ran_script(browser)
    # a fact's and an entity's preview, in the same tree
    browser.goto(world.url(f"/erase/fact/{world.ids['facts']['paris']}"))
    assert "Alice lives in Paris" in browser.text()
    with world.store.db.transaction() as tx:
        alice = tx.conn.execute("SELECT entity_id FROM facts WHERE id = %s", (world.ids["facts"]["paris"],)).fetchone()
    browser.goto(world.url(f"/erase/entity/{alice['entity_id']}"))
    assert listed(browser, "fact") == sorted(world.ids["facts"].values())  # every fact about Alice
    assert "Episodes that mention the entity stay" in browser.text()
    browser.goto(world.url("/erase/nothing/1"))
    assert "erase an episode, a fact or an entity" in browser.text()


def test_only_an_admin_inside_the_records_trees_may_erase(world: World) -> None:
    alpha_episode = world.ids["alpha_episodes"][0]
    # writer reads and writes /team, but erasing from the console needs admin: 403, GET or POST
    assert status_of(world.url(f"/erase/episode/{alpha_episode}"), world.tokens["writer"]) == 403
    assert status_of(world.url(f"/erase/episode/{alpha_episode}"), world.tokens["writer"], b"confirm=yes",
                     world.base) == 403
    # alpha reads /team/alpha only: a /team/beta record does not exist for it (404), its own is 403
    assert status_of(world.url(f"/erase/fact/{world.ids['beta_fact']}"), world.tokens["alpha"]) == 404
    assert status_of(world.url(f"/erase/episode/{world.ids['beta_episodes'][0]}"), world.tokens["alpha"]) == 404
    assert status_of(world.url(f"/erase/episode/{alpha_episode}"), world.tokens["alpha"]) == 403
    # a change from another site is refused before anything else
    assert status_of(world.url(f"/erase/episode/{alpha_episode}"), world.tokens["admin"], b"confirm=yes",
                     "http://evil.test") == 403
    assert call(world.store, "get_episode", id=alpha_episode).id == alpha_episode
