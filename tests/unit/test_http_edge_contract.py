"""What ``stash_serve.http_edge`` takes from uvicorn's and h11's internals, checked alone.

``GuardedH11Protocol`` subclasses uvicorn's ``H11Protocol``, overrides four of its methods
and reads attributes uvicorn sets; uvicorn offers no public hook for a head-size cap
counting the head only or for head and body read timeouts. These tests fail on the uvicorn
or h11 release that renames what the subclass relies on, first by name, then by behaviour:
a real uvicorn server on loopback with a minimal ASGI app (no database, no MCP).
"""

from __future__ import annotations

import asyncio
import inspect
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h11
import pytest
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from stash_pipeline.config import load_settings
from stash_serve.http_edge import GuardedH11Protocol, uvicorn_options

#: the methods overridden, with the parameters uvicorn calls them with
OVERRIDDEN = {
    "connection_made": ["self", "transport"],
    "connection_lost": ["self", "exc"],
    "data_received": ["self", "data"],
    "on_response_complete": ["self"],
}
#: the attributes read, as uvicorn sets them once a connection is made
ATTRIBUTES = ("conn", "transport", "loop", "logger", "client")


def test_uvicorn_still_has_the_methods_and_h11_the_states_the_subclass_relies_on() -> None:
    for name, parameters in OVERRIDDEN.items():
        method = getattr(H11Protocol, name, None)
        assert method is not None, f"uvicorn {uvicorn.__version__}: H11Protocol.{name} is gone"
        assert list(inspect.signature(method).parameters) == parameters, f"H11Protocol.{name} changed"
    for state in ("IDLE", "SEND_BODY", "DONE"):
        assert isinstance(getattr(h11, state, None), type), f"h11 {h11.__version__}: no h11.{state}"
    assert {"their_state", "our_state"} <= set(dir(h11.Connection))


async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Read the whole body, answer its length; a disconnect ends the request unanswered."""
    if scope["type"] != "http":
        return
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(str(size)))]})
    await send({"type": "http.response.body", "body": str(size).encode()})


@pytest.fixture
def edge(tmp_path: Path) -> Iterator[tuple[int, uvicorn.Config]]:
    settings = load_settings(home=tmp_path, embedder="hash", http_max_header_bytes=4096,
                             http_header_timeout_s=0.3, http_body_timeout_s=0.3)
    config = uvicorn.Config(echo, lifespan="off", log_level="warning", **uvicorn_options(settings))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    try:
        yield sock.getsockname()[1], config
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def _exchange(port: int, *parts: bytes) -> bytes:
    """Send ``parts`` (a short pause between), then read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        for part in parts:
            sock.sendall(part)
            time.sleep(0.05)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def test_uvicorn_builds_the_guarded_protocol_and_its_limits_hold(edge: tuple[int, uvicorn.Config]) -> None:
    port, config = edge
    assert issubclass(config.http_protocol_class, GuardedH11Protocol)
    assert config.h11_max_incomplete_event_size == 4096 + 1024
    made = config.http_protocol_class(config=config, server_state=uvicorn.server.ServerState(), app_state={},
                                      _loop=asyncio.new_event_loop())
    missing = [name for name in ATTRIBUTES if not hasattr(made, name)]
    assert not missing, f"uvicorn {uvicorn.__version__}: H11Protocol no longer sets {missing}"
    made.loop.close()
    head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 8000\r\nConnection: close\r\n\r\n"
    # a body in the same write as its head is no head: only the head counts against the cap
    assert _exchange(port, head + b"b" * 8000).endswith(b"\r\n\r\n8000")
    assert _exchange(port, b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 8000 + b"\r\n\r\n").startswith(b"HTTP/1.1 431 ")
    assert _exchange(port, b"GET / HTTP/1.1\r\nHost: x\r\n").startswith(b"HTTP/1.1 408 ")  # never the blank line
    started = time.monotonic()
    assert _exchange(port, head + b"b" * 10) == b""  # the body stalls: cut off, nothing served
    assert time.monotonic() - started < 3
