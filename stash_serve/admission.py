"""Admission control for MCP over streamable HTTP: a bounded load per server process, and
past it an immediate, typed "busy, retry after" answer instead of a growing wait.

Each server process runs at most STASH_HTTP_MAX_CONCURRENT requests to ``/mcp`` at once
(default STASH_DB_POOL_MAX: a running call may need a pooled connection, and one more
would only wait for it) and keeps at most STASH_HTTP_MAX_QUEUE more waiting for a place
(default four times as many), and answers each, or refuses it, within
STASH_HTTP_QUEUE_TIMEOUT_S of its arrival (its token check and body count). A request
past the queue, or one whose expected wait and then service (from the recent service
time) would end later than that, is answered at once; one that waited in vain, when no
place came in time to serve it before then:

    HTTP/1.1 503 Service Unavailable
    Retry-After: 1
    content-type: application/json

    {"jsonrpc": "2.0", "id": <the request's id>,
     "error": {"code": -32005, "message": "Stash is busy; retry after 0.42 s: …",
               "data": {"error": "busy", "message": "…", "retry_after_s": 0.42}}}

MCP clients surface a JSON-RPC error body at a non-2xx status as the call's error (the
Python SDK raises ``MCPError`` with that code and data), so an agent or its framework
sees a busy server, not a timeout, and when to come back. ``Retry-After`` is whole
seconds (at least 1); ``retry_after_s`` is finer: the time the requests running and
waiting ahead take at the recent service time (``stash_serve.limits.Admission``).
Nothing of a refused request ran: a refused ``remember`` stored nothing; so a busy
answer is sent without the token check that runs beside a request of a token seen valid
before (``stash_serve.http``): that check begins once the request has its place
(``ON_ADMITTED_SCOPE_KEY``), the answer says nothing of the token, and an overloaded
server pays no lookup for a request it turns away. A token past its
own limit of requests in flight gets the same error at 429, its ``data.error``
``rate_limited`` and its id null (``stash_serve.http``: that body is never read).

What is not counted: a POST carrying no request (a notification or a response: nothing to
wait for, and cheap), health, readiness and metrics, and the legacy SSE transport, whose
answers travel on the event stream, not on the POST. stdio has no such limit: its one
client waits for its own answers.
"""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stash_serve.limits import Admission, retry_after_header
from stash_serve.metrics import BUSY, RUNNING, WAITING

#: the JSON-RPC error code of a busy answer (the implementation-defined server-error range;
#: -32005 is "limit exceeded" in other JSON-RPC APIs too)
BUSY_CODE = -32005
#: the error name in the answer's ``data``, as tool errors name theirs
BUSY_ERROR = "busy"
#: a token past its own limit of requests in flight (HTTP 429, ``stash_serve.http``) gets the
#: same code, since the remedy is the same (wait, send again); ``data.error`` names the limit
RATE_LIMITED_CODE = BUSY_CODE
RATE_LIMITED_ERROR = "rate_limited"
#: the ASGI scope key of a request's arrival (``time.monotonic()``), stamped by the
#: outermost layer (``arrived``); admission counts the time since against its limit
ARRIVED_SCOPE_KEY = "stash.arrived"
#: set in the scope of a request answered busy: nothing of it ran
REFUSED_BUSY_SCOPE_KEY = "stash.refused_busy"
#: a callable an outer layer may put in the scope, called when the request takes its place
ON_ADMITTED_SCOPE_KEY = "stash.on_admitted"


def arrived(scope: Scope) -> float:
    """When the request of ``scope`` arrived: stamped by the first layer that asks."""
    return scope.setdefault(ARRIVED_SCOPE_KEY, time.monotonic())


class AdmissionControl:
    """ASGI middleware: POST /mcp takes a place of ``admission`` or is answered busy (503)."""

    def __init__(self, app: ASGIApp, admission: Admission, path: str = "/mcp") -> None:
        self.app = app
        self.admission = admission
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self.path:
            await self.app(scope, receive, send)
            return
        admission = self.admission
        WAITING.inc()
        entered = False
        try:
            async with admission.enter(time.monotonic() - arrived(scope)) as refused:
                WAITING.dec()
                entered = True
                if refused is None:
                    admitted = scope.get(ON_ADMITTED_SCOPE_KEY)
                    if admitted is not None:
                        admitted()
                    RUNNING.inc()
                    try:
                        await self.app(scope, receive, send)
                    finally:
                        RUNNING.dec()
                    return
        finally:
            if not entered:  # cancelled while waiting
                WAITING.dec()
        await self._refuse(scope, receive, send, refused)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, reason: str) -> None:
        # BodyLimit (outside) has read the body whole: the first message holds it
        first = await receive()
        body = first.get("body", b"") if first["type"] == "http.request" else b""
        payload = _parsed(body)
        ids = _request_ids(payload)
        if not ids:  # no request to refuse (a notification, a response, not JSON-RPC): let it pass
            await self.app(scope, _replay(first, receive), send)
            return
        BUSY.labels(reason).inc()
        scope[REFUSED_BUSY_SCOPE_KEY] = True
        admission = self.admission
        retry_s = admission.retry_after_s()
        message = busy_message(admission, reason, retry_s)
        answers = [refusal(id_, BUSY_CODE, BUSY_ERROR, message, retry_s) for id_ in ids]
        answer = json.dumps(answers if isinstance(payload, list) else answers[0]).encode()
        await send({
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(answer)).encode()),
                (b"retry-after", retry_after_header(retry_s)),
            ],
        })
        await send({"type": "http.response.body", "body": answer})


def refusal(id_: Any, code: int, error: str, message: str, retry_after_s: float) -> dict[str, Any]:
    """The JSON-RPC error refusing request ``id_`` (None when its body was not read): ``code``,
    and ``data`` naming the ``error`` and the seconds to wait before sending it again."""
    data = {"error": error, "message": message, "retry_after_s": retry_after_s}
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message, "data": data}}


def busy_message(admission: Admission, reason: str, retry_s: float) -> str:
    """What a refused caller reads: busy, when to retry, and which limit said so."""
    if reason == Admission.WAITED:
        why = (f"no place came free in time to answer it within {admission.wait_s:g} s of its arrival "
               "(STASH_HTTP_QUEUE_TIMEOUT_S)")
    elif reason == Admission.EXPECTED_WAIT:
        why = (f"the wait for a place and the call would end past {admission.wait_s:g} s from its arrival "
               "(STASH_HTTP_QUEUE_TIMEOUT_S)")
    else:
        why = (f"{admission.running} requests running and {admission.waiting} waiting in this server process "
               "(STASH_HTTP_MAX_CONCURRENT, STASH_HTTP_MAX_QUEUE)")
    return f"Stash is busy; retry after {retry_s:g} s: {why}"


def _parsed(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def _request_ids(payload: Any) -> list[Any]:
    """The ids of the JSON-RPC requests in ``payload`` (none for notifications and responses)."""
    messages = payload if isinstance(payload, list) else [payload]
    return [m["id"] for m in messages if isinstance(m, dict) and "method" in m and m.get("id") is not None]


def _replay(first: Message, receive: Receive) -> Receive:
    pending: Message | None = first

    async def replay() -> Message:
        nonlocal pending
        if pending is not None:
            message, pending = pending, None
            return message
        return await receive()

    return replay


__all__ = [
    "ARRIVED_SCOPE_KEY",
    "BUSY_CODE",
    "BUSY_ERROR",
    "ON_ADMITTED_SCOPE_KEY",
    "RATE_LIMITED_CODE",
    "RATE_LIMITED_ERROR",
    "REFUSED_BUSY_SCOPE_KEY",
    "AdmissionControl",
    "arrived",
    "busy_message",
    "refusal",
]
