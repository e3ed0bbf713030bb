"""Bearer-token checks from the HTTP server's event loop, on a small pool of their own.

Every HTTP request's token is looked up in PostgreSQL, so that a revoked token is refused
from the very next request. Through the store's pool that lookup cost a hop to a worker
thread and back, a liveness probe of the pooled connection and a transaction of three
statements, more than the rest of the MCP layer together on a loaded machine. Here it is
one statement in autocommit (find the token, record its use at most once a minute) on an
asynchronous connection: one round trip, and the event loop serves other requests while
it waits.

Remembering valid tokens between requests would save that round trip too, but not keep
the promise: a revocation heard through LISTEN/NOTIFY still reached the server after the
revoking client's next request now and then on a loaded machine. What is done instead
for a token this process has seen valid (``SeenTokens``) on a streamable-HTTP request:
the check runs *while* the SDK parses and dispatches the request (``Verification``; from
the moment admission gives it a place, so a request answered busy costs no lookup), and
nothing the request does takes effect before it passes. A tool's work waits for it
(``stash_serve.mcp.calls.ToolCalls.run``) and so does the answer's first byte; a failed
check turns the answer into the 401 (or 503) it would have been.

A check may be given the longest it may wait for one of the pool's connections (``wait_s``,
below the store's STASH_DB_TIMEOUT_S): the HTTP server gives a request not yet admitted
what is left of its answer limit. Past it, while other checks hold the connections, the
check raises ``CheckTooLate`` without having begun (a lookup once begun is never cut); with
none held, the connections cannot be made and it is DatabaseUnavailable, as ever.

The pool runs while the HTTP app's lifespan does (``running``); outside it (an app driven
without its lifespan, as in tests) the check runs ``authenticate`` in a worker thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import anyio.to_thread
import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from stash_pipeline import auth, errors
from stash_pipeline.auth import TokenInfo
from stash_pipeline.db.gateway import translate_errors
from stash_pipeline.db.sql import query
from stash_pipeline.store import Store

#: connections for token checks: each holds one for a single round trip
POOL_SIZE = 4


async def _configure(conn: psycopg.AsyncConnection) -> None:
    await conn.execute(query("session_settings"))  # the settings of every Stash connection


class CheckTooLate(Exception):
    """No connection came free for the check within the wait it was given; nothing was looked up."""


class TokenCheck:
    """``check(secret)``: the TokenInfo, AccessDenied, or DatabaseUnavailable (or
    CheckTooLate, given ``wait_s``)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._pool: AsyncConnectionPool | None = None
        self._lent = 0  # connections held by checks now (the event loop's alone)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Check on the event loop while inside (the HTTP app's lifespan)."""
        pool = AsyncConnectionPool(
            self.store.db.dsn,
            min_size=1,
            max_size=POOL_SIZE,
            timeout=self.store.settings.db_timeout_s,
            kwargs={"autocommit": True, "row_factory": dict_row},
            configure=_configure,
            open=False,
            name="stash-auth",
        )
        await pool.open(wait=False)
        self._pool = pool
        try:
            yield
        finally:
            self._pool = None
            await pool.close()

    async def check(self, secret: str | None, wait_s: float | None = None) -> TokenInfo:
        """The token of ``secret``; ``wait_s``, the longest wait for a connection when it is
        shorter than STASH_DB_TIMEOUT_S (``CheckTooLate`` past it)."""
        pool = self._pool
        if pool is None:
            return await anyio.to_thread.run_sync(auth.authenticate, self.store, secret)
        timeout = self.store.settings.db_timeout_s
        late = wait_s is not None and wait_s < timeout
        if late:
            assert wait_s is not None
            if wait_s <= 0:
                raise CheckTooLate()
            timeout = wait_s
        deadline = time.monotonic() + timeout
        with translate_errors():
            try:
                return await self._lookup(pool, secret, timeout)
            except PoolTimeout:
                if late and self._lent:
                    raise CheckTooLate() from None
                raise  # no connection to be had: the database is unavailable
            except psycopg.OperationalError:
                # After a database restart idle connections are dead sockets: sweep them
                # all at once and try again on a fresh one (no probe before every check).
                await pool.check()
                return await self._lookup(pool, secret, deadline - time.monotonic())

    async def _lookup(self, pool: AsyncConnectionPool, secret: str | None, timeout: float) -> TokenInfo:
        async with pool.connection(timeout=timeout) as conn:
            self._lent += 1
            try:
                return await auth.authenticate_on(conn, secret)
            finally:
                self._lent -= 1


class SeenTokens:
    """Tokens this process found valid, by secret hash (bounded): never trusted alone, only
    a reason to run their next check alongside the request instead of before it."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        self._tokens: OrderedDict[str, TokenInfo] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(secret: str) -> str:
        return hashlib.sha256(secret.encode("utf-8", errors="surrogatepass")).hexdigest()

    def get(self, secret: str) -> TokenInfo | None:
        with self._lock:
            return self._tokens.get(self._key(secret))

    def add(self, secret: str, token: TokenInfo) -> None:
        key = self._key(secret)
        with self._lock:
            self._tokens[key] = token
            self._tokens.move_to_end(key)
            while len(self._tokens) > self.max_entries:
                self._tokens.popitem(last=False)

    def forget(self, secret: str) -> None:
        with self._lock:
            self._tokens.pop(self._key(secret), None)


class Verification:
    """One request's token check, running alongside the request; ``passed()`` waits for it.

    ``run`` looks the token up once ``start()`` is called (the request was admitted) or
    something waits for the result: a request refused before either costs no lookup."""

    def __init__(self, expected: TokenInfo) -> None:
        self.expected = expected
        self.error: errors.StashError | None = None
        self._go = anyio.Event()
        self._done = anyio.Event()

    def start(self) -> None:
        self._go.set()

    async def run(self, check: Callable[[str], Awaitable[TokenInfo]], secret: str) -> None:
        try:
            await self._go.wait()
            token = await check(secret)
            if token != self.expected:  # tokens do not change; if one did, judge it afresh
                self.error = errors.AccessDenied("access denied: the token changed; retry")
        except errors.StashError as exc:
            self.error = exc
        finally:
            self._done.set()

    async def passed(self) -> bool:
        self._go.set()
        await self._done.wait()
        return self.error is None


__all__ = ["CheckTooLate", "SeenTokens", "TokenCheck", "Verification"]
