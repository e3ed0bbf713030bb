"""The console in a real browser: one server and one Chromium for every console test.

``world`` is a store in a fresh database, filled through the same operations an agent
calls, served by the real HTTP app (MCP, health and the console) under uvicorn on a free
loopback port, with three tokens: ``admin`` (admin on /), ``alpha`` (read on
/team/alpha) and ``writer`` (read and write on /team, no admin). Tests that change memory
work in namespaces of their own, so the order of tests does not matter.

``browser`` is one headless Chromium; ``sign_in(browser, world, token)`` signs it in
through the login page as a person would. With ``STASH_WRITE_SCREENSHOTS=1`` the
screenshot tests also write docs/img/console-*.png.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
import uvicorn

from stash_pipeline.auth import create_token
from stash_pipeline.config import load_settings
from stash_pipeline.operations import SUBJECTS
from stash_pipeline.operations.base import UNRESTRICTED
from stash_pipeline.store import Store
from stash_serve.http import build_app
from stash_serve.mcp.server import build_server
from testkit.browser import CHROMIUM, Browser
from testkit.database import WRITE_SCREENSHOTS, free_port, with_db

DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
#: a stored payload that would run if any page rendered text unescaped
XSS = '<script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2">Mallory\'s <b>note</b>'
OPERATIONS = {op.name: op for subject in SUBJECTS for op in subject.OPERATIONS}

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"needs Chromium at {CHROMIUM} (Debian: apt-get install -y chromium)"
)


def call(store: Store, name: str, /, **values: Any) -> Any:
    """An operation as an unrestricted caller (a shell) runs it."""
    op = OPERATIONS[name]
    return op.invoke(store, UNRESTRICTED, op.parse(values))


@dataclass
class World:
    store: Store
    base: str  #: http://127.0.0.1:<port>
    tokens: dict[str, str]
    ids: dict[str, Any] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return f"{self.base}/console{path}"


def _fill(store: Store) -> dict[str, Any]:
    ids: dict[str, Any] = {}
    for path in ("/team/alpha", "/team/beta", "/other"):
        call(store, "create_namespace", namespace=path)
    alpha = [
        "Alice moved the billing service to PostgreSQL 17 last week",
        "Bob says the deploy pipeline fails when the cache volume is full",
        "Alice lives in Paris and leads the platform team",
        XSS,
    ]
    ids["alpha_episodes"] = [
        call(store, "remember", content=text, namespace="/team/alpha", kind="conversation",
             metadata={"session": "s1"}).id
        for text in alpha
    ]
    ids["beta_episodes"] = [
        call(store, "remember", content=text, namespace="/team/beta").id
        for text in ["The beta launch code name is Bluebird", "Beta's secret budget is 40k"]
    ]
    ids["other_episodes"] = [call(store, "remember", content="Carol keeps the other tree's keys", namespace="/other").id]
    city = call(store, "assert_fact", content="Alice lives in Paris", namespace="/team/alpha", entity="Alice",
                property="city", value="Paris", source_episode_ids=[ids["alpha_episodes"][2]],
                valid_from="2026-01-01T00:00:00Z")
    moved = call(store, "assert_fact", content="Alice lives in Berlin", namespace="/team/alpha", entity="Alice",
                 property="city", value="Berlin", source_episode_ids=[ids["alpha_episodes"][2]],
                 valid_from="2026-06-01T00:00:00Z", supersede=True)
    ids["facts"] = {"paris": city.fact.id, "berlin": moved.fact.id}
    ids["beta_fact"] = call(store, "assert_fact", content="Bluebird launches in March", namespace="/team/beta",
                            entity="Bluebird", property="launch", value="March",
                            source_episode_ids=[ids["beta_episodes"][0]]).fact.id
    return ids


@pytest.fixture(scope="session")
def world(pg_admin_dsn: str, template_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    name = f"stash_console_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    home = tmp_path_factory.mktemp("console-home")
    store = Store.open(load_settings(database_url=with_db(pg_admin_dsn, name), home=home, embedder="hash",
                                     vector_dim=384))
    try:
        ids = _fill(store)
        tokens = {
            "admin": create_token(store, ["/"], ["admin"], name="console admin")["token"],
            "alpha": create_token(store, ["/team/alpha"], ["read"], name="alpha reader")["token"],
            "writer": create_token(store, ["/team"], ["read", "write"], name="team writer")["token"],
        }
        port = free_port()
        app = build_app(store, build_server(store, auth=True), auth=True, host="127.0.0.1")
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, name="console-server", daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the console's server did not start")
            time.sleep(0.05)
        try:
            yield World(store=store, base=f"http://127.0.0.1:{port}", tokens=tokens, ids=ids)
        finally:
            server.should_exit = True
            thread.join(timeout=10)
    finally:
        store.close()
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.skip(f"needs Chromium at {CHROMIUM} (Debian: apt-get install -y chromium)")
    with Browser() as b:
        yield b


def sign_in(browser: Browser, world: World, who: str, path: str = "/") -> None:
    """Sign ``browser`` in as the token ``who`` through the login page, then open ``path``."""
    browser.send("Network.clearBrowserCookies")
    browser.goto(world.url(path))
    browser.wait_for("input#token")
    browser.fill("input#token", world.tokens[who])
    browser.click("form.login button")
    browser.wait_until("signed in", lambda: "/login" not in browser.url and browser.evaluate(
        "document.readyState") == "complete")


def fetch(url: str, headers: dict[str, str] | None = None, data: bytes | None = None,
          ) -> tuple[int, str, dict[str, str]]:
    """A request as a script sends it (no browser, redirects not followed): status, body, headers."""
    request = urllib.request.Request(url, headers=headers or {}, data=data)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


def status_of(world: World, who: str, path: str) -> tuple[int, str]:
    """A console page fetched with the token ``who`` as a bearer: its status and body."""
    status, body, _ = fetch(world.url(path), headers={"Authorization": f"Bearer {world.tokens[who]}"})
    return status, body


def click_through(browser: Browser, selector: str) -> None:
    """Click a link or a submit button and wait for the page it leads to, loaded: the old
    page is marked first, so its rows are never read as the new page's (a loaded machine
    may show the new URL before the new document)."""
    browser.evaluate("window.__leaving = true")
    browser.click(selector)
    browser.wait_until("the next page", lambda: browser.evaluate(
        "window.__leaving !== true && document.readyState === 'complete'"))


def screenshot(browser: Browser, tmp_path: Path, name: str) -> Path:
    """A screenshot in the test's tmp dir and, with STASH_WRITE_SCREENSHOTS=1, in docs/img."""
    shot = browser.screenshot(tmp_path / f"console-{name}.png")
    if WRITE_SCREENSHOTS:
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        (DOCS_IMG / f"console-{name}.png").write_bytes(shot.read_bytes())
    return shot


def never_ran_script(browser: Browser) -> bool:
    """Whether no stored payload ran on the page (the XSS markers stay unset)."""
    return browser.evaluate("typeof window.__pwned === 'undefined'") is True
