"""The HTTP face of the MCP server: one Starlette app served by uvicorn.

Routes
    /mcp        MCP streamable HTTP (current clients)
    /sse        MCP over SSE, with POSTs to /messages/ (older clients)
    /healthz    200 when the process is up and PostgreSQL answers a ping, else 503
    /readyz     200 once the process can serve a recall (``warmup``; with several workers,
                every worker can), PostgreSQL answers and the schema is at the latest
                migration, else 503 with the reason
    /metrics    Prometheus text: tool calls by tool and outcome, errors by code, latency,
                requests refused and running (the sum over workers, with several)
    /console/   the console: memory in the browser (``stash_serve.console``), signed in with
                the same tokens, checked by the console itself (a cookie or a bearer)

Admission: at most STASH_HTTP_MAX_CONCURRENT requests to /mcp run at once in a process,
STASH_HTTP_MAX_QUEUE more wait; past that a request is answered 503 busy with
Retry-After and a JSON-RPC error at once (``stash_serve.admission``).

Authentication: with ``auth`` on, every request except /healthz, /readyz and /metrics must carry
``Authorization: Bearer <token>`` (``stash token create``). A missing, unknown or revoked
token is answered 401 here, before the MCP layer sees the request, with
``WWW-Authenticate: Bearer error="invalid_token"`` and the reason; OAuth discovery and
registration paths answer 404 (Stash takes static tokens, it is no authorization server),
so MCP clients show the reason rather than start an OAuth flow; a valid one is put in
the ASGI scope (``TOKEN_SCOPE_KEY``) where each tool call reads its namespace scope and
rights, and as the scope's user, so an SSE session answers only the token that opened it.
An unknown token is remembered briefly (no database lookup on a repeat); too many failed
checks a minute of one token from one address are answered 429 for that pair only (so a
local agent retrying a revoked token does not lock out the others on 127.0.0.1), and an
address failing with ten times as many, across tokens, has its lookups of tokens not seen
valid paced (STASH_AUTH_GUESS_LOOKUPS_PER_SECOND, one at a time; the others wait their
turn) and an unknown one answered 429 once looked up: a valid token is never refused. A
token has at most STASH_HTTP_MAX_REQUESTS_PER_TOKEN requests in flight (one more waits
briefly, then 429). Every 429 on /mcp carries a JSON-RPC error, as busy is answered.
The address is the TCP peer unless it is one of STASH_TRUSTED_PROXIES
(``stash_serve.http_edge``). Health and metrics stay open so
probes and scrapers need no secret; health answers within HEALTH_BUDGET_S whether or not
the database is up. Only HTTP is served: a WebSocket upgrade is refused. On a loopback
address the MCP transports check Host and Origin (DNS-rebinding protection).
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stash_pipeline import errors
from stash_pipeline.auth import TokenInfo
from stash_pipeline.store import Store
from stash_serve.admission import (
    BUSY_CODE,
    BUSY_ERROR,
    ON_ADMITTED_SCOPE_KEY,
    RATE_LIMITED_CODE,
    RATE_LIMITED_ERROR,
    REFUSED_BUSY_SCOPE_KEY,
    AdmissionControl,
    arrived,
    refusal,
)
from stash_serve.console import routes as console_routes
from stash_serve.console.app import build_console
from stash_serve.limits import Admission, InFlight, Pacer, SlidingWindow
from stash_serve.mcp.calls import TOKEN_SCOPE_KEY, VERIFICATION_SCOPE_KEY
from stash_serve.metrics import AUTH_FAILURES, BUSY, exposition
from stash_serve.token_check import CheckTooLate, SeenTokens, TokenCheck, Verification
from stash_serve.warmup import Warmup

if TYPE_CHECKING:
    from stash_serve.workers import Peers

log = logging.getLogger("stash.http")

#: an address may fail this many times the per-token limit a minute, across tokens
GUESS_FACTOR = 10
#: a request of a token with STASH_HTTP_MAX_REQUESTS_PER_TOKEN in flight waits this long for
#: one to finish (a burst of calls passes), then is answered 429
IN_FLIGHT_WAIT_S = 2.0
#: ... and told to come back after this many seconds
IN_FLIGHT_RETRY_S = 1
#: a request whose token check found no connection in time is told to come back after this many seconds
TOKEN_CHECK_RETRY_S = 1
#: /healthz and /readyz answer within this many seconds, the database up or not
HEALTH_BUDGET_S = 0.8

#: probes and the scraper need no secret; every other path (MCP, SSE, anything new) does
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
#: where OAuth clients look for an authorization server (RFC 9728 protected-resource
#: metadata, RFC 8414 server metadata, OpenID discovery) and register (RFC 7591): Stash
#: takes static bearer tokens, so these answer 404 with that news, without a token
OAUTH_PREFIXES = ("/.well-known/",)
OAUTH_PATHS = frozenset({"/register", "/authorize", "/token"})
NO_OAUTH = (
    "Stash does not offer OAuth: it takes a static bearer token (create one with `stash token create`) "
    "sent as `Authorization: Bearer <token>`"
)
#: streamable HTTP: one request, one answer, so its token check can run alongside it
STREAMABLE_PATH = "/mcp"
#: the console checks its own credential (a bearer, or the cookie its login page sets)
CONSOLE_PREFIX = "/console"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback name or address: localhost, any of 127.0.0.0/8, ::1."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def transport_security(host: str) -> TransportSecuritySettings | None:
    """Host and Origin checks (DNS-rebinding protection) for a server bound to ``host``.

    On a loopback address only loopback Host and Origin values are accepted, whichever
    loopback the server listens on (the SDK turns the check on for 127.0.0.1, localhost
    and ::1 only, so 127.0.0.2 would serve a page from any site the browser resolved to
    it). A server on a routable address needs tokens anyway and is reached under names
    this process cannot know, so it keeps the SDK's default.
    """
    if not is_loopback(host):
        return None
    bound = host.strip().strip("[]").lower()
    names = {"127.0.0.1", "localhost", "[::1]", f"[{bound}]" if ":" in bound else bound}
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=sorted({form for name in names for form in (name, f"{name}:*")}),
        allowed_origins=sorted({form for name in names for form in (f"http://{name}", f"http://{name}:*")}),
    )


class RefuseOtherScopes:
    """Serve HTTP (and the server's lifespan) only: every other ASGI scope is refused.

    Nothing here speaks WebSocket; an upgrade request would otherwise reach the HTTP
    routes unauthenticated and fail inside them with a traceback.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "lifespan"):
            if scope["type"] == "http":
                arrived(scope)  # the time admission counts from, when no token check came first
            await self.app(scope, receive, send)
            return
        AUTH_FAILURES.labels("refused").inc()
        if scope["type"] == "websocket":
            # closing before accepting makes the server answer the upgrade with 403
            await send({"type": "websocket.close", "code": 1008})


class BodyLimit:
    """Refuse a request body over STASH_HTTP_MAX_BODY_BYTES with 413 and Stash's JSON error.

    The MCP SDK has a cap of its own (4 MiB unless told otherwise), undocumented here and
    answered in plain text: a remember_batch within every item limit got it. This layer
    answers first, by the declared Content-Length before reading anything, else as the
    streamed body passes the cap; the SDK is given the same cap, so it never answers a
    body this layer let through. A body within the cap is read here and handed on whole.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        declared = next((v for k, v in scope.get("headers", []) if k == b"content-length"), None)
        if declared is not None and declared.strip().isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: the app sees it
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await self._refuse(send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        first: Message | None = (
            {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            if message["type"] == "http.request" else message
        )

        async def replay() -> Message:
            nonlocal first
            if first is not None:
                message, first = first, None
                return message
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        await _send_json(send, 413, {
            "error": "request_too_large",
            "message": f"the request body is larger than {self.max_bytes} bytes (STASH_HTTP_MAX_BODY_BYTES); "
                       "send fewer items per call",
        }, [(b"connection", b"close")])


class BearerAuthMiddleware:
    """Reject MCP requests without a valid bearer token (401); attach the token to the scope.

    Failing is cheap for the server: a token found unknown is remembered as unknown for
    STASH_AUTH_NEGATIVE_CACHE_S (by its hash; no database lookup on a repeat), and one token
    failing STASH_AUTH_FAILURES_PER_MINUTE times a minute from one address is answered 429
    without any lookup until its failures age out. Known tokens are looked up every time
    (one round trip from the event loop, ``stash_serve.token_check``), so a revocation
    takes effect on the next request; for a token seen valid before, on /mcp, the lookup
    runs alongside the request and gates its work and its answer.

    Guessing (an address failing GUESS_FACTOR times that many a minute, across tokens) never
    locks out a valid token: every local agent shares 127.0.0.1, and after a restart every
    token is one this process has not seen. Such an address's lookups of tokens not seen
    valid take turns, at most STASH_AUTH_GUESS_LOOKUPS_PER_SECOND a second and one at a time
    (``Pacer``; a request waits for its turn, none is refused), and one found unknown is
    answered 429: the database's cost stays bounded per address, and a valid token is
    served once its turn comes (at once, unless that address keeps many guesses waiting).

    Each admitted request holds one of its token's STASH_HTTP_MAX_REQUESTS_PER_TOKEN places
    until its answer ends (an open SSE stream holds one while it lasts); one more waits up
    to IN_FLIGHT_WAIT_S for a place (a burst of quick calls passes), then is answered 429
    with Retry-After: 1, so one token's slow or stalled requests cannot take every
    connection the server has. On /mcp that answer is a JSON-RPC error (code
    RATE_LIMITED_CODE, ``data.error`` ``rate_limited``, id null: the body is not read for
    it), which MCP clients raise as the call's error; elsewhere it is Stash's error JSON.

    A POST to /mcp is answered within STASH_HTTP_QUEUE_TIMEOUT_S of its arrival
    (``stash_serve.admission``), its token check included: a check that found no free
    connection of the token-check pool by then is answered 503 busy (BUSY_CODE, id null,
    Retry-After: 1) without having looked anything up.
    """

    def __init__(self, app: ASGIApp, store: Store, tokens: TokenCheck | None = None) -> None:
        self.app = app
        self.store = store
        self.tokens = tokens if tokens is not None else TokenCheck(store)
        self.seen = SeenTokens()
        settings = store.settings
        # Failures count per (address, token): every local agent shares 127.0.0.1, and one
        # retrying a revoked token must not lock out the others. An address past a wider
        # per-address window (guessing) has its lookups paced, never refused.
        self.failures = SlidingWindow(settings.auth_failures_per_minute, 60.0)
        self.guesses = SlidingWindow(settings.auth_failures_per_minute * GUESS_FACTOR, 60.0)
        self.lookups = Pacer(settings.auth_guess_lookups_per_second)
        self.unknown = NegativeCache(settings.auth_negative_cache_s)
        self.in_flight = InFlight(settings.http_max_requests_per_token, IN_FLIGHT_WAIT_S)
        self.answer_within_s = settings.http_queue_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # other scopes pass to the app, whose first layer (RefuseOtherScopes) refuses them
        if scope["type"] == "http":
            arrived(scope)  # admission counts the token check against the request's time
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or _is_console(scope["path"]):
            await self.app(scope, receive, send)
            return
        if scope["path"] in OAUTH_PATHS or scope["path"].startswith(OAUTH_PREFIXES):
            await _send_json(send, 404, {"error": "not_found", "message": NO_OAUTH}, [])
            return
        address = (scope.get("client") or ("unknown", 0))[0]
        secret = _bearer(scope)
        # this token failing again and again from this address: never a valid token
        if not self.failures.allowed(_failure_key(address, secret)):
            await _deny(send, 429, errors.RateLimited(
                "too many failed checks of this token from this address; retry in a minute"
            ), path=scope["path"])
            return
        if secret is not None and self.unknown.contains(secret):
            self._record_failure(address, secret)
            await _deny(send, 401, errors.AccessDenied("access denied: unknown or revoked token"))
            return
        seen = self.seen.get(secret) if secret is not None and scope["path"] == STREAMABLE_PATH else None
        if seen is not None:
            assert secret is not None
            async with self.in_flight.slot(seen.id) as got:
                if got:
                    await self._serve_while_checking(scope, receive, send, address, secret, seen)
                else:
                    await self._too_many(scope, send)
            return
        guessing = secret is not None and not self.guesses.allowed(address)
        try:
            if guessing:  # looked up all the same, in turn: it may be a valid token
                async with self.lookups.turn(address):
                    token = await self.tokens.check(secret)
            else:
                token = await self.tokens.check(secret, self._check_wait_s(scope))
        except CheckTooLate:
            await self._busy(send)
            return
        except errors.StashError as exc:
            await self._refuse(send, scope["path"], address, secret, exc, guessing=guessing)
            return
        assert secret is not None  # the check refuses a missing secret
        self.seen.add(secret, token)
        async with self.in_flight.slot(token.id) as got:
            if not got:
                await self._too_many(scope, send)
                return
            _admit(scope, token)
            await self.app(scope, receive, send)

    def _check_wait_s(self, scope: Scope) -> float | None:
        """How long a token check may wait for a connection: on a POST to /mcp, what is left
        of the request's answer limit; elsewhere the pool's own timeout."""
        if scope["path"] != STREAMABLE_PATH or scope["method"] != "POST":
            return None
        return self.answer_within_s - (time.monotonic() - arrived(scope))

    async def _busy(self, send: Send) -> None:
        BUSY.labels("token_check").inc()
        message = (f"Stash is busy; retry after {TOKEN_CHECK_RETRY_S} s: no connection came free for the "
                   f"token check within {self.answer_within_s:g} s of the request's arrival "
                   "(STASH_HTTP_QUEUE_TIMEOUT_S)")
        answer = refusal(None, BUSY_CODE, BUSY_ERROR, message, float(TOKEN_CHECK_RETRY_S))
        await _send_json(send, 503, answer, [(b"retry-after", str(TOKEN_CHECK_RETRY_S).encode())])

    async def _too_many(self, scope: Scope, send: Send) -> None:
        exc = errors.RateLimited(
            f"this token has had {self.in_flight.limit} requests in flight for {IN_FLIGHT_WAIT_S:g} s "
            "(STASH_HTTP_MAX_REQUESTS_PER_TOKEN); retry when one has finished"
        )
        await _deny(send, 429, exc, retry_after=IN_FLIGHT_RETRY_S, path=scope["path"])

    async def _serve_while_checking(
        self, scope: Scope, receive: Receive, send: Send, address: str, secret: str, seen: TokenInfo
    ) -> None:
        """Serve a token seen valid before while its check runs: no tool work (it waits in
        ``ToolCalls.run``) and no byte of the answer before the check passes; if it fails,
        the answer is the refusal instead."""
        check = Verification(seen)
        scope[VERIFICATION_SCOPE_KEY] = check
        scope[ON_ADMITTED_SCOPE_KEY] = check.start  # looked up once admitted, or once awaited
        _admit(scope, seen)
        passed: bool | None = None

        async def send_once_checked(message: Message) -> None:
            nonlocal passed
            if passed is None and scope.get(REFUSED_BUSY_SCOPE_KEY):
                await send(message)  # busy: nothing ran, and the answer says nothing of the token
                return
            if passed is None:
                passed = await check.passed()
                if not passed:
                    assert check.error is not None
                    await self._refuse(send, scope["path"], address, secret, check.error)
            if passed:
                await send(message)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(check.run, self.tokens.check, secret)
            await self.app(scope, receive, send_once_checked)
            if scope.get(REFUSED_BUSY_SCOPE_KEY):
                # its check never began (it begins once admitted): an overloaded server pays no
                # lookup for a request it turns away
                tasks.cancel_scope.cancel()
                return
            if passed is None and not await check.passed():  # the app answered nothing
                assert check.error is not None
                await self._refuse(send, scope["path"], address, secret, check.error)

    async def _refuse(self, send: Send, path: str, address: str, secret: str | None, exc: errors.StashError,
                      *, guessing: bool = False) -> None:
        if secret is not None:
            self.seen.forget(secret)
        if isinstance(exc, errors.AccessDenied):
            self._record_failure(address, secret)
            if secret is not None:
                self.unknown.add(secret)
            if guessing:  # looked up and unknown, from an address past its failure budget
                await _deny(send, 429, errors.RateLimited(
                    "too many failed token checks from this address; retry in a minute"
                ), path=path)
                return
            await _deny(send, 401, exc)
        else:  # the database is down: not the caller's fault
            log.warning("token check failed: %s", exc.message)
            await _deny(send, 503, exc)

    def _record_failure(self, address: str, secret: str | None) -> None:
        self.failures.record(_failure_key(address, secret))
        self.guesses.record(address)


def _is_console(path: str) -> bool:
    return path == CONSOLE_PREFIX or path.startswith(CONSOLE_PREFIX + "/")


def _failure_key(address: str, secret: str | None) -> tuple[str, str]:
    """What failed checks are counted by: the client address and the token's fingerprint."""
    fingerprint = "" if secret is None else hashlib.sha256(secret.encode("utf-8", errors="surrogatepass")).hexdigest()[:16]
    return address, fingerprint


def _admit(scope: Scope, token: TokenInfo) -> None:
    scope[TOKEN_SCOPE_KEY] = token
    # The SDK's SSE transport binds a session to the principal that opened it and answers
    # a POST into it from any other principal as if the session did not exist; without a
    # user in the scope every token is the same (anonymous) principal.
    scope["user"] = AuthenticatedUser(
        AccessToken(token=f"stash-token-{token.id}", client_id=f"stash-token-{token.id}", scopes=sorted(token.rights))
    )


class NegativeCache:
    """Secrets recently found unknown, by sha256, for ``ttl_s`` seconds; bounded in size."""

    def __init__(self, ttl_s: float, max_entries: int = 10_000) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._expiry: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(secret: str) -> str:
        return hashlib.sha256(secret.encode("utf-8", errors="surrogatepass")).hexdigest()

    def contains(self, secret: str) -> bool:
        if self.ttl_s <= 0:
            return False
        key = self._key(secret)
        with self._lock:
            expiry = self._expiry.get(key)
            if expiry is None:
                return False
            if expiry <= time.monotonic():
                del self._expiry[key]
                return False
            return True

    def add(self, secret: str) -> None:
        if self.ttl_s <= 0:
            return
        key = self._key(secret)
        with self._lock:
            self._expiry[key] = time.monotonic() + self.ttl_s
            self._expiry.move_to_end(key)
            while len(self._expiry) > self.max_entries:
                self._expiry.popitem(last=False)


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            text = value.decode("latin-1").strip()
            kind, _, secret = text.partition(" ")
            if kind.lower() == "bearer" and secret.strip():
                return secret.strip()
            return None
    return None


async def _deny(send: Send, status: int, exc: errors.StashError, *, retry_after: int = 60,
                path: str | None = None) -> None:
    """Refuse a request before the app sees it: ``exc`` as Stash's JSON error, but a 429 on
    the MCP endpoint as the JSON-RPC error an agent's client can parse and act on (code
    RATE_LIMITED_CODE, ``data.error`` "rate_limited", ``data.retry_after_s``), as admission
    answers busy there; both with Retry-After."""
    AUTH_FAILURES.labels(str(status)).inc()
    headers: list[tuple[bytes, bytes]] = []
    if status == 401:
        # RFC 6750's challenge: the token is the problem, and no resource_metadata, so an
        # MCP client with a static token reports the message instead of looking for an
        # authorization server (the discovery paths answer 404 anyway, see OAUTH_PATHS)
        description = exc.message.replace("\\", "").replace('"', "'")
        challenge = f'Bearer realm="stash", error="invalid_token", error_description="{description}"'
        headers.append((b"www-authenticate", challenge.encode("latin-1", errors="replace")))
    if status == 429:
        headers.append((b"retry-after", str(retry_after).encode()))
        if path == STREAMABLE_PATH:
            answer = refusal(None, RATE_LIMITED_CODE, RATE_LIMITED_ERROR, exc.message, float(retry_after))
            await _send_json(send, status, answer, headers)
            return
    await _send_json(send, status, exc.to_dict(), headers)


async def _send_json(send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def _health_routes(store: Store, warmup: Warmup | None, peers: Peers | None = None) -> list[BaseRoute]:
    async def database_answers() -> bool:
        # a fresh connection, not the pool (which may be busy, or wait its whole timeout for
        # a database that is down), and an answer within HEALTH_BUDGET_S whatever happens
        with anyio.move_on_after(HEALTH_BUDGET_S):
            return await anyio.to_thread.run_sync(store.db.probe, HEALTH_BUDGET_S, abandon_on_cancel=True)
        return False

    async def healthz(request: Request) -> Response:
        ok = await database_answers()
        return JSONResponse(
            {"status": "ok" if ok else "database unreachable"}, status_code=200 if ok else 503
        )

    def _readiness() -> dict[str, Any]:
        from stash_pipeline.db.migrate import current_revision, head_revision

        try:
            current = current_revision(store.db.dsn)
        except errors.StashError as exc:
            return {"ready": False, "reason": exc.message}
        head = head_revision()
        if current != head:
            return {
                "ready": False,
                "reason": "migrations pending; run `stash migrate`",
                "schema": current,
                "head": head,
            }
        return {"ready": True, "schema": current}

    async def readyz(request: Request) -> Response:
        if warmup is not None and not warmup.ready.is_set():
            return JSONResponse({"ready": False, "reason": f"starting: waiting for {warmup.waiting_on}"},
                                status_code=503)
        if peers is not None and (ready := peers.ready_count()) < peers.count:
            # a probe reaches one worker, a client's next request maybe another
            return JSONResponse({"ready": False, "reason": f"starting: {ready} of {peers.count} workers ready"},
                                status_code=503)
        if not await database_answers():
            return JSONResponse({"ready": False, "reason": "database unreachable"}, status_code=503)
        state = await anyio.to_thread.run_sync(_readiness)
        if peers is not None:
            state["workers"] = peers.count
        return JSONResponse(state, status_code=200 if state["ready"] else 503)

    async def metrics(request: Request) -> Response:
        return Response(exposition(), media_type=CONTENT_TYPE_LATEST)

    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]


def build_app(store: Store, server: MCPServer, *, auth: bool, host: str = "127.0.0.1",
              warmup: Warmup | None = None, peers: Peers | None = None) -> ASGIApp:
    """The ASGI app: MCP (streamable HTTP + SSE), health, readiness and metrics, behind bearer auth.

    With ``warmup``, /readyz answers ready only once it has passed (a recall can be served).
    With ``peers`` (a worker among several, ``stash_serve.workers``), only once every worker
    has, and SSE messages for another worker's session are passed on to it.
    """
    # Stateless: no per-session state lives in this process (tools keep none), so any
    # replica behind a load balancer can answer any request (docs/deploy.md). SSE is
    # session-bound by design: route it with sticky sessions.
    # Each POST is answered with one JSON body rather than a one-event SSE stream: the
    # protocol allows either, every client accepts both, and the stream's machinery (a task
    # group per response, a disconnect watcher, event framing on both sides) cost a few
    # milliseconds a call. No tool sends notifications or requests while it runs, the one
    # thing only a stream could carry.
    security = transport_security(host)
    # the SDK's own body cap is set to ours, which BodyLimit (below) answers first, in JSON
    body_cap = store.settings.http_max_body_bytes
    streamable = server.streamable_http_app(
        host=host, stateless_http=True, json_response=True, transport_security=security,
        max_request_body_size=body_cap,
    )
    # with several workers an SSE session's message path names the worker holding it
    message_path = "/messages/" if peers is None else peers.message_path(peers.index)
    sse = server.sse_app(host=host, transport_security=security, max_request_body_size=body_cap,
                         message_path=message_path)
    tokens = TokenCheck(store)
    console = build_console(store, auth=auth, loopback=is_loopback(host), tokens=tokens, routes=console_routes())
    routes = [*_health_routes(store, warmup, peers), *streamable.routes, *sse.routes,
              *(peers.forward_routes() if peers is not None else []),
              Route(CONSOLE_PREFIX, lambda request: RedirectResponse(CONSOLE_PREFIX + "/"), methods=["GET"]),
              Mount(CONSOLE_PREFIX, console)]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with server.session_manager.run(), contextlib.AsyncExitStack() as running:
            if auth:
                await running.enter_async_context(tokens.running())
            yield

    # the body cap inside the token check: a client without a valid token cannot make the server read a
    # body; admission inside both: a place is taken by an authenticated request whose body has arrived
    running, queue = store.settings.http_admission
    admission = Admission(running, queue, store.settings.http_queue_timeout_s)
    app: ASGIApp = Starlette(routes=routes, lifespan=lifespan,
                             middleware=[Middleware(RefuseOtherScopes), Middleware(BodyLimit, max_bytes=body_cap),
                                         Middleware(AdmissionControl, admission=admission, path=STREAMABLE_PATH)])
    if auth:
        app = BearerAuthMiddleware(app, store, tokens)
    return app
