"""The console's door and its home page, in Chromium: sign-in, scope, counts, escaping."""

from __future__ import annotations

from pathlib import Path

from testkit.browser import Browser
from tests.console.conftest import World, call, fetch, needs_chromium, screenshot, sign_in

pytestmark = needs_chromium


def test_a_page_without_a_token_goes_to_the_login_page_and_a_bad_token_is_refused(
        browser: Browser, world: World) -> None:
    browser.send("Network.clearBrowserCookies")
    browser.goto(world.url("/?ns=/team/alpha"))
    assert "/console/login" in browser.url and "next=" in browser.url
    browser.fill("input#token", "stash_not_a_token")
    browser.click("form.login button")
    browser.wait_for_text("access denied")
    assert "/console/login" in browser.url
    # a script without a browser: 401, not the login page
    status, _, _ = fetch(world.url("/"))
    assert status == 401


def test_the_home_page_lists_the_tokens_trees_with_their_counts(browser: Browser, world: World,
                                                               tmp_path: Path) -> None:
    call(world.store, "create_namespace", namespace="/quiet")  # made last, holds nothing
    sign_in(browser, world, "admin")
    browser.wait_for("table.grid")
    rows = browser.evaluate(
        "[...document.querySelectorAll('table.grid tbody tr')].map(r => [...r.cells].map(c => c.innerText.trim()))")
    by_slug = {row[0].split()[0]: row for row in rows}
    assert {"/team/alpha", "/team/beta", "/other"} <= set(by_slug)
    assert by_slug["/team/alpha"][1:4] == ["4", "1", "1"]  # 4 episodes, 1 current fact (Berlin), 1 entity (Alice)
    assert by_slug["/team/beta"][1] == "2"
    # no write of its own: none is borrowed from the namespace before it
    assert by_slug["/quiet"][1] == "0" and by_slug["/quiet"][-1] == "—"
    assert by_slug["/team"][-1] == "—" and by_slug["/team/alpha"][-1] != "—"
    screenshot(browser, tmp_path, "namespaces")


def test_a_subtree_token_sees_only_its_tree_and_cannot_reach_another_by_url(browser: Browser, world: World) -> None:
    sign_in(browser, world, "alpha")
    text = browser.text()
    assert "/team/alpha" in text and "/team/beta" not in text and "/other" not in text
    for path in ("/?ns=/team/beta", "/?ns=/"):
        browser.goto(world.url(path))
        assert "outside this token's namespaces" in browser.text()
        assert "Bluebird" not in browser.text()


def test_the_cookie_is_http_only_and_strict_and_pages_forbid_foreign_scripts(browser: Browser, world: World) -> None:
    status, _, headers = fetch(
        world.url("/login"), data=f"token={world.tokens['alpha']}".encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": world.base})
    assert status == 303
    cookie = headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/console" in cookie
    status, _, headers = fetch(world.url("/"), headers={"Authorization": f"Bearer {world.tokens['alpha']}"})
    assert status == 200
    assert "script-src 'self'" in headers["content-security-policy"]
    # a sign-in posted from another site is refused, and so is a foreign Host (DNS rebinding)
    status, _, _ = fetch(world.url("/login"), data=b"token=x",
                         headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.test"})
    assert status == 403
    status, _, _ = fetch(world.url("/"), headers={"Authorization": f"Bearer {world.tokens['alpha']}",
                                                  "Host": "evil.test"})
    assert status == 421


def _signed_in_cookie(world: World, token: str) -> str:
    status, _, headers = fetch(world.url("/login"), data=f"token={token}".encode(),
                               headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": world.base})
    assert status == 303
    return headers["set-cookie"].split(";", 1)[0]  # stash_console=<session secret>


def test_the_cookie_holds_a_session_that_sign_out_and_revocation_end(world: World) -> None:
    from stash_pipeline.auth import create_token, revoke_token

    made = create_token(world.store, ["/team/alpha"], ["read"], name="short-lived")
    cookie = _signed_in_cookie(world, made["token"])
    assert made["token"] not in cookie and cookie.startswith("stash_console=stash-session_")
    as_browser = {"Cookie": cookie, "Sec-Fetch-Site": "same-origin"}
    assert fetch(world.url("/"), headers=as_browser)[0] == 200
    # a page of another site sending the cookie along is served as if it had none
    assert fetch(world.url("/"), headers={"Cookie": cookie, "Sec-Fetch-Site": "cross-site"})[0] == 401
    # signing out ends the session itself: a copy of the cookie is worthless after it
    assert fetch(world.url("/logout"), data=b"", headers={**as_browser, "Origin": world.base})[0] == 303
    assert fetch(world.url("/"), headers=as_browser)[0] == 401
    # revoking the token ends its sessions at their next request
    again = {"Cookie": _signed_in_cookie(world, made["token"]), "Sec-Fetch-Site": "same-origin"}
    assert fetch(world.url("/"), headers=again)[0] == 200
    assert revoke_token(world.store, made["id"])
    assert fetch(world.url("/"), headers=again)[0] == 401


def test_stash_up_prints_the_console_url() -> None:
    from stash_pipeline.config import load_settings
    from stash_serve.up import _status_block

    block = _status_block(load_settings(embedder="hash"), "127.0.0.1", 8080, 3000, False, Path("/t"), False,
                          Path("/l"), True)
    assert "http://127.0.0.1:8080/console/" in block
