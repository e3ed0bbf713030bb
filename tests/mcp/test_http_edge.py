"""The HTTP server's edge over real sockets on loopback: oversized heads get 431, slow heads
and stalled bodies are cut off, /healthz keeps answering meanwhile, forwarded-for headers
are believed only from STASH_TRUSTED_PROXIES, and a client hanging up logs one line.

Every loop here is bounded in count and time, and talks to 127.0.0.1 only. The tests of
one server configuration share one server process and one database (each test makes its
own tokens and namespaces); the forwarded-for test, which counts the server's auth
failures and log lines, has a server of its own.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest
from mcp_types import JSONRPCError, jsonrpc_message_adapter

from stash_pipeline import auth
from stash_pipeline.config import Settings, load_settings
from stash_pipeline.store import Store
from stash_serve.admission import RATE_LIMITED_CODE
from stash_serve.http import IN_FLIGHT_WAIT_S
from stash_serve.http_edge import uvicorn_options
from tests.conftest import _with_db
from tests.mcp.test_transports import INITIALIZE, MCP_HEADERS, _serve_http

EDGE_ENV = {
    "STASH_HTTP_MAX_HEADER_BYTES": "8192",
    "STASH_HTTP_HEADER_TIMEOUT_S": "1",
    "STASH_HTTP_BODY_TIMEOUT_S": "1",
    "STASH_HTTP_MAX_BODY_BYTES": "8000000",
    "STASH_AUTH_FAILURES_PER_MINUTE": "5",
    "STASH_LOG_LEVEL": "info",
}
SLOW_EDGE_ENV = {
    "STASH_HTTP_HEADER_TIMEOUT_S": "5",
    "STASH_HTTP_BODY_TIMEOUT_S": "1",
    "STASH_HTTP_BODY_DEADLINE_S": "4",
    "STASH_HTTP_MAX_REQUESTS_PER_TOKEN": "2",
    "STASH_LOG_LEVEL": "info",
}


@pytest.fixture(scope="module")
def edge_db(pg_admin_dsn: str, template_db: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Settings, Store]]:
    """One fresh database for the module's shared servers: (its settings, a store on it)."""
    name = f"stash_edge_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    try:
        home = tmp_path_factory.mktemp("edge_db") / "home"
        settings = load_settings(database_url=_with_db(pg_admin_dsn, name), home=home, embedder="hash", vector_dim=384)
        with contextlib.closing(Store.open(settings)) as store:
            yield settings, store
    finally:
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def _serve_with(settings: Settings, tmp_path: Path, env: dict[str, str]) -> Iterator[str]:
    """`_serve_http` with ``env`` in the environment it starts with (and only then)."""
    with contextlib.ExitStack() as stack:
        with pytest.MonkeyPatch.context() as monkeypatch:
            for key, value in env.items():
                monkeypatch.setenv(key, value)
            base = stack.enter_context(_serve_http(settings, tmp_path))
        yield base


@pytest.fixture(scope="module")
def edge_store(edge_db: tuple[Settings, Store]) -> Store:
    return edge_db[1]


@pytest.fixture(scope="module")
def edge(edge_db: tuple[Settings, Store], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _serve_with(edge_db[0], tmp_path_factory.mktemp("edge"), EDGE_ENV) as base:
        yield base


@pytest.fixture
def own_edge(settings: Any, store: Any, tmp_path: Path) -> Iterator[str]:
    """A server of the test's own, with ``edge``'s settings, on the test's database."""
    with _serve_with(settings, tmp_path, EDGE_ENV) as base:
        yield base


def _port(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


def _connect(base: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", _port(base)), timeout=10)
    sock.settimeout(10)
    return sock


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (bounded by the socket timeout)."""
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _healthy(base: str) -> None:
    health = httpx2.get(base + "/healthz", timeout=5)
    # 503 "database unreachable" is what a blocked event loop made of it
    assert health.status_code == 200 and health.json() == {"status": "ok"}, health.text


def test_heads_too_big_or_too_slow_and_stalled_bodies_are_refused_while_health_answers(edge: str) -> None:
    sockets = []
    for _ in range(2):
        sock = _connect(edge)
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
        try:
            for _ in range(64):  # up to 4 MiB; the server stops reading long before
                sock.sendall(b"a" * 65536)
        except (BrokenPipeError, ConnectionResetError):
            pass
        sockets.append(sock)
    _healthy(edge)
    for sock in sockets:
        answer = _answer(sock)
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
        assert b"STASH_HTTP_MAX_HEADER_BYTES" in answer
        sock.close()
    _healthy(edge)
    slow = []
    for _ in range(30):
        sock = _connect(edge)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the blank line
        slow.append(sock)
    stalled = _connect(edge)
    stalled.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 1000\r\n\r\n{\"jsonrpc\":")
    _healthy(edge)  # while they hang on
    for sock in slow:
        answer = _answer(sock)  # returns once the server closes; the socket timeout bounds it
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
        sock.close()
    assert not _answer(stalled).startswith(b"HTTP/1.1 2")  # closed, nothing was served
    stalled.close()
    _healthy(edge)


def test_forwarded_for_is_not_believed_and_a_hang_up_logs_one_line(own_edge: str, store: Any, tmp_path: Path) -> None:
    edge = own_edge
    good = auth.create_token(store, ["/"], ["read"])["token"]
    with httpx2.Client(base_url=edge, timeout=10) as http:
        statuses = [
            http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": "Bearer stash_bad_bad",
                                                        "X-Forwarded-For": f"203.0.113.{i}"}).status_code
            for i in range(8)
        ]
        # rotating the header did not make a fresh client: the limit (5) holds for the peer
        assert statuses == [401] * 5 + [429] * 3, statuses
        # nor can a local client aim the limit at another address's good token
        served = http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {good}"})
        assert served.status_code == 200, served.text
    # a client hanging up mid-request is routine: one line in the log, no traceback
    body = json.dumps(INITIALIZE).encode()
    for _ in range(3):
        sock = _connect(edge)
        head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {good}\r\n"
                f"Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        sock.sendall(head + body[: len(body) // 2])
        sock.close()  # gone mid-body
    _healthy(edge)
    line = "a client disconnected before its request was read"
    deadline = time.monotonic() + 10
    while True:  # the server notices each hang-up on its own schedule
        log = "".join(p.read_text() for p in tmp_path.glob("http-*.log"))
        if log.count(line) >= 3 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert "Traceback" not in log, log[-3000:]
    assert log.count(line) == 3, log[-3000:]


def test_proxy_trust_comes_from_the_setting_only(tmp_path: Path) -> None:
    default = uvicorn_options(load_settings(home=tmp_path, embedder="hash"))
    assert default["proxy_headers"] is False  # uvicorn's own default believes 127.0.0.1
    behind = uvicorn_options(load_settings(home=tmp_path, embedder="hash", trusted_proxies="10.0.0.5, 10.1.0.0/16"))
    assert behind["proxy_headers"] is True and behind["forwarded_allow_ips"] == "10.0.0.5,10.1.0.0/16"


def _tool_call(name: str, arguments: dict[str, Any], call_id: int = 2) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": call_id, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments}}).encode()


def _post(token: str, body: bytes, *, extra_headers: str = "") -> bytes:
    return (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            f"Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
            f"{extra_headers}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


def test_the_head_cap_counts_the_head_only_however_the_bytes_arrive(edge: str, edge_store: Store) -> None:
    """A 94 KB remember_batch sent with its head in one write (as
    http.client always does) was answered 431 by the 8 KiB head cap: the body's bytes were
    counted as head bytes. Now the head alone is counted, in one write or split anywhere,
    even inside the blank line that ends the head; a head over the cap is still 431."""
    from stash_pipeline.memory import namespaces

    namespaces.create(edge_store, "/head")
    token = auth.create_token(edge_store, ["/head"], ["read", "write"])["token"]
    items = [{"content": f"turn {i}: " + "w" * 900} for i in range(100)]
    body = _tool_call("remember_batch", {"namespace": "/head", "items": items})
    request = _post(token, body)
    assert len(body) > 90_000 and request.index(b"\r\n\r\n") < 8192
    blank = request.index(b"\r\n\r\n")
    splits = [
        [request],  # one write
        [request[: blank + 3], request[blank + 3:]],  # the blank line split: "\r\n\r" | "\n..."
        [request[: blank + 4 + 10], request[blank + 4 + 10:]],  # head and a little body, then the rest
    ]
    for parts in splits:
        sock = _connect(edge)
        for part in parts:
            sock.sendall(part)
            time.sleep(0.05)
        answer = _answer(sock)
        sock.close()
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]
        result = json.loads(answer.split(b"\r\n\r\n", 1)[1])["result"]
        assert not result.get("isError"), result
    # a head over the cap, sent with a body in the same write, is still refused
    sock = _connect(edge)
    sock.sendall(_post(token, body, extra_headers=f"X-Pad: {'p' * 9000}\r\n"))
    answer = _answer(sock)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:300]
    # nor does a blank line first hide a big head sent after it in the same write
    sock = _connect(edge)
    try:
        sock.sendall(b"\r\n\r\nPOST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"p" * 200_000)
    except (BrokenPipeError, ConnectionResetError):
        pass
    answer = _answer(sock)
    sock.close()
    assert answer.startswith((b"HTTP/1.1 431 ", b"HTTP/1.1 400 ")), answer[:300]
    _healthy(edge)


def test_the_body_cap_is_a_setting_that_fits_a_batch_and_answers_in_json(edge: str, edge_store: Store) -> None:
    """A remember_batch within every documented limit (600 x 9 KB) got
    the SDK's undocumented 4 MiB cap as a plain-text "413 Request body too large". The cap
    is STASH_HTTP_MAX_BODY_BYTES (8 MB in this fixture), a declared or a streamed body over
    it gets 413 with Stash's JSON error shape, and the default fits a full batch."""
    from stash_pipeline.memory import namespaces

    namespaces.create(edge_store, "/body")
    token = auth.create_token(edge_store, ["/body"], ["read", "write"])["token"]
    items = [{"content": f"turn {i}: " + "w" * 9_000} for i in range(600)]
    body = _tool_call("remember_batch", {"namespace": "/body", "items": items})
    assert 4 * 1_048_576 < len(body) < 8_000_000

    def stored() -> int:
        with edge_store.db.connection() as conn:
            return int(conn.execute("SELECT count(*) AS n FROM episodes").fetchone()["n"])

    before = stored()  # the module's other tests share the database
    sock = _connect(edge)
    sock.settimeout(60)
    sock.sendall(_post(token, body))
    answer = _answer(sock)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]
    result = json.loads(answer.split(b"\r\n\r\n", 1)[1])["result"]
    assert not result.get("isError"), str(result)[:300]
    assert stored() == before + 600

    def refused(answer: bytes) -> dict[str, Any]:
        head, _, payload = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 413 "), answer[:300]
        assert b"content-type: application/json" in head.lower()
        return json.loads(payload)

    # declared too large: refused before a byte of the body is read
    sock = _connect(edge)
    sock.sendall(_post(token, b"")[: -len(b"Content-Length: 0\r\nConnection: close\r\n\r\n")]
                 + b"Content-Length: 9000000\r\nConnection: close\r\n\r\n{")
    error = refused(_answer(sock))
    sock.close()
    assert error["error"] == "request_too_large" and "STASH_HTTP_MAX_BODY_BYTES" in error["message"], error
    # streamed (chunked, no length): refused once it passes the cap
    sock = _connect(edge)
    sock.sendall((f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                  "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
                  "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n").encode())
    chunk = b"x" * 1_000_000
    try:
        for _ in range(9):
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    except (BrokenPipeError, ConnectionResetError):
        pass
    error = refused(_answer(sock))
    sock.close()
    assert error["error"] == "request_too_large", error
    _healthy(edge)


def test_the_default_body_cap_fits_a_full_batch_at_the_item_limits(tmp_path: Path) -> None:
    """The documented limits and the transport's agree: remember_batch's BATCH_MAX items at
    the default content and metadata limits, as plain JSON, fit the default body cap."""
    from stash_pipeline.memory.validate import BATCH_MAX

    settings = load_settings(home=tmp_path, embedder="hash")
    item = {"content": "c" * settings.max_content_bytes, "metadata": {"m": "m" * (settings.max_metadata_bytes - 8)}}
    assert len(json.dumps(item["metadata"], separators=(",", ":"))) <= settings.max_metadata_bytes
    batch = _tool_call("remember_batch", {"namespace": "/p", "items": [item] * BATCH_MAX})
    assert len(batch) <= settings.http_max_body_bytes


@pytest.fixture(scope="module")
def slow_edge(edge_db: tuple[Settings, Store], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _serve_with(edge_db[0], tmp_path_factory.mktemp("slow_edge"), SLOW_EDGE_ENV) as base:
        yield base


def _slow_request(base: str, token: str) -> socket.socket:
    """A request whose head is sent and whose body (1000 bytes declared) has only begun."""
    sock = _connect(base)
    body = _tool_call("recall", {"query": "x"})
    head = _post(token, body)[: -len(body)].replace(f"Content-Length: {len(body)}".encode(), b"Content-Length: 1000")
    sock.sendall(head + b"{")
    return sock


def _trickle(sock: socket.socket, every_s: float, until_s: float) -> tuple[bytes, float]:
    """Send one more byte every ``every_s`` (under the stall limit) until the server answers
    and closes, or ``until_s`` passes; (the answer, seconds it took)."""
    started = time.monotonic()
    sock.settimeout(every_s)
    chunks: list[bytes] = []
    while time.monotonic() - started < until_s:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            try:
                sock.sendall(b" ")
            except (BrokenPipeError, ConnectionResetError):
                break
            continue
        except ConnectionResetError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks), time.monotonic() - started


def test_a_trickled_body_is_cut_off_at_its_deadline(slow_edge: str, edge_store: Store) -> None:
    """A body trickled a byte every 1.5 s was read for as long as it went on (25 s for a
    small one, with a 5 s stall limit): every byte restarted the stall timer. Now a body
    has STASH_HTTP_BODY_DEADLINE_S (4 s here) plus 1 s per STASH_HTTP_BODY_MIN_RATE bytes:
    a byte every 0.4 s (under the 1 s stall limit) is answered 408 at about 4 s."""
    token = auth.create_token(edge_store, ["/"], ["read"])["token"]
    sock = _slow_request(slow_edge, token)
    answer, took = _trickle(sock, 0.4, until_s=20)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 408 "), (answer[:300], took)
    assert b"STASH_HTTP_BODY_DEADLINE_S" in answer
    assert 3.5 <= took <= 4 + 3, took  # the deadline, with room for a loaded machine
    _healthy(slow_edge)
    # a body sent at once is served as ever
    with httpx2.Client(base_url=slow_edge, timeout=10) as http:
        served = http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"})
        assert served.status_code == 200, served.text


def test_one_token_has_a_bounded_number_of_requests_in_flight(slow_edge: str, edge_store: Store) -> None:
    """STASH_HTTP_MAX_REQUESTS_PER_TOKEN (2 here): with two slow requests of a token in
    flight, a third of that token waits briefly (IN_FLIGHT_WAIT_S) for a place, then is
    answered 429 with Retry-After: 1 and a JSON-RPC error (``rate_limited``), while another
    token is served at once; once the slow ones end, the token is served again."""
    token = auth.create_token(edge_store, ["/"], ["read"])["token"]
    other = auth.create_token(edge_store, ["/"], ["read"])["token"]
    slow = [_slow_request(slow_edge, token) for _ in range(2)]
    answers: list[bytes] = []
    # each kept under the stall limit, a byte every 0.4 s, until its deadline cuts it off
    trickling = [threading.Thread(target=lambda s=sock: answers.append(_trickle(s, 0.4, until_s=15)[0]))
                 for sock in slow]
    for thread in trickling:
        thread.start()
    statuses = []
    with httpx2.Client(base_url=slow_edge, timeout=10) as http:
        def post(secret: str) -> httpx2.Response:
            return http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {secret}"})

        deadline = time.monotonic() + 1.5  # the slow ones (cut at 4 s) are admitted in milliseconds
        while time.monotonic() < deadline:
            asked = time.monotonic()
            third = post(token)
            waited = time.monotonic() - asked
            statuses.append(third.status_code)
            if third.status_code == 429:
                break
            time.sleep(0.05)
        assert statuses[-1] == 429, statuses
        assert IN_FLIGHT_WAIT_S - 0.1 <= waited < 4, waited  # waited for a place, in vain
        assert third.headers["retry-after"] == "1", third.headers
        # a JSON-RPC error, as the MCP client parses it, with what an agent acts on
        refused = jsonrpc_message_adapter.validate_json(third.content, by_name=False)
        assert isinstance(refused, JSONRPCError) and refused.id is None, third.text
        assert refused.error.code == RATE_LIMITED_CODE and refused.error.data is not None, third.text
        assert refused.error.data["error"] == "rate_limited" and refused.error.data["retry_after_s"] == 1, third.text
        assert "STASH_HTTP_MAX_REQUESTS_PER_TOKEN" in refused.error.message
        assert post(other).status_code == 200  # another token is not held up
        for thread in trickling:  # the slow ones end (cut off at their deadline)
            thread.join(timeout=20)
        for sock in slow:
            sock.close()
        assert len(answers) == 2 and all(a.startswith(b"HTTP/1.1 408 ") for a in answers), [a[:100] for a in answers]
        deadline = time.monotonic() + 5
        while (again := post(token)).status_code == 429 and time.monotonic() < deadline:
            time.sleep(0.1)  # the server notices the hang-ups on its own schedule
        assert again.status_code == 200, again.text
    _healthy(slow_edge)


def test_the_body_deadline_grows_with_the_bytes_and_the_servers_own_pauses() -> None:
    """mod_reqtimeout's rule: the deadline moves 1 s later per STASH_HTTP_BODY_MIN_RATE bytes,
    and time the server held reading (uvicorn's flow control) counts for nothing; what the
    clock reads of uvicorn and h11 is still there."""
    import h11
    from uvicorn.protocols.http.flow_control import FlowControl

    from stash_serve.http_edge import BodyClock

    clock = BodyClock(100.0)
    assert clock.deadline(10.0, 1000) == 110.0
    clock.received(5000, 103.0)
    assert clock.deadline(10.0, 1000) == 115.0 and clock.last_data == 103.0
    clock.paused(107.0)  # the server did not read from 103 to 107
    assert clock.deadline(10.0, 1000) == 119.0 and clock.last_data == 107.0
    assert hasattr(FlowControl(None), "read_paused")  # type: ignore[arg-type]
    assert isinstance(h11.SEND_RESPONSE, type)
