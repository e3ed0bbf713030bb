"""The console's Starlette app: who is asking, what they may see, and how a page is drawn.

Every page is a plain function ``page(request, viewer) -> Response`` registered with
``@page``; ``Viewer`` runs the memory operations exactly as an MCP call by that token
would (the same declarations, argument models, rights and scope), in a worker thread.

Who is asking, in order, on every request but the login page and the static files:

* **Host**: served on a loopback address, the console answers only loopback Host names
  (a page reached by DNS rebinding gets 421), as the MCP transports do.
* **A credential**: ``Authorization: Bearer <token>`` (scripts, tests), or the cookie the
  login page sets once it is given a token (HttpOnly, SameSite=Strict, Secure over HTTPS,
  path ``/console``). The cookie holds a session's own secret, never the token: a cookie
  reaches every port of its host. The session lives in the database
  (``stash_pipeline.auth.open_session``), so any worker or replica checks it, and it ends
  after COOKIE_MAX_AGE_S, at sign-out, or when its token is revoked (checked on every
  request). A request a browser marks as coming from another site (``Sec-Fetch-Site``) is
  served as if it had no cookie. Without a credential a page load goes to the login page
  and anything else gets 401. Without authentication (``--no-auth``, loopback only)
  everyone is unrestricted, as over MCP.
* **A change** (any POST) must come from the console's own origin (``Origin``, or
  ``Sec-Fetch-Site: same-origin``); anything else gets 403.

Stored text reaches the page only through Jinja2's autoescaping, and the Content
Security Policy allows scripts and styles from ``/console/static`` alone, so a stored
``<script>`` is shown, never run.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import anyio.to_thread
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from stash_pipeline import auth, errors
from stash_pipeline.auth import TokenInfo
from stash_pipeline.operations import SUBJECTS
from stash_pipeline.operations.base import Operation
from stash_pipeline.store import Store
from stash_serve.limits import SlidingWindow
from stash_serve.mcp.calls import Scope
from stash_serve.runs import dagster_url
from stash_serve.token_check import TokenCheck

log = logging.getLogger("stash.console")

#: where the console is served on the MCP server's port
PREFIX = "/console"
COOKIE = "stash_console"
#: a browser session lasts this long after login; the token's revocation ends it sooner
COOKIE_MAX_AGE_S = 12 * 3600
#: Sec-Fetch-Site values under which the cookie counts
COOKIE_SITES = frozenset({"same-origin", "none"})
STATIC_DIR = Path(__file__).parent / "static"
#: every page's headers: nothing runs or loads but the console's own files
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
    "x-frame-options": "DENY",
}
#: the HTTP status of a StashError's code on a page
STATUS = {
    "access_denied": 403, "namespace_not_found": 404, "record_not_found": 404, "not_found": 404,
    "invalid_input": 400, "rate_limited": 429, "database_unavailable": 503,
}

OPERATIONS: dict[str, Operation] = {op.name: op for subject in SUBJECTS for op in subject.OPERATIONS}


@dataclass(frozen=True)
class Console:
    """What every page shares: the store, the template environment and the server's settings."""

    store: Store
    templates: Environment
    auth: bool
    loopback: bool
    tokens: TokenCheck
    failures: SlidingWindow

    @property
    def dagster_url(self) -> str | None:
        """The Dagster UI's address (configured, or the one `stash up` recorded), for links."""
        return dagster_url(self.store.settings)


@dataclass(frozen=True)
class Viewer:
    """The person at the console: their token (None: unrestricted) and what they may do."""

    console: Console
    token: TokenInfo | None

    @property
    def scope(self) -> Scope:
        return Scope(self.token)

    @property
    def store(self) -> Store:
        return self.console.store

    @property
    def is_admin(self) -> bool:
        return self.token is None or self.token.has("admin")

    def trees(self, asked: str | None = None) -> list[str]:
        """The trees a page reads: ``asked`` (checked against the token), else all of the viewer's."""
        return self.scope.read([asked] if asked else None)

    def call(self, name: str, /, **values: Any) -> Any:
        """Run the operation ``name`` as an MCP call by this viewer would (blocking)."""
        op = OPERATIONS[name]
        args = op.parse({k: v for k, v in values.items() if v is not None})
        return op.invoke(self.store, self.scope, args)

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in a worker thread: pages never wait on PostgreSQL on the loop."""
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    async def op(self, name: str, /, **values: Any) -> Any:
        return await self.run(self.call, name, **values)


Page = Callable[[Request, Viewer], Awaitable[Response]]


def page(fn: Page) -> Callable[[Request], Awaitable[Response]]:
    """A console page: the viewer checked first, a StashError shown as an error page."""

    @functools.wraps(fn)
    async def endpoint(request: Request) -> Response:
        console: Console = request.app.state.console
        refused = _refuse_host(request, console)
        if refused is not None:
            return refused
        if request.method == "POST" and not same_origin(request):
            return render(request, "error.html", status_code=403, title="Refused",
                          message="a change must come from a page of this console")
        try:
            viewer = await _viewer(request, console)
        except errors.StashError as exc:
            if isinstance(exc, errors.AccessDenied) and _wants_html(request):
                target = quote(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
                response: Response = RedirectResponse(f"{PREFIX}/login?next={target}", status_code=303)
                if request.cookies.get(COOKIE):
                    response.delete_cookie(COOKIE, path=PREFIX)
                return response
            # who is asking is unknown: 401 (a known token lacking a right is a page's 403)
            unknown = isinstance(exc, errors.AccessDenied)
            return render(request, "error.html", status_code=401 if unknown else STATUS.get(exc.code, 500),
                          title="Sign in" if unknown else "Refused", message=exc.message)
        request.state.viewer = viewer
        try:
            return await fn(request, viewer)
        except errors.StashError as exc:
            return render(request, "error.html", status_code=STATUS.get(exc.code, 400),
                          title=exc.code.replace("_", " "), message=exc.message)

    return endpoint


def render(request: Request, template: str, *, status_code: int = 200, **context: Any) -> HTMLResponse:
    """``template`` drawn with ``context`` (autoescaped) and the console's headers."""
    console: Console = request.app.state.console
    viewer = getattr(request.state, "viewer", None)
    body = console.templates.get_template(template).render(
        request=request, viewer=viewer, prefix=PREFIX, dagster_url=console.dagster_url, **context
    )
    return HTMLResponse(body, status_code=status_code, headers=SECURITY_HEADERS)


def same_origin(request: Request) -> bool:
    """Whether a request comes from a page of this server (Origin, else Sec-Fetch-Site)."""
    origin = request.headers.get("origin")
    if origin is not None:
        return origin == f"{request.url.scheme}://{request.headers.get('host', '')}"
    return request.headers.get("sec-fetch-site") in (None, "same-origin")


def _refuse_host(request: Request, console: Console) -> Response | None:
    if not console.loopback:
        return None
    host = request.headers.get("host", "").rsplit(":", 1)[0].strip("[]").lower()
    if host in ("localhost", "::1") or host.startswith("127."):
        return None
    return Response("misdirected request: this console answers loopback names only", status_code=421)


def _bearer(request: Request) -> str | None:
    kind, _, secret = request.headers.get("authorization", "").partition(" ")
    return secret.strip() if kind.lower() == "bearer" and secret.strip() else None


def _session(request: Request) -> str | None:
    """The session cookie, unless a browser says the request comes from another site."""
    if request.headers.get("sec-fetch-site", "none") in COOKIE_SITES:
        return request.cookies.get(COOKIE) or None
    return None


async def _viewer(request: Request, console: Console) -> Viewer:
    if not console.auth:
        return Viewer(console, None)
    bearer, session = _bearer(request), _session(request)
    if bearer is None and session is None:
        raise errors.AccessDenied("sign in with a Stash token")
    address = request.client.host if request.client else "unknown"
    if not console.failures.allowed(address):
        raise errors.RateLimited("too many failed sign-ins from this address; retry in a minute")
    try:
        if bearer is not None:
            token = await console.tokens.check(bearer)
        else:
            token = await anyio.to_thread.run_sync(auth.session_token, console.store, session)
    except errors.AccessDenied:
        console.failures.record(address)
        raise
    return Viewer(console, token)


def _wants_html(request: Request) -> bool:
    return request.method == "GET" and "text/html" in request.headers.get("accept", "")


# --- login ---------------------------------------------------------------------------------


async def login(request: Request) -> Response:
    """GET: the form; POST: check the token, set the cookie, go where the person was going."""
    console: Console = request.app.state.console
    refused = _refuse_host(request, console)
    if refused is not None:
        return refused
    target = _local_target(request.query_params.get("next"))
    if request.method == "GET":
        return render(request, "login.html", title="Sign in", next=target, message=None)
    if not same_origin(request):
        return render(request, "error.html", status_code=403, title="Refused",
                      message="sign in from this console's own page")
    form = await request.form(max_files=0, max_fields=4)
    secret = str(form.get("token", "")).strip()
    address = request.client.host if request.client else "unknown"
    if not console.failures.allowed(address):
        return render(request, "login.html", status_code=429, title="Sign in", next=target,
                      message="too many failed sign-ins from this address; retry in a minute")
    try:
        token = await console.tokens.check(secret or None)
    except errors.StashError as exc:
        console.failures.record(address)
        return render(request, "login.html", status_code=401, title="Sign in", next=target, message=exc.message)
    session = await anyio.to_thread.run_sync(auth.open_session, console.store, token, COOKIE_MAX_AGE_S)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(COOKIE, session, max_age=COOKIE_MAX_AGE_S, path=PREFIX, httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")
    return response


async def logout(request: Request) -> Response:
    """End the session (its row goes, so a copy of the cookie is worthless) and forget the cookie."""
    console: Console = request.app.state.console
    if same_origin(request) and (session := _session(request)) is not None:
        await anyio.to_thread.run_sync(auth.close_session, console.store, session)
    response = RedirectResponse(f"{PREFIX}/login", status_code=303)
    response.delete_cookie(COOKIE, path=PREFIX)
    return response


def _local_target(value: str | None) -> str:
    """A path inside the console to go to after login; anything else is the console's home."""
    if value and value.startswith(PREFIX + "/") and not value.startswith("//") and "\\" not in value:
        return value
    return PREFIX + "/"


# --- template helpers ----------------------------------------------------------------------


def url(path: str, **query: Any) -> str:
    """A console URL: ``path`` under the prefix, with the query's non-empty values."""
    values = {k: v for k, v in query.items() if v not in (None, "", False)}
    return f"{PREFIX}{path}" + (f"?{urlencode(values, doseq=True)}" if values else "")


def when(value: datetime | str | None) -> str:
    """A time as people read it: ``2026-12-07 11:42:05 UTC``."""
    if value is None or value == "":
        return "—"
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.strftime("%Y-%m-%d %H:%M:%S UTC")


def short(text: Any, length: int = 160) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= length else text[: length - 1] + "…"


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("stash_serve.console", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(url=url)
    env.filters.update(when=when, short=short)
    return env


def build_console(store: Store, *, auth: bool, loopback: bool, tokens: TokenCheck,
                  routes: list[BaseRoute]) -> Starlette:
    """The console as an app to mount at ``PREFIX`` (``stash_serve.http.build_app`` does)."""
    console = Console(
        store=store, templates=environment(), auth=auth, loopback=loopback, tokens=tokens,
        failures=SlidingWindow(store.settings.auth_failures_per_minute, 60.0),
    )
    app = Starlette(routes=[
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
        *routes,
    ])
    app.state.console = console
    return app
