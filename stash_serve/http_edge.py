"""The HTTP server's edge: how much and how slowly a client may send before a request exists.

uvicorn bounds neither the time a client takes to send a request's head nor (with
httptools) its size: two 60 MB headers kept the event loop parsing for seconds, and
slow clients held connections open indefinitely, while /healthz waited behind them.
``GuardedH11Protocol`` is uvicorn's own h11 protocol with three limits added at the
socket, before any parsing or application code runs:

* a request head (request line + headers) larger than STASH_HTTP_MAX_HEADER_BYTES is
  answered ``431 Request Header Fields Too Large`` and the connection closed. Only the
  head's bytes count, up to the blank line that ends it, however they arrive: a body sent
  in the same write as its head (``http.client`` always does that) is no head;
* a head not complete within STASH_HTTP_HEADER_TIMEOUT_S of its first byte (or of the
  connection opening) is answered ``408 Request Timeout`` and the connection closed;
* a body paused for more than STASH_HTTP_BODY_TIMEOUT_S is cut off (the application
  sees the client disconnect);
* a body still arriving STASH_HTTP_BODY_DEADLINE_S after its head plus 1 s per
  STASH_HTTP_BODY_MIN_RATE bytes received (Apache's mod_reqtimeout rule) is answered
  ``408 Request Timeout`` and the connection closed. The stall limit alone let a body
  trickled one byte a second hold a connection for as long as the client liked: every
  byte restarted it. Time the server itself stops reading (uvicorn pauses a connection
  whose application has not taken the body yet) counts against neither limit.

``uvicorn_options(settings)`` is what ``stash_serve.serve`` passes to ``uvicorn.Config``:
this protocol, h11's own buffer limit just above ours, and proxy headers believed only
from STASH_TRUSTED_PROXIES (uvicorn believes 127.0.0.1 by default, so any local process
could claim any client address, and so dodge or aim the failed-token limit).

uvicorn has no public hook for these limits, so this module alone relies on its internals;
``tests/unit/test_http_edge_contract.py`` fails on the uvicorn or h11 release that changes them.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from stash_pipeline.config import Settings

#: the end of a request head, as h11 finds it (``h11._receivebuffer``: a bare LF is accepted)
HEAD_END = re.compile(rb"\n\r?\n")
#: bytes of a chunk's end that may begin a HEAD_END completed by the next chunk
HEAD_END_OVERLAP = 2


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request-head size cap and head/body read timeouts."""

    #: a subclass per server sets these (``uvicorn_options``): uvicorn builds the protocol itself
    max_header_bytes = 65_536
    header_timeout_s = 10.0
    body_timeout_s = 30.0
    body_deadline_s = 10.0
    body_min_rate = 65_536

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_bytes = 0
        self._head_tail = b""  # the last bytes of the head so far (a blank line split across writes)
        self._read_timer: asyncio.TimerHandle | None = None
        self._body: BodyClock | None = None  # while a request body is arriving

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.header_timeout_s, 408)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:  # still reading a request's head
            if self._head_bytes == 0 and self._read_timer is None:
                self._arm(self.header_timeout_s, 408)
            self._head_bytes += self._head_part(data)
            if self._head_bytes > self.max_header_bytes:
                self._refuse(431, "Request Header Fields Too Large", "the request head is larger than "
                             f"{self.max_header_bytes} bytes (STASH_HTTP_MAX_HEADER_BYTES)")
                return
        super().data_received(data)
        if self.transport.is_closing():
            return
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            self._head_bytes, self._head_tail = 0, b""
            now = self.loop.time()
            if self._body is None:  # the head is complete: the body's clocks start
                self._body = BodyClock(now)
                self._disarm()
                self._watch_body()
            else:  # the check, when due, looks at the clock again: no timer churn per chunk
                self._body.received(len(data), now)
        elif state is not h11.IDLE:
            self._head_bytes, self._head_tail = 0, b""
            self._body = None
            self._disarm()

    def _head_part(self, data: bytes) -> int:
        """How many of ``data``'s bytes belong to the request head: all of them until the
        blank line that ends it, none after (the body, sent in the same write)."""
        window = self._head_tail + data
        end = HEAD_END.search(window)
        if end is None:
            self._head_tail = window[-HEAD_END_OVERLAP:]
            return len(data)
        self._head_tail = b""
        return max(end.end() - (len(window) - len(data)), 0)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # the next request's head is counted afresh, timed from its first byte
        self._head_bytes, self._head_tail = 0, b""
        self._body = None
        self._disarm()

    # -- the body's two limits: a stall, and the whole body's deadline ---------------------

    def _watch_body(self) -> None:
        """Check the body when its stall limit or its deadline falls due, whichever first."""
        body = self._body
        assert body is not None
        due = min(body.last_data + self.body_timeout_s, body.deadline(self.body_deadline_s, self.body_min_rate))
        self._read_timer = self.loop.call_at(due, self._check_body)

    def _check_body(self) -> None:
        self._read_timer = None
        body = self._body
        if body is None or self.transport.is_closing() or self.conn.their_state is not h11.SEND_BODY:
            return
        now = self.loop.time()
        if self.flow.read_paused:  # the server is not reading: the client is not late
            body.paused(now)
        elif now >= body.deadline(self.body_deadline_s, self.body_min_rate):
            self._cut(f"the request body did not arrive within {self.body_deadline_s:g} s plus 1 s per "
                      f"{self.body_min_rate} bytes (STASH_HTTP_BODY_DEADLINE_S, STASH_HTTP_BODY_MIN_RATE)")
            return
        elif now >= body.last_data + self.body_timeout_s:  # nothing to answer: close (as ever)
            self._body = None
            self.logger.info("closed a connection whose request body stalled for %g s", self.body_timeout_s)
            self.transport.close()
            return
        self._watch_body()

    def _cut(self, message: str) -> None:
        """End a request whose body came too slowly: 408 if no answer has begun, else just close."""
        self._body = None
        # h11 is in SEND_RESPONSE from the request's head until the answer's head is sent
        if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            self._refuse(408, "Request Timeout", message)
        else:
            self.logger.info("closed a connection: %s", message)
            self.transport.close()

    def _arm(self, delay: float, status: int | None) -> None:
        self._disarm()
        self._read_timer = self.loop.call_later(delay, self._timed_out, status)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _timed_out(self, status: int | None) -> None:
        self._read_timer = None
        if self.transport.is_closing():
            return
        if status is not None and self.conn.their_state is h11.IDLE and self.conn.our_state is h11.IDLE:
            self._refuse(status, "Request Timeout", f"the request head did not arrive within {self.header_timeout_s:g} s "
                         "(STASH_HTTP_HEADER_TIMEOUT_S)")
        else:
            self.transport.close()

    def _refuse(self, status: int, reason: str, message: str) -> None:
        """Answer ``status`` directly on the socket (no request was parsed) and close."""
        self._disarm()
        self.logger.info("refused a request from %s: %s", self.client[0] if self.client else "?", message)
        body = json.dumps({"error": "bad_request", "message": message}).encode()
        head = (
            f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        ).encode()
        self.transport.write(head + body)
        self.transport.close()


class BodyClock:
    """When a request body began and last moved, how much of it arrived, and how long the
    server itself held it up (reading paused): what its stall limit and deadline read."""

    def __init__(self, now: float) -> None:
        self.started = self.last_data = self.mark = now
        self.bytes = 0
        self.held_s = 0.0

    def received(self, size: int, now: float) -> None:
        self.bytes += size
        self.last_data = self.mark = now

    def paused(self, now: float) -> None:
        """Reading was paused by the server until ``now``: neither limit counts that time."""
        self.held_s += now - self.mark
        self.last_data = self.mark = now

    def deadline(self, deadline_s: float, min_rate: int) -> float:
        return self.started + deadline_s + self.bytes / min_rate + self.held_s


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """``uvicorn.Config`` keyword arguments for the limits above and the proxy trust."""
    protocol = type(
        "GuardedH11Protocol",
        (GuardedH11Protocol,),
        {
            "max_header_bytes": settings.http_max_header_bytes,
            "header_timeout_s": settings.http_header_timeout_s,
            "body_timeout_s": settings.http_body_timeout_s,
            "body_deadline_s": settings.http_body_deadline_s,
            "body_min_rate": settings.http_body_min_rate,
        },
    )
    trusted = ",".join(part.strip() for part in settings.trusted_proxies.split(",") if part.strip())
    return {
        "http": protocol,
        # h11's own cap (a 400) stays above ours so that ours (a 431) answers first
        "h11_max_incomplete_event_size": settings.http_max_header_bytes + 1024,
        "proxy_headers": bool(trusted),
        "forwarded_allow_ips": trusted or None,
    }


__all__ = ["GuardedH11Protocol", "uvicorn_options"]
