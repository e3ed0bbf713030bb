"""An entity's profiles on its console page, in Chromium: what the profiles stage gathered is
shown apart from the facts and links to its fact page, and another tree's profile of an
entity of the same name is not shown to a token scoped elsewhere."""

from __future__ import annotations

import html
from collections.abc import Iterator
from typing import Any

import pytest

from stash_pipeline.consolidation import runner
from testkit.browser import Browser
from tests.console.conftest import World, call, click_through, needs_chromium, sign_in, status_of

pytestmark = needs_chromium

#: in the writer's tree (/team) and outside it (/other); the same name in both
OURS = "/team/profiles"
THEIRS = "/other/profiles"
#: hobbies the profiles stage files under one aspect (with the tests' hash embedder too)
HOBBIES = {
    OURS: ["Frida paints watercolours for fun in her free time",
           "Frida plays chess as a pastime in her free time"],
    THEIRS: ["Frida goes kayaking for fun in her free time",
             "Frida bakes sourdough bread as a pastime in her free time"],
}


@pytest.fixture(scope="module")
def frida(world: World) -> Iterator[dict[str, dict[str, Any]]]:
    """Frida in each namespace, her hobbies asserted and the profiles stage run: per
    namespace the entity id and its one profile fact."""
    found = {}
    for namespace, hobbies in HOBBIES.items():
        call(world.store, "create_namespace", namespace=namespace)
        for i, text in enumerate(hobbies):
            call(world.store, "assert_fact", content=text, namespace=namespace, entity="Frida",
                 property=f"hobby {i}", value=text)
        report = runner.run_stage(world.store, namespace, "profiles")
        assert report.status == "ok" and report.details.get("profiles_written") == 1, report
        view = call(world.store, "get_entity", name="Frida", namespaces=[namespace])
        [profile] = [f for f in view.facts if f["origin"] == "profile"]
        found[namespace] = {"entity": int(view.entity["id"]), "profile": profile}
    yield found


def test_the_entity_page_shows_its_profile_and_links_to_it(browser: Browser, world: World,
                                                          frida: dict[str, dict[str, Any]]) -> None:
    ours = frida[OURS]
    profile = ours["profile"]
    assert profile["content"].startswith("Frida's hobbies and interests: "), profile
    sign_in(browser, world, "writer", f"/entities/{ours['entity']}")
    browser.wait_for("div.card.profile")
    cards = browser.evaluate(
        "[...document.querySelectorAll('div.card.profile')].map(c => [c.dataset.fact,"
        " c.querySelector('.content').innerText.trim(), c.querySelector('.meta a').getAttribute('href')])")
    assert cards == [[str(profile["id"]), profile["content"], f"/console/facts/{profile['id']}"]], cards
    assert "watercolours" in cards[0][1] and "chess" in cards[0][1]
    # the profile is shown apart: not among the facts' rows, where its members are
    rows = browser.evaluate("[...document.querySelectorAll('tr[data-fact]')].map(r => r.dataset.fact)")
    assert str(profile["id"]) not in rows and len(rows) == len(HOBBIES[OURS]), rows
    # nothing of the other tree's Frida
    text = browser.text()
    assert "kayaking" not in text and "sourdough" not in text
    # the link leads to the profile's fact page
    click_through(browser, "div.card.profile .meta a")
    assert browser.url.endswith(f"/console/facts/{profile['id']}")
    assert profile["content"] in browser.text() and "profile" in browser.text()


def test_another_trees_profile_is_not_shown_to_a_token_scoped_elsewhere(
        world: World, frida: dict[str, dict[str, Any]]) -> None:
    theirs = frida[THEIRS]
    path = f"/entities/{theirs['entity']}"
    status, body = status_of(world, "admin", path)
    assert status == 200 and theirs["profile"]["content"] in html.unescape(body)  # there to be shown
    status, body = status_of(world, "writer", path)
    assert status == 404, status
    body = html.unescape(body)
    assert "kayaking" not in body and "sourdough" not in body and theirs["profile"]["content"] not in body
