"""Facts current and historical, a fact's page and a property's bi-temporal timeline, in
Chromium: history, sources down to the episodes' text, supersessions, contradictions,
paging, scope by URL and escaping."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.browser import Browser
from tests.console.conftest import (
    XSS,
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

ROWS = "[...document.querySelectorAll('table.facts-list tbody tr')]"


def fact_ids(browser: Browser) -> list[int]:
    return [int(i) for i in browser.evaluate(f"{ROWS}.map(r => r.dataset.fact)")]


@pytest.fixture(scope="module")
def mine(world: World) -> dict[str, int]:
    """A namespace of its own: 55 facts (more than a page), an open contradiction on a
    property, and a fact whose text is the XSS payload."""
    ns = "/facts-page"
    call(world.store, "create_namespace", namespace=ns)
    for i in range(55):
        call(world.store, "assert_fact", content=f"Service {i} runs on port {8000 + i}", namespace=ns)
    red = call(world.store, "assert_fact", content="The logo is red", namespace=ns, entity="logo",
               property="colour", value="red", valid_from="2026-02-01T00:00:00Z")
    blue = call(world.store, "assert_fact", content="The logo is blue", namespace=ns, entity="logo",
                property="colour", value="blue", valid_from="2026-03-01T00:00:00Z")
    xss = call(world.store, "assert_fact", content=XSS, namespace=ns, entity="<b>mallory</b>",
               property="note", value=XSS)
    return {"red": red.fact.id, "blue": blue.fact.id, "xss": xss.fact.id}


def test_current_facts_by_default_and_history_on_request(browser: Browser, world: World) -> None:
    paris, berlin = world.ids["facts"]["paris"], world.ids["facts"]["berlin"]
    sign_in(browser, world, "admin", "/facts?ns=/team/alpha")
    browser.wait_for("table.facts-list")
    assert fact_ids(browser) == [berlin]
    assert "Alice lives in Berlin" in browser.text() and "current" in browser.text()
    browser.click("input[name=history]")
    click_through(browser, "form.filters button")
    assert "history=1" in browser.url
    assert fact_ids(browser) == [berlin, paris]
    states = browser.evaluate(f"{ROWS}.map(r => r.cells[1].innerText.trim())")
    assert states == ["current", "superseded"]
    # entity and property narrow it; a wrong one finds nothing
    browser.goto(world.url("/facts?ns=/team/alpha&entity=alice&property=CITY&history=1"))
    assert fact_ids(browser) == [berlin, paris]
    browser.goto(world.url("/facts?ns=/team/alpha&entity=Bob"))
    assert "No fact matches these filters" in browser.text()
    # what was true in March (Paris), and what Stash knew in 2000 (nothing yet)
    browser.goto(world.url("/facts?ns=/team/alpha&as_of=2026-03-01"))
    assert fact_ids(browser) == [paris]
    browser.goto(world.url("/facts?ns=/team/alpha&as_of=2026-03-01&known_at=2000-01-01"))
    assert fact_ids(browser) == []
    browser.goto(world.url("/facts?as_of=March"))
    assert "true at is not an ISO-8601 timestamp" in browser.text()


def test_paging_reaches_older_facts(browser: Browser, world: World, mine: dict[str, int]) -> None:
    sign_in(browser, world, "admin", "/facts?ns=/facts-page")
    first = fact_ids(browser)
    assert len(first) == 50 and first == sorted(first, reverse=True)
    click_through(browser, "a[rel=next]")
    assert "offset=50" in browser.url
    second = fact_ids(browser)
    assert second and max(second) < min(first)
    current = call(world.store, "query_facts", namespaces=["/facts-page"], limit=1000)
    assert first + second == [f.id for f in current]
    assert "Newer" in browser.text()
    # a fact on no entity's property: no timeline; asserted without sources
    browser.goto(world.url(f"/facts/{second[-1]}"))
    assert "Service" in browser.text() and "No source recorded: asserted by a caller" in browser.text()
    assert browser.evaluate("!!document.querySelector('svg.timeline')") is False


def test_a_fact_shows_its_source_episode_and_the_propertys_timeline(browser: Browser, world: World,
                                                                   tmp_path: Path) -> None:
    paris, berlin = world.ids["facts"]["paris"], world.ids["facts"]["berlin"]
    episode = world.ids["alpha_episodes"][2]
    sign_in(browser, world, "admin", f"/facts/{berlin}")
    browser.wait_for("svg.timeline")
    text = browser.text()
    assert "Alice lives in Paris and leads the platform team" in text  # the source episode's text
    assert browser.evaluate(f"!!document.querySelector('.source a[href=\"/console/episodes/{episode}\"]')")
    assert f"Superseded fact #{paris}" in text
    # two bars on the valid-time axis: Paris retired, Berlin current and open
    bars = browser.evaluate("[...document.querySelectorAll('svg.timeline g.row')].map(g => "
                            "[+g.dataset.fact, g.dataset.state, g.querySelector('rect.bar').getAttribute('class')])")
    assert sorted(bars) == sorted([[paris, "superseded", "bar retired"], [berlin, "current", "bar current"]])
    table = browser.evaluate("[...document.querySelectorAll('table.timeline-table tbody tr')].map(r => "
                             "[r.cells[1].innerText.trim(), r.cells[6].innerText.trim()])")
    assert ["Berlin", "current"] in table and ["Paris", f"superseded by #{berlin}"] in table
    assert "2026-06-01" in text  # Paris ends where Berlin begins
    # the contradiction recorded when Berlin superseded Paris, with its resolution
    assert "Paris → Berlin" in text and "superseded" in text
    assert browser.evaluate(f"!!document.querySelector('a[href$=\"/erase/fact/{berlin}\"]')") is True
    screenshot(browser, tmp_path, "fact")
    browser.goto(world.url(f"/facts/{paris}"))
    assert f"Superseded by fact #{berlin}" in browser.text()


def test_an_open_contradiction_is_shown_on_both_facts(browser: Browser, world: World, mine: dict[str, int]) -> None:
    sign_in(browser, world, "admin", f"/facts/{mine['red']}")
    browser.wait_for("table.contradictions")
    assert "red → blue" in browser.text() and "open" in browser.text()
    browser.goto(world.url(f"/facts/{mine['blue']}"))
    assert "red → blue" in browser.text()


def test_stored_text_is_shown_as_text_on_the_fact_pages(browser: Browser, world: World, mine: dict[str, int]) -> None:
    sign_in(browser, world, "admin", f"/facts/{mine['xss']}")
    browser.wait_for("svg.timeline")
    assert "Mallory's <b>note</b>" in browser.text()
    assert browser.evaluate("document.querySelectorAll('main script, main img, main b, svg b').length") == 0
    assert never_ran_script(browser)
    browser.goto(world.url("/facts?ns=/facts-page&entity=<b>mallory</b>"))
    assert fact_ids(browser) == [mine["xss"]]
    assert never_ran_script(browser)


def test_a_subtree_token_cannot_see_or_reach_another_trees_facts(browser: Browser, world: World) -> None:
    beta = world.ids["beta_fact"]
    sign_in(browser, world, "alpha", "/facts?history=1")
    assert "Alice lives in Berlin" in browser.text() and "Bluebird" not in browser.text()
    browser.goto(world.url(f"/facts/{beta}"))
    assert "not found" in browser.text() and "Bluebird" not in browser.text()
    browser.goto(world.url(f"/facts/{world.ids['facts']['berlin']}"))
    assert "Erase…" not in browser.text()  # not an admin
    status, body = status_of(world, "alpha", f"/facts/{beta}")
    assert status == 404 and "Bluebird" not in body
    status, body = status_of(world, "alpha", "/facts?ns=/team/beta")
    assert status == 403 and "Bluebird" not in body


def test_the_timeline_picture_escapes_values_and_marks_open_intervals() -> None:
    from datetime import UTC, datetime

    from stash_pipeline.models import Fact
    from stash_serve.console import timeline

    def fact(ident: int, value: str, start: str, end: str | None, **more: object) -> Fact:
        at = datetime(2026, 12, 1, tzinfo=UTC)
        return Fact(id=ident, namespace="/t", content=f"x is {value}", entity="x", property="p", value=value,
                    confidence=1.0, origin="asserted", valid_from=datetime.fromisoformat(start),
                    valid_until=datetime.fromisoformat(end) if end else None, created_at=at, updated_at=at, **more)

    old = fact(1, XSS, "2026-01-01T00:00:00+00:00", "2026-06-01T00:00:00+00:00", superseded_by=2, current=False,
               retired_at=datetime(2026, 12, 2, tzinfo=UTC))
    new = fact(2, "Berlin", "2026-06-01T00:00:00+00:00", None)
    svg = str(timeline.draw([new, old], highlight=2, now=datetime(2026, 12, 7, tzinfo=UTC)))
    assert "<script" not in svg and "<img" not in svg and "&lt;script&gt;" in svg
    assert svg.count('<rect class="bar') == 2 and svg.count("<path") == 1  # one open interval, one arrow
    assert svg.index('data-fact="1"') < svg.index('data-fact="2"')  # stacked by when each was learned
    assert ">2026-01<" in svg and "superseded 2026-12-02 00:00 by #2" in svg
    assert timeline.state(old).name == "superseded" and timeline.state(new).current
    assert str(timeline.draw([])) == ""
