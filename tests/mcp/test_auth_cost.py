"""Failing authentication is cheap: an unknown token is remembered as unknown (no database
lookup on a repeat), a token failing too often from one address is answered 429 without
one, and an address trying too many tokens has its lookups paced (one at a time, a bounded
number a second) and its unknown tokens answered 429; a client that keeps failing never
locks out another client with a good token, even on the same address, even one the server
has not seen yet."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import psycopg
import pytest
from mcp_types import JSONRPCError, jsonrpc_message_adapter

from stash_pipeline import auth
from stash_serve.admission import RATE_LIMITED_CODE
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


def _assert_rate_limited(refused: httpx2.Response) -> None:
    """A 429 on /mcp is a JSON-RPC error, read as the MCP SDK reads one, saying when to retry."""
    message = jsonrpc_message_adapter.validate_json(refused.content, by_name=False)
    assert isinstance(message, JSONRPCError) and message.id is None, refused.text
    assert message.error.code == RATE_LIMITED_CODE and message.error.data is not None, refused.text
    assert message.error.data["error"] == "rate_limited" and message.error.data["retry_after_s"] == 60, refused.text
    assert "retry in a minute" in message.error.message


async def test_a_known_bogus_token_is_refused_without_a_lookup(store: Any, tokens_locked: Any) -> None:
    async with served(store) as app, _client(app, "10.0.0.1") as http:
        assert (await _post(http, "stash_bogus_1")).status_code == 401  # looked up once
        tokens_locked()  # from now on a lookup would wait for the lock
        with anyio.fail_after(5):
            for _ in range(10):
                again = await _post(http, "stash_bogus_1")
                assert again.status_code == 401 and again.json()["error"] == "access_denied"


class Lookups:
    """Counts an app's token lookups, and the most guesses (``stash_…`` secrets that are
    no token) looked up at once."""

    def __init__(self, app: Any) -> None:
        self.count = self.running = self.most = 0
        inner = app.tokens.check

        async def check(secret: str | None, wait_s: float | None = None) -> Any:
            self.count += 1
            guess = (secret or "").startswith(("stash_guess_", "stash_flood_", "stash_more_"))
            self.running += guess
            self.most = max(self.most, self.running)
            try:
                return await inner(secret, wait_s)
            finally:
                self.running -= guess

        app.tokens.check = check


async def test_failed_auth_is_rate_limited_per_address(make_store: Any, tokens_locked: Any) -> None:
    """An address past its failure budget has its guesses looked up in turn, at the paced
    rate, and answered 429; another address is not affected, nor is a valid token."""
    limited = make_store(auth_failures_per_minute=5, auth_guess_lookups_per_second=20)
    good = auth.create_token(limited, ["/"], ["read"])["token"]
    async with served(limited) as app:
        lookups = Lookups(app)
        async with _client(app, "10.0.0.2") as attacker:
            guesses = 5 * GUESS_FACTOR  # an address trying many tokens gets ten times the per-token limit
            for i in range(guesses):
                assert (await _post(attacker, f"stash_guess_{i}")).status_code == 401
            assert lookups.count == guesses
            started = anyio.current_time()
            for i in range(guesses, guesses + 10):
                refused = await _post(attacker, f"stash_guess_{i}")
                assert refused.status_code == 429 and refused.headers["retry-after"] == "60"
                _assert_rate_limited(refused)
            # looked up, one at a time and no faster than 20 a second
            assert lookups.count == guesses + 10 and lookups.most == 1
            assert anyio.current_time() - started >= 9 / 20
        tokens_locked()
        async with _client(app, "10.0.0.3") as other:  # another address is not affected
            with anyio.fail_after(5):
                # (the lookup is blocked: only the answer to a known-bad repeat is immediate)
                assert (await _post(other, "stash_guess_0")).status_code == 401
        tokens_locked.release()
        async with _client(app, "10.0.0.2") as attacker:  # a valid token from the guessing address is served
            with anyio.fail_after(30):
                assert (await _post(attacker, good)).status_code == 200


async def test_guessing_from_a_shared_address_never_locks_out_a_valid_token(make_store: Any) -> None:
    """300 guesses from 127.0.0.1 in a burst answered 429 for a minute to every token the
    server had not seen yet, valid ones too: every local agent shares that address, and
    every token is unseen after a restart. A valid token is now served at once from there,
    again and again, whatever was guessed before."""
    limited = make_store(auth_failures_per_minute=5, auth_guess_lookups_per_second=200)
    async with served(limited) as app, _client(app, "127.0.0.1") as http:
        lookups = Lookups(app)
        statuses = [(await _post(http, f"stash_guess_{i}")).status_code for i in range(300)]
        assert statuses == [401] * (5 * GUESS_FACTOR) + [429] * (300 - 5 * GUESS_FACTOR)
        for round_ in range(3):
            fresh = auth.create_token(limited, ["/"], ["read"])["token"]  # never seen by this server
            with anyio.fail_after(2):
                served_ok = await _post(http, fresh)
            assert served_ok.status_code == 200, (round_, served_ok.text)
            with anyio.fail_after(2):
                assert (await _post(http, fresh)).status_code == 200
            assert (await _post(http, f"stash_more_{round_}")).status_code == 429  # guessing goes on
        # each guess looked up once (paced), a valid token on each of its requests; a
        # repeated guess is answered from the negative cache
        assert lookups.count == 300 + 3 + 3 * 2
        assert (await _post(http, "stash_guess_7")).status_code == 401 and lookups.count == 309


async def test_database_lookups_stay_bounded_under_a_guessing_flood(make_store: Any) -> None:
    """A flood of concurrent guesses from one address past its budget: its lookups run one
    at a time at the paced rate, and a valid token is served meanwhile from elsewhere and
    afterwards from that address."""
    rate = 20
    limited = make_store(auth_failures_per_minute=5, auth_guess_lookups_per_second=rate)
    other_token = auth.create_token(limited, ["/"], ["read"])["token"]
    async with served(limited) as app, _client(app, "127.0.0.1") as http:
        lookups = Lookups(app)
        for i in range(5 * GUESS_FACTOR):  # the budget
            assert (await _post(http, f"stash_guess_{i}")).status_code == 401
        before, flood, answers = lookups.count, 80, []
        started = anyio.current_time()

        async def guess(i: int) -> None:
            answers.append((await _post(http, f"stash_flood_{i}")).status_code)

        async with anyio.create_task_group() as tasks:
            for i in range(flood):
                tasks.start_soon(guess, i)
            await anyio.sleep(0.5)
            async with _client(app, "10.0.0.9") as elsewhere:
                with anyio.fail_after(2):
                    assert (await _post(elsewhere, other_token)).status_code == 200  # not held up
            in_flood = lookups.count - before - 1
            assert in_flood <= 1 + rate * (anyio.current_time() - started), in_flood
        elapsed = anyio.current_time() - started
        assert answers == [429] * flood
        # each guess looked up once (and the other address's token once), never two at a time
        assert lookups.count - before == flood + 1 and lookups.most == 1
        assert elapsed >= (flood - 1) / rate * 0.9, elapsed  # paced: no faster than the rate
        fresh = auth.create_token(limited, ["/"], ["read"])["token"]
        with anyio.fail_after(2):
            assert (await _post(http, fresh)).status_code == 200


async def test_one_client_retrying_a_bad_token_does_not_lock_out_another(make_store: Any) -> None:
    limited = make_store(auth_failures_per_minute=5)
    good = auth.create_token(limited, ["/"], ["read"])["token"]
    revoked = auth.create_token(limited, ["/"], ["read"])
    auth.revoke_token(limited, revoked["id"])
    async with served(limited) as app, _client(app, "127.0.0.1") as http:
        for _ in range(5):
            assert (await _post(http, revoked["token"])).status_code == 401
        refused = await _post(http, revoked["token"])  # that token, from there
        assert refused.status_code == 429 and refused.headers["retry-after"] == "60"
        _assert_rate_limited(refused)
        # every local agent shares 127.0.0.1: another one, with its own good token, is served
        assert (await _post(http, good)).status_code == 200
