"""The episode timeline and an episode's page, in Chromium: filters, search, paging,
what was derived, scope by URL and escaping."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from testkit.browser import Browser
from tests.console.conftest import (
    World,
    call,
    click_through,
    needs_chromium,
    never_ran_script,
    screenshot,
    sign_in,
    status_of,
)

pytestmark = needs_chromium

ROWS = "[...document.querySelectorAll('table.episodes tbody tr')]"


def episode_ids(browser: Browser) -> list[int]:
    return [int(i) for i in browser.evaluate(f"{ROWS}.map(r => r.dataset.episode)")]


@pytest.fixture(scope="module")
def paging(world: World) -> list[int]:
    """A namespace of its own with 60 episodes (more than a page), oldest first."""
    call(world.store, "create_namespace", namespace="/paging/episodes")
    items = [{"content": f"Paging note number {i}", "kind": "note"} for i in range(60)]
    done = call(world.store, "remember_batch", namespace="/paging/episodes", items=items)
    return [r.id for r in done.results]


def test_the_timeline_lists_the_trees_episodes_newest_first(browser: Browser, world: World,
                                                           tmp_path: Path) -> None:
    sign_in(browser, world, "admin", "/episodes?ns=/team")
    browser.wait_for("table.episodes")
    ids = episode_ids(browser)
    assert ids == sorted(ids, reverse=True)
    assert set(world.ids["alpha_episodes"]) | set(world.ids["beta_episodes"]) <= set(ids)
    assert world.ids["other_episodes"][0] not in ids  # /other is outside ?ns=/team
    text = browser.text()
    assert "Alice moved the billing service to PostgreSQL 17" in text and "session=s1" in text
    # the Paris episode has derived facts (Paris and Berlin): a count that links to them
    paris = world.ids["alpha_episodes"][2]
    derived = browser.evaluate(f"document.querySelector('tr[data-episode=\"{paris}\"] td.num').innerText.trim()")
    assert derived == "2"
    assert never_ran_script(browser)
    screenshot(browser, tmp_path, "episodes")


def test_filters_and_search_narrow_the_timeline(browser: Browser, world: World) -> None:
    sign_in(browser, world, "admin", "/episodes")
    browser.fill("input[name=q]", "deploy pipelines")
    click_through(browser, "form.filters button")
    assert "q=deploy" in browser.url
    assert episode_ids(browser) == [world.ids["alpha_episodes"][1]]  # stemmed: pipelines finds pipeline
    browser.goto(world.url("/episodes?meta=" + quote("session=s1")))
    assert set(episode_ids(browser)) == set(world.ids["alpha_episodes"])
    browser.goto(world.url("/episodes?kind=conversation&q=Alice"))
    assert set(episode_ids(browser)) == set(world.ids["alpha_episodes"][0:3:2])
    browser.goto(world.url("/episodes?since=2000-01-01&until=2000-12-31"))
    assert "No episode matches these filters." in browser.text()
    browser.goto(world.url("/episodes?since=yesterday"))
    assert "since is not an ISO-8601 timestamp" in browser.text()
    browser.goto(world.url("/episodes?meta=nokey"))
    assert "key=value" in browser.text()


def test_paging_reaches_older_episodes(browser: Browser, world: World, paging: list[int]) -> None:
    sign_in(browser, world, "admin", "/episodes?ns=/paging/episodes")
    first = episode_ids(browser)
    assert first == sorted(paging, reverse=True)[:50]
    click_through(browser, "a[rel=next]")
    assert "before=" in browser.url
    second = episode_ids(browser)
    assert second == sorted(paging, reverse=True)[50:]
    assert browser.evaluate("!!document.querySelector('a[rel=next]')") is False
    assert "Newest" in browser.text()


def test_an_episode_shows_its_text_and_the_facts_derived_from_it(browser: Browser, world: World) -> None:
    paris = world.ids["alpha_episodes"][2]
    sign_in(browser, world, "admin", f"/episodes/{paris}")
    browser.wait_for("table.derived")
    assert "Alice lives in Paris and leads the platform team" in browser.text()
    links = browser.evaluate("[...document.querySelectorAll('table.derived a')].map(a => a.getAttribute('href'))")
    for fact in world.ids["facts"].values():
        assert f"/console/facts/{fact}" in links
    assert browser.evaluate(f"!!document.querySelector('a[href$=\"/erase/episode/{paris}\"]')") is True
    browser.click(f"a[href='/console/facts/{world.ids['facts']['paris']}']")
    browser.wait_for_text("Alice lives in Paris and leads the platform team")  # the fact's source


def test_the_xss_episode_is_shown_as_text(browser: Browser, world: World) -> None:
    xss = world.ids["alpha_episodes"][3]
    sign_in(browser, world, "alpha", "/episodes")
    browser.wait_for(f"tr[data-episode='{xss}']")
    assert "<script>window.__pwned = 1</script>" in browser.text()
    assert never_ran_script(browser)
    browser.goto(world.url(f"/episodes/{xss}"))
    assert "Mallory's <b>note</b>" in browser.text()
    assert browser.evaluate("document.querySelectorAll('main script, main img, main b').length") == 0
    assert never_ran_script(browser)
    assert "Erase…" not in browser.text()  # not an admin


def test_a_subtree_token_cannot_see_or_reach_another_trees_episodes(browser: Browser, world: World) -> None:
    sign_in(browser, world, "alpha", "/episodes")
    assert "Bluebird" not in browser.text() and "/team/beta" not in browser.text()
    beta = world.ids["beta_episodes"][0]
    browser.goto(world.url(f"/episodes/{beta}"))
    assert "not found" in browser.text() and "Bluebird" not in browser.text()
    browser.goto(world.url("/episodes?ns=/team/beta"))
    assert "outside this token's namespaces" in browser.text() and "Bluebird" not in browser.text()
    status, body = status_of(world, "alpha", f"/episodes/{beta}")
    assert status == 404 and "Bluebird" not in body
    status, _ = status_of(world, "alpha", f"/episodes/{world.ids['alpha_episodes'][0]}")
    assert status == 200


def test_a_forgotten_episode_is_shown_as_forgotten(world: World) -> None:
    call(world.store, "create_namespace", namespace="/forgetting")
    text = "The staging password rotates every ninety days"
    ident = call(world.store, "remember", content=text, namespace="/forgetting").id
    call(world.store, "forget", about=text, namespaces=["/forgetting"], threshold=0.9)
    status, body = status_of(world, "admin", f"/episodes/{ident}")
    assert status == 200 and "forgotten" in body and text in body
