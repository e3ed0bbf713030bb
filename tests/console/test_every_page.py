"""Every console page, in Chromium, as a subtree token: it renders, it keeps to the token's
tree, the stored payload stays inert, and it fits a phone's width."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.browser import Browser
from tests.console.conftest import World, call, needs_chromium, never_ran_script, screenshot, sign_in

pytestmark = needs_chromium

#: every page of the navigation, with the queries that make it show records
PAGES = ["/", "/episodes", "/episodes?q=Alice", "/recall?q=Where+does+Alice+live%3F", "/facts",
         "/facts?history=1", "/entities", "/pipeline"]
#: what only /team/beta and /other hold
FOREIGN_WORDS = ("Bluebird", "secret budget", "Carol")
PHONE = (390, 844)


def record_pages(world: World) -> list[str]:
    alice = call(world.store, "get_entity", name="Alice", namespaces=["/team/alpha"]).entity["id"]
    return [f"/episodes/{world.ids['alpha_episodes'][-1]}", f"/facts/{world.ids['facts']['berlin']}",
            f"/entities/{alice}"]


def foreign_pages(world: World) -> list[str]:
    bluebird = call(world.store, "get_entity", name="Bluebird", namespaces=["/team/beta"]).entity["id"]
    return [f"/episodes/{world.ids['beta_episodes'][0]}", f"/facts/{world.ids['beta_fact']}",
            f"/entities/{bluebird}", "/episodes?ns=/team/beta", "/facts?ns=/team/beta", "/entities?ns=/other",
            "/recall?q=Bluebird&ns=/team/beta", "/pipeline?ns=/team/beta"]


def overflow(browser: Browser) -> int:
    """How many pixels the page is wider than the viewport (tables scroll inside their box)."""
    return int(browser.evaluate("document.documentElement.scrollWidth - window.innerWidth"))


def test_every_page_renders_inside_the_tokens_tree_with_the_payload_inert(browser: Browser, world: World) -> None:
    sign_in(browser, world, "alpha")
    for path in PAGES + record_pages(world):
        browser.goto(world.url(path))
        text = browser.text()
        assert "Traceback" not in text and "Internal Server Error" not in text, (path, text[:500])
        assert "Not Found" not in browser.evaluate("document.title"), path
        assert never_ran_script(browser), f"a stored script ran on {path}"
        for word in FOREIGN_WORDS:
            assert word not in text, f"{path} shows {word!r} from another tree"


def test_another_trees_records_cannot_be_reached_by_url(browser: Browser, world: World) -> None:
    sign_in(browser, world, "alpha")
    for path in foreign_pages(world):
        browser.goto(world.url(path))
        text = browser.text()
        assert any(s in text for s in ("not found", "outside this token's namespaces", "access denied")), (path, text)
        for word in FOREIGN_WORDS:
            assert word not in text, f"{path} shows {word!r} from another tree"


@pytest.mark.parametrize("path", ["/", "/episodes", "/facts"])
def test_pages_fit_a_phone(browser: Browser, world: World, path: str, tmp_path: Path) -> None:
    sign_in(browser, world, "alpha")
    browser.set_viewport(*PHONE)
    try:
        browser.goto(world.url(path))
        assert overflow(browser) <= 1, f"{path} is wider than a phone"
        if path == "/episodes":
            screenshot(browser, tmp_path, "phone")
    finally:
        browser.set_viewport(1280, 800)
