"""Failing authentication is cheap: an unknown token is remembered as unknown (no database
lookup on a repeat), and a token failing too often from one address, or an address trying
too many tokens, is answered 429 without one; a client that keeps failing never locks out
another client with a good token, even on the same address."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import psycopg
import pytest

from stash_pipeline import auth
from stash_serve.http import GUESS_FACTOR
from tests.mcp.asgi import BASE, served
from tests.mcp.test_transports import INITIALIZE, MCP_HEADERS

pytestmark = pytest.mark.anyio


class TableLock:
    """Makes every token lookup block while held (ACCESS EXCLUSIVE lock on api_tokens)."""

    def __init__(self, database_url: str) -> None:
        self.conn = psycopg.connect(database_url)
        self.timer: threading.Timer | None = None

    def __call__(self) -> None:
        self.conn.execute("LOCK TABLE api_tokens IN ACCESS EXCLUSIVE MODE")
        # let go on its own after a while: a lookup that does happen then fails the test's
        # time bound instead of hanging it (a worker thread cannot be cancelled)
        self.timer = threading.Timer(10, self.release)
        self.timer.daemon = True
        self.timer.start()

    def release(self) -> None:
        self.conn.rollback()


@pytest.fixture
def tokens_locked(database_url: str) -> Iterator[TableLock]:
    lock = TableLock(database_url)
    try:
        yield lock
    finally:
        if lock.timer is not None:
            lock.timer.cancel()
        lock.release()
        lock.conn.close()


def _client(app: Any, address: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app, client=(address, 5000)), base_url=BASE)


async def _post(http: httpx2.AsyncClient, secret: str) -> httpx2.Response:
    return await http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {secret}"})


async def test_a_known_bogus_token_is_refused_without_a_lookup(store: Any, tokens_locked: Any) -> None:
    async with served(store) as app, _client(app, "10.0.0.1") as http:
        assert (await _post(http, "stash_bogus_1")).status_code == 401  # looked up once
        tokens_locked()  # from now on a lookup would wait for the lock
        with anyio.fail_after(5):
            for _ in range(10):
                again = await _post(http, "stash_bogus_1")
                assert again.status_code == 401 and again.json()["error"] == "access_denied"


async def test_failed_auth_is_rate_limited_per_address(make_store: Any, tokens_locked: Any) -> None:
    limited = make_store(auth_failures_per_minute=5)
    good = auth.create_token(limited, ["/"], ["read"])["token"]
    async with served(limited) as app:
        async with _client(app, "10.0.0.2") as attacker:
            guesses = 5 * GUESS_FACTOR  # an address trying many tokens gets ten times the per-token limit
            for i in range(guesses):
                assert (await _post(attacker, f"stash_guess_{i}")).status_code == 401
            tokens_locked()
            with anyio.fail_after(5):  # refused before any lookup
                for i in range(guesses, guesses + 15):
                    refused = await _post(attacker, f"stash_guess_{i}")
                    assert refused.status_code == 429 and refused.headers["retry-after"] == "60"
                    assert refused.json()["error"] == "rate_limited"
        async with _client(app, "10.0.0.3") as other:  # another address is not affected
            with anyio.fail_after(5):
                # (the lookup is blocked: only the answer to a known-bad repeat is immediate)
                assert (await _post(other, "stash_guess_0")).status_code == 401
        tokens_locked.release()
        async with _client(app, "10.0.0.3") as other:  # a valid token from there is served
            with anyio.fail_after(30):
                assert (await _post(other, good)).status_code == 200


async def test_one_client_retrying_a_bad_token_does_not_lock_out_another(make_store: Any) -> None:
    limited = make_store(auth_failures_per_minute=5)
    good = auth.create_token(limited, ["/"], ["read"])["token"]
    revoked = auth.create_token(limited, ["/"], ["read"])
    auth.revoke_token(limited, revoked["id"])
    async with served(limited) as app, _client(app, "127.0.0.1") as http:
        for _ in range(5):
            assert (await _post(http, revoked["token"])).status_code == 401
        assert (await _post(http, revoked["token"])).status_code == 429  # that token, from there
        # every local agent shares 127.0.0.1: another one, with its own good token, is served
        assert (await _post(http, good)).status_code == 200
