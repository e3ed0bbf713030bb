"""The Dagster UI behind Stash's own token check: ``stash serve dagster-ui``.

The ``dagster-webserver`` command serves its UI and GraphQL API to anyone who can reach
the port, and checks neither the Host nor the Origin of a request: a page reached by DNS
rebinding, or any local user, could launch the rebuild jobs (withdrawing derived memory
of every tenant), terminate runs and list every namespace. This module serves the same
Starlette app that command builds (``create_app_from_workspace_process_context`` on a
``WorkspaceProcessContext``), in this process under uvicorn, behind ``UIGuard``, so no
unguarded port is left listening. ``stash up`` and the compose stack start this instead
of ``dagster-webserver``. Every request, HTTP or WebSocket, passes these checks in order:

* **Host** (DNS rebinding): a loopback name or address (any port), the address the
  server is bound to, or a name given with ``--allow-host``; else 421.
* **Origin** (other sites, other ports of this host): absent, or the very origin of the
  Host the request was sent to; else 403. The WebSocket upgrade is checked the same way.
* **A credential**: ``Authorization: Bearer <token>`` (scripts, GraphQL clients), or the
  session cookie the login page ``/_stash/login`` sets once it is given a token (HttpOnly,
  SameSite=Strict; Secure over HTTPS). Without one a browser's page load is sent to the
  login page and anything else gets 401. The token is Stash's own, checked like the MCP
  server checks it (``stash_serve.token_check``: looked up on every request, so a
  revocation ends a session at its next request), and must have the **admin right on
  /**: the UI reaches every namespace. Any other token gets 403.

A cookie also travels with requests a page on another port of the same host makes
(cookies are not port-scoped). So the cookie is ignored on a request a browser marks as
not same-origin (``Sec-Fetch-Site``), and GraphQL over GET (which Dagster would execute,
mutations included, and which a browser sends without an Origin) needs a bearer token.
Sessions live in this process's memory for ``SESSION_TTL_S``: a restart logs everyone
out. Failed token checks count per client address (``STASH_AUTH_FAILURES_PER_MINUTE``);
past the limit the address gets 429 for a minute.

``/_stash/healthz`` answers 200 without a credential (a container healthcheck); it says
nothing but "ok".
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import json
import logging
import os
import secrets
import signal
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stash_pipeline import errors
from stash_pipeline.auth import TokenInfo
from stash_pipeline.config import Settings
from stash_serve.http import is_loopback
from stash_serve.limits import SlidingWindow
from stash_serve.token_check import TokenCheck

log = logging.getLogger("stash.dagster_ui")

#: Stash's own paths, out of the way of Dagster's routes
PREFIX = "/_stash"
LOGIN_PATH = f"{PREFIX}/login"
LOGOUT_PATH = f"{PREFIX}/logout"
HEALTH_PATH = f"{PREFIX}/healthz"
#: how long a browser session lasts after login (a restart of the server ends it sooner)
SESSION_TTL_S = 12 * 3600
#: the largest login form body read
LOGIN_BODY_MAX = 8192
#: the right a token needs, and where
REQUIRED_RIGHT, REQUIRED_TREE = "admin", "/"
#: Sec-Fetch-Site values under which the session cookie counts
COOKIE_SITES = frozenset({"same-origin", "none"})
WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def admin_on_root(token: TokenInfo) -> bool:
    """Whether ``token`` may drive the UI: the admin right on the whole namespace tree."""
    return REQUIRED_RIGHT in token.rights and REQUIRED_TREE in token.namespaces


def _hostname(host: str | None) -> str | None:
    """The lower-case name of a Host header value (``[::1]:3000`` → ``::1``), or None if malformed."""
    if not host or any(c in host for c in "/@\\?# \t"):
        return None
    try:
        parts = urlsplit(f"//{host}")
        parts.port  # noqa: B018 (a malformed port raises)
    except ValueError:
        return None
    return parts.hostname or None


class Hosts:
    """The Host names this server answers to: loopback (any port), its bound address, and ``extra``."""

    def __init__(self, bind_host: str, extra: Iterable[str] = ()) -> None:
        names = {n for n in (_hostname(h.strip()) for h in extra) if n}
        bare = bind_host.strip("[]")
        if bare not in WILDCARDS:
            bound = _hostname(f"[{bare}]" if ":" in bare else bare)
            if bound:
                names.add(bound)
        self.names = frozenset(names)

    def allowed(self, host: str | None) -> bool:
        name = _hostname(host)
        return name is not None and (is_loopback(name) or name in self.names)


def same_origin(origin: str, host: str | None) -> bool:
    """Whether a request's ``Origin`` is the origin of the Host it was sent to: the same name,
    and the same port (a Host without one, as behind a proxy on the scheme's port, takes the
    Origin's default port)."""
    name = _hostname(host)
    if name is None:
        return False
    try:
        parts = urlsplit(origin)
        origin_port = parts.port
        host_port = urlsplit(f"//{host}").port
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        return False
    default = 443 if parts.scheme == "https" else 80
    if host_port is None:
        return parts.hostname == name and origin_port in (None, default)
    return parts.hostname == name and (origin_port or default) == host_port


@dataclass
class _Session:
    secret: str
    expires: float


class Sessions:
    """Browser sessions: an opaque id (the cookie) → the token it was opened with, in memory.

    Only the id's sha256 is kept as the key; the token is checked again on every request,
    so a session outlives neither its token nor ``ttl_s``.
    """

    def __init__(self, ttl_s: float = SESSION_TTL_S, max_entries: int = 1000) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(session_id: str) -> str:
        return hashlib.sha256(session_id.encode("utf-8", errors="surrogatepass")).hexdigest()

    def open(self, secret: str) -> str:
        session_id = secrets.token_urlsafe(32)
        with self._lock:
            self._sessions[self._key(session_id)] = _Session(secret, time.monotonic() + self.ttl_s)
            while len(self._sessions) > self.max_entries:
                self._sessions.popitem(last=False)
        return session_id

    def secret(self, session_id: str) -> str | None:
        key = self._key(session_id)
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                return None
            if session.expires <= time.monotonic():
                del self._sessions[key]
                return None
            return session.secret

    def close(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(self._key(session_id), None)


def _headers(scope: Scope) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, value in scope.get("headers", []):
        out.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return out


def _first(headers: dict[str, list[str]], name: str) -> str | None:
    values = headers.get(name)
    return values[0] if values else None


def _safe_next(value: str | None) -> str:
    """A same-site path to return to after login; anything else (another host, a scheme) is ``/``."""
    if not value or not value.startswith("/") or value.startswith(("//", "/\\")) or any(ord(c) < 32 for c in value):
        return "/"
    return value


def cookie_name(host: str | None) -> str:
    """The session cookie's name: per port, since browsers share cookies between the ports of a host."""
    port = urlsplit(f"//{host}").port if _hostname(host) else None  # _hostname vets the port
    return f"stash_ui_{port or 'default'}"


LOGIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Stash · Dagster UI login</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{{font-family:system-ui,sans-serif;background:#f5f6f8;margin:0;display:flex;min-height:100vh;
align-items:center;justify-content:center}}
form{{background:#fff;padding:2em;border-radius:8px;box-shadow:0 1px 4px #0002;width:min(32em,90vw)}}
h1{{font-size:1.2em;margin-top:0}} p{{color:#444;font-size:.9em;line-height:1.4}}
input[type=password]{{width:100%;box-sizing:border-box;padding:.6em;font-family:monospace;margin:.5em 0 1em}}
button{{padding:.6em 1.4em}} .error{{color:#b00020}} code{{background:#eee;padding:0 .2em}}
</style></head>
<body><form method="post" action="{action}">
<h1>Dagster UI of Stash</h1>
{error}
<p>Paste a Stash token with the <b>admin</b> right on <code>/</code>. The one <code>stash up</code>
created is in <code>$STASH_HOME/admin-token</code> (default <code>~/.stash/admin-token</code>);
or create one with <code>stash token create --namespace / --rights admin</code>.</p>
<label for="token">Token</label>
<input type="password" id="token" name="token" autocomplete="current-password" autofocus required>
<input type="hidden" name="next" value="{next}">
<button type="submit">Log in</button>
</form></body></html>
"""

LOGIN_HEADERS = [
    (b"content-security-policy",
     b"default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    (b"cache-control", b"no-store"),
    (b"x-frame-options", b"DENY"),
    # not no-referrer: with it a browser sends the form with `Origin: null`, which is refused
    (b"referrer-policy", b"same-origin"),
]


async def _respond(send: Send, status: int, body: bytes, content_type: bytes,
                   headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), *headers],
    })
    await send({"type": "http.response.body", "body": body})


async def _json(send: Send, status: int, error: str, message: str,
                headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps({"error": error, "message": message}).encode()
    await _respond(send, status, body, b"application/json", headers)


async def _refuse(scope: Scope, send: Send, status: int, error: str, message: str,
                  headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    """Answer ``status`` to an HTTP request, or refuse a WebSocket upgrade with it (else 403)."""
    if scope["type"] == "websocket":
        if "websocket.http.response" in scope.get("extensions", {}):
            body = json.dumps({"error": error, "message": message}).encode()
            await send({"type": "websocket.http.response.start", "status": status,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode()), *headers]})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1008})
        return
    await _json(send, status, error, message, headers)


class UIGuard:
    """ASGI middleware: Host, Origin and an admin token (bearer or session cookie) before the UI."""

    def __init__(
        self,
        app: ASGIApp,
        tokens: TokenCheck,
        *,
        hosts: Hosts,
        failures_per_minute: int = 30,
        sessions: Sessions | None = None,
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.hosts = hosts
        self.sessions = sessions if sessions is not None else Sessions()
        self.failures = SlidingWindow(failures_per_minute, 60.0)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self.app(scope, receive, send)
            return
        if kind not in ("http", "websocket"):
            return
        headers = _headers(scope)
        host = _first(headers, "host")
        if len(headers.get("host", [])) != 1 or not self.hosts.allowed(host):
            log.warning("refused a request for Host %r", host)
            await _refuse(scope, send, 421, "misdirected_request", "Invalid Host header")
            return
        for origin in headers.get("origin", []):
            if not same_origin(origin, host):
                log.warning("refused a request from Origin %r", origin)
                await _refuse(scope, send, 403, "forbidden", "Invalid Origin header")
                return
        path = scope.get("path", "")
        if kind == "http" and path.startswith(PREFIX + "/"):
            await self._own_route(scope, receive, send, headers, host)
            return
        address = (scope.get("client") or ("unknown", 0))[0]
        if not self.failures.allowed(address):
            await _refuse(scope, send, 429, "rate_limited",
                          "too many failed token checks from this address; retry in a minute",
                          [(b"retry-after", b"60")])
            return
        secret, session_id = self._credential(headers, host)
        if secret is None:
            await self._unauthenticated(scope, send, headers, "a Stash admin token is required: log in at "
                                        f"{LOGIN_PATH} or send Authorization: Bearer <token>")
            return
        try:
            token = await self.tokens.check(secret)
        except errors.AccessDenied as exc:
            self.failures.record(address)
            if session_id is not None:
                self.sessions.close(session_id)
            await self._unauthenticated(scope, send, headers, exc.message)
            return
        except errors.StashError as exc:  # the database is down: not the caller's fault
            log.warning("token check failed: %s", exc.message)
            await _refuse(scope, send, 503, exc.code, exc.message)
            return
        if not admin_on_root(token):
            await _refuse(scope, send, 403, "access_denied",
                          "the Dagster UI needs a token with the admin right on / (this one has "
                          f"{', '.join(sorted(token.rights))} on {', '.join(token.namespaces)})")
            return
        if session_id is not None and kind == "http" and scope["method"] == "GET" and path.rstrip("/") == "/graphql" \
                and any(key == "query" for key, _ in parse_qsl(scope.get("query_string", b"").decode("latin-1"))):
            # Dagster executes GraphQL sent over GET, mutations included, and a browser sends
            # such a GET (an <img>, a link) from any page without an Origin
            await _refuse(scope, send, 403, "forbidden", "GraphQL over GET needs Authorization: Bearer <token>")
            return
        if kind == "http":
            await self.app(scope, receive, _framing_denied(send))
        else:
            await self.app(scope, receive, send)

    def _credential(self, headers: dict[str, list[str]], host: str | None) -> tuple[str | None, str | None]:
        """(token secret, session id) from the Authorization header or the session cookie."""
        authorization = _first(headers, "authorization")
        if authorization is not None:
            kind, _, secret = authorization.strip().partition(" ")
            if kind.lower() == "bearer" and secret.strip():
                return secret.strip(), None
            return None, None
        site = _first(headers, "sec-fetch-site")
        if site is not None and site.lower() not in COOKIE_SITES:
            return None, None  # sent by a page of another origin: the cookie does not count
        cookies: dict[str, str] = {}
        for value in headers.get("cookie", []):
            cookies.update(cookie_parser(value))
        session_id = cookies.get(cookie_name(host))
        if not session_id:
            return None, None
        secret = self.sessions.secret(session_id)
        return (secret, session_id) if secret is not None else (None, None)

    async def _unauthenticated(self, scope: Scope, send: Send, headers: dict[str, list[str]], message: str) -> None:
        accept = _first(headers, "accept") or ""
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD") and "text/html" in accept:
            target = scope.get("path", "/")
            if scope.get("query_string"):
                target += "?" + scope["query_string"].decode("latin-1")
            location = f"{LOGIN_PATH}?next={quote(target, safe='')}"
            await _respond(send, 303, b"", b"text/plain", [(b"location", location.encode("latin-1"))])
            return
        await _refuse(scope, send, 401, "access_denied", message,
                      [(b"www-authenticate", b'Bearer realm="stash-dagster-ui"')])

    async def _own_route(self, scope: Scope, receive: Receive, send: Send,
                         headers: dict[str, list[str]], host: str | None) -> None:
        path = scope["path"]
        if path == HEALTH_PATH:
            await _respond(send, 200, b'{"status": "ok"}', b"application/json")
        elif path == LOGIN_PATH and scope["method"] in ("GET", "HEAD"):
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            await self._login_page(send, 200, _safe_next(query.get("next")), "")
        elif path == LOGIN_PATH and scope["method"] == "POST":
            await self._login(scope, receive, send, host)
        elif path == LOGOUT_PATH and scope["method"] in ("GET", "POST"):
            for value in headers.get("cookie", []):
                session_id = cookie_parser(value).get(cookie_name(host))
                if session_id:
                    self.sessions.close(session_id)
            await _respond(send, 303, b"", b"text/plain", [
                (b"location", LOGIN_PATH.encode()),
                (b"set-cookie", f"{cookie_name(host)}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict".encode()),
            ])
        else:
            await _json(send, 404, "not_found", f"no such page: {path}")

    async def _login_page(self, send: Send, status: int, next_path: str, error: str) -> None:
        body = LOGIN_PAGE.format(
            action=LOGIN_PATH,
            next=html.escape(next_path, quote=True),
            error=f'<p class="error">{html.escape(error)}</p>' if error else "",
        ).encode()
        await _respond(send, status, body, b"text/html; charset=utf-8", LOGIN_HEADERS)

    async def _login(self, scope: Scope, receive: Receive, send: Send, host: str | None) -> None:
        address = (scope.get("client") or ("unknown", 0))[0]
        body = b""
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return
            body += message.get("body", b"")
            if len(body) > LOGIN_BODY_MAX:
                await _json(send, 413, "request_too_large", "the login form is larger than it can be")
                return
            if not message.get("more_body", False):
                break
        form = dict(parse_qsl(body.decode("utf-8", errors="replace")))
        next_path = _safe_next(form.get("next"))
        if not self.failures.allowed(address):
            await self._login_page(send, 429, next_path, "Too many failed attempts from this address; retry in a minute.")
            return
        secret = (form.get("token") or "").strip()
        try:
            token = await self.tokens.check(secret or None)
        except errors.AccessDenied:
            self.failures.record(address)
            await self._login_page(send, 401, next_path, "That is not a valid Stash token (unknown or revoked).")
            return
        except errors.StashError as exc:
            await self._login_page(send, 503, next_path, f"The token could not be checked: {exc.message}")
            return
        if not admin_on_root(token):
            self.failures.record(address)
            await self._login_page(send, 403, next_path, "That token lacks the admin right on /; the Dagster UI "
                                   "reaches every namespace.")
            return
        session_id = self.sessions.open(secret)
        secure = "; Secure" if scope.get("scheme") == "https" else ""
        cookie = (f"{cookie_name(host)}={session_id}; Path=/; Max-Age={int(self.sessions.ttl_s)}; "
                  f"HttpOnly; SameSite=Strict{secure}")
        log.info("UI login with token %d (%s) from %s", token.id, token.name, address)
        await _respond(send, 303, b"", b"text/plain", [
            (b"location", next_path.encode("latin-1", errors="replace")),
            (b"set-cookie", cookie.encode("latin-1")),
            (b"cache-control", b"no-store"),
        ])


def _framing_denied(send: Send) -> Send:
    """``send`` adding ``X-Frame-Options: SAMEORIGIN`` to the answer (no framing by another origin)."""

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            names = {name.lower() for name, _ in message.get("headers", [])}
            if b"x-frame-options" not in names:
                message = {**message, "headers": [*message.get("headers", []), (b"x-frame-options", b"SAMEORIGIN")]}
        await send(message)

    return wrapped


def ui_uvicorn_options(settings: Settings) -> dict[str, Any]:
    """``stash_serve.http_edge.uvicorn_options`` (head cap, read timeouts, proxies believed)
    with a protocol that stops timing a connection once it becomes a WebSocket.

    The MCP server refuses WebSockets; this one serves Dagster's GraphQL subscriptions. At
    the upgrade uvicorn hands the connection to its WebSocket protocol right after the
    request's head, while h11 still expects a request body, so the edge's body timer was
    left running and cut every subscription after STASH_HTTP_BODY_TIMEOUT_S. Once the
    connection is upgraded, the timer the edge keeps (``_read_timer``) is cancelled and no
    body is watched; the HTTP protocol object sees no more data after that (WebSocket
    pings keep the connection honest instead). ``tests/e2e/test_dagster_ui_guard.py``
    holds a subscription open past the body timeout.
    """
    from stash_serve.http_edge import uvicorn_options

    options = uvicorn_options(settings)
    guarded = options["http"]

    class UpgradableProtocol(guarded):  # type: ignore[misc,valid-type]
        _upgraded = False

        def handle_websocket_upgrade(self, event: Any) -> None:
            self._upgraded = True
            super().handle_websocket_upgrade(event)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._upgraded:
                timer = getattr(self, "_read_timer", None)
                if timer is not None:
                    timer.cancel()
                    self._read_timer = None
                if hasattr(self, "_body"):
                    self._body = None

    return {**options, "http": UpgradableProtocol}


def _lifespan(tokens: TokenCheck) -> Any:
    """The Dagster app's lifespan: the token-check pool runs while the app does."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        import asyncio

        async with tokens.running():
            try:
                yield
            except asyncio.CancelledError:  # as dagster-webserver's own lifespan: a normal stop
                pass

    return lifespan


def run_ui(
    settings: Settings,
    *,
    host: str = "127.0.0.1",
    port: int = 3000,
    workspace: Path,
    allowed_hosts: Sequence[str] = (),
) -> None:
    """Serve the Dagster UI of the instance in ``DAGSTER_HOME`` behind ``UIGuard`` until SIGINT/SIGTERM."""
    import uvicorn
    from dagster import DagsterInstance
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget
    from dagster._utils.log import configure_loggers
    from dagster_webserver.app import create_app_from_workspace_process_context
    from dagster_webserver.cli import (
        DEFAULT_DB_STATEMENT_TIMEOUT,
        DEFAULT_POOL_MAX_OVERFLOW,
        DEFAULT_POOL_RECYCLE,
    )
    from dagster_webserver.version import __version__

    from stash_pipeline.store import Store

    if not os.environ.get("DAGSTER_HOME"):
        raise errors.ConfigurationError(
            "DAGSTER_HOME is not set: point it at the directory holding dagster.yaml (`stash up` sets it)"
        )
    if not workspace.is_file():
        raise errors.ConfigurationError(f"no workspace file at {workspace}")
    configure_loggers(log_level=settings.log_level.upper())
    store = Store.open(settings, pool_max=1)  # token checks outside the app's lifespan only
    tokens = TokenCheck(store)
    try:
        with DagsterInstance.get() as instance:
            # what dagster-webserver does for a long-running server
            instance.optimize_for_webserver(DEFAULT_DB_STATEMENT_TIMEOUT, DEFAULT_POOL_RECYCLE, DEFAULT_POOL_MAX_OVERFLOW)
            with WorkspaceProcessContext(
                instance,
                version=__version__,
                read_only=False,
                workspace_load_target=WorkspaceFileTarget(paths=[str(workspace)]),
            ) as context:
                dagster_app = create_app_from_workspace_process_context(context, "", None, lifespan=_lifespan(tokens))
                app = UIGuard(dagster_app, tokens, hosts=Hosts(host, allowed_hosts),
                              failures_per_minute=settings.auth_failures_per_minute)
                log.info("Dagster UI on http://%s:%d (log in at %s with an admin token)", host, port, LOGIN_PATH)
                config = uvicorn.Config(
                    app,
                    host=host,
                    port=port,
                    log_level=settings.log_level,
                    lifespan="on",
                    timeout_graceful_shutdown=5,
                    **ui_uvicorn_options(settings),  # header cap, read timeouts, proxies believed
                )
                # as `stash serve mcp`: uvicorn re-raises the signal it stopped on to the
                # handler installed before it; a no-op one makes that a normal return
                for signum in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(signum, lambda *_: None)
                uvicorn.Server(config).run()
    finally:
        store.close()


__all__ = [
    "HEALTH_PATH", "LOGIN_PATH", "LOGOUT_PATH", "Hosts", "Sessions", "UIGuard", "admin_on_root", "cookie_name",
    "run_ui", "same_origin",
]
