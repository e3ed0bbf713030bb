"""The one database gateway: psycopg 3, dict rows, a pool, named queries.

Every surface (CLI, MCP server, Dagster resource) gets its ``Database`` from
``Store.open(settings)`` and talks SQL only through it::

    db = Store.open(settings).db
    row = db.one("get_namespace_by_slug", slug="/projects/x")
    with db.transaction() as tx:
        tx.execute("insert_episode", ...)

Queries are named blocks in ``db/queries/*.sql`` (see ``stash_pipeline.db.sql``); values
are always bound as parameters, never formatted into SQL. Driver errors are translated
into the error tree of ``stash_pipeline.errors`` here, in one place.
"""

from __future__ import annotations

import contextlib
import logging
import math
import select
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
import psycopg.errors
from pgvector.psycopg import register_vector
from psycopg.adapt import Dumper
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from stash_pipeline import errors
from stash_pipeline.db.query_cache import cache_named_queries
from stash_pipeline.db.sql import query

if TYPE_CHECKING:
    from stash_pipeline.config import Settings

log = logging.getLogger(__name__)

#: a row as the gateway returns it (psycopg's ``dict_row``): column name -> value
Row = dict[str, Any]

Statements = Sequence[tuple[str, Mapping[str, Any]]]

#: what each statement prepared on a new connection may take (``prepare_on_connect``):
#: a request waiting for that connection waits at most this long per statement for it
PREPARE_BUDGET_MS = 2000

cache_named_queries()


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    """Turn psycopg errors into Stash errors a caller can act on."""
    try:
        yield
    except errors.StashError:
        raise
    except psycopg.errors.UniqueViolation as exc:
        raise errors.Conflict(_diag(exc, "that would duplicate an existing record")) from exc
    except psycopg.errors.ForeignKeyViolation as exc:
        raise errors.RecordNotFound(_diag(exc, "a referenced record does not exist")) from exc
    except psycopg.errors.CheckViolation as exc:
        raise errors.InvalidInput(_diag(exc, "a value is out of range")) from exc
    except psycopg.errors.NotNullViolation as exc:
        raise errors.InvalidInput(_diag(exc, "a required value is missing")) from exc
    except (psycopg.errors.InvalidTextRepresentation, psycopg.errors.NumericValueOutOfRange) as exc:
        raise errors.InvalidInput(_diag(exc, "a value has the wrong form")) from exc
    except psycopg.errors.UntranslatableCharacter as exc:
        raise errors.InvalidInput("text contains characters PostgreSQL cannot store (NUL?)") from exc
    except psycopg.errors.DataError as exc:
        raise errors.InvalidInput(_diag(exc, "invalid value")) from exc
    except psycopg.errors.LockNotAvailable as exc:
        raise errors.StageBusy() from exc
    except PoolTimeout as exc:
        raise errors.DatabaseUnavailable("database unavailable: no connection within the timeout") from exc
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        raise errors.DatabaseUnavailable(f"database unavailable: {_first_line(exc)}") from exc


def _diag(exc: psycopg.Error, fallback: str) -> str:
    detail = exc.diag.message_detail or exc.diag.message_primary
    return f"{fallback} ({detail})" if detail else fallback


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class NullVector:
    """A NULL parameter typed as ``vector`` (``NULL_VECTOR``).

    psycopg sends None untyped and a vector typed, and keys its prepared statements by
    the parameters' types: a statement run with and without a vector would be prepared,
    and planned by the server, twice per connection. Sent as ``NULL_VECTOR``, "no vector"
    has the vector's type and the two share one prepared statement.
    """

    __slots__ = ()


NULL_VECTOR = NullVector()


class _NullVectorDumper(Dumper):
    def dump(self, obj: NullVector) -> None:
        return None  # NULL, with the dumper's oid (the database's vector type)


def _configure(conn: psycopg.Connection) -> None:
    conn.execute(query("session_settings"))
    # The vector type only exists after the first migration; before that, skip.
    try:
        register_vector(conn)
    except psycopg.ProgrammingError:
        pass
    else:
        oid = conn.adapters.types["vector"].oid
        conn.adapters.register_dumper(NullVector, type("NullVectorDumper", (_NullVectorDumper,), {"oid": oid}))
    conn.commit()


def _quiet(conn: psycopg.Connection[Any]) -> bool:
    """Whether an idle connection is open with nothing from the server waiting on its socket.

    A server closing a connection (restart, ``pg_terminate_backend``, idle timeouts, a
    killed backend) sends its reason and closes the socket, so the socket of a dead
    connection is readable; a live idle connection's is not. Checking that costs no round
    trip. Anything readable (also a notice or a TLS record) sends the connection to the
    probe, which tells dead from alive.
    """
    if conn.closed:
        return False
    if not hasattr(select, "poll"):  # (Windows) select() takes any socket there
        return not select.select([conn.fileno()], [], [conn.fileno()], 0)[0]
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
    return not poller.poll(0)


def _pipeline(conn: psycopg.Connection[dict[str, Any]], statements: Statements,
              prepare: bool | None) -> list[list[dict[str, Any]]]:
    """``statements`` in one pipeline on ``conn`` (autocommit: one implicit transaction);
    each one's rows. ``prepare``: psycopg's (None: prepared after a few runs)."""
    conn.autocommit = True
    try:
        cursors = [conn.cursor() for _ in statements]
        with conn.pipeline():
            for cur, (name, params) in zip(cursors, statements, strict=True):
                cur.execute(query(name), params or None, prepare=prepare)
        # leaving the pipeline was the one wait: every result is in
        return [cur.fetchall() if cur.description is not None else [] for cur in cursors]
    finally:
        # a broken connection cannot switch back; the pool discards it on return
        with contextlib.suppress(psycopg.Error):
            conn.autocommit = False


class Session:
    """Named-query helpers bound to one connection (and its open transaction)."""

    def __init__(self, conn: psycopg.Connection[dict[str, Any]]) -> None:
        self.conn = conn

    def one(self, name: str, /, **params: Any) -> Row | None:
        with translate_errors(), self.conn.cursor() as cur:
            cur.execute(query(name), params or None)
            return cur.fetchone()

    def all(self, name: str, /, **params: Any) -> list[Row]:
        with translate_errors(), self.conn.cursor() as cur:
            cur.execute(query(name), params or None)
            return cur.fetchall()

    def scalar(self, name: str, /, **params: Any) -> Any:
        row = self.one(name, **params)
        return None if row is None else next(iter(row.values()))

    def execute(self, name: str, /, **params: Any) -> int:
        with translate_errors(), self.conn.cursor() as cur:
            cur.execute(query(name), params or None)
            return cur.rowcount

    def executemany(self, name: str, /, rows: Sequence[Mapping[str, Any]]) -> None:
        if not rows:
            return
        with translate_errors(), self.conn.cursor() as cur:
            cur.executemany(query(name), rows)

    def returning_many(self, name: str, /, rows: Sequence[Mapping[str, Any]]) -> list[Row]:
        """executemany that collects each statement's RETURNING row, in input order."""
        out: list[dict[str, Any]] = []
        if not rows:
            return out
        with translate_errors(), self.conn.cursor() as cur:
            cur.executemany(query(name), rows, returning=True)
            while True:
                out.extend(cur.fetchall())
                if not cur.nextset():
                    break
        return out


class Database:
    """A pool of connections plus named-query helpers; one per process."""

    def __init__(self, dsn: str, *, min_size: int = 1, max_size: int = 10, timeout: float = 15.0) -> None:
        self.dsn = dsn
        self._pool = ConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            kwargs={"row_factory": dict_row, "autocommit": False},
            configure=self._configure,
            open=False,
            name="stash",
        )
        self._opened = False
        self._lock = threading.Lock()
        self._on_connect: list[Statements] = []

    @classmethod
    def from_settings(
        cls, settings: Settings, *, max_size: int | None = None, timeout: float | None = None
    ) -> Database:
        """The gateway for ``settings`` (surfaces call ``Store.open``, which calls this).

        The DSN comes from ``stash_pipeline.db.dsn``. An embedded server that is the
        database and is not running is an error (``DatabaseUnavailable``, transient: a
        Dagster step retries it); only entry points start it (``dsn.py``).
        """
        from stash_pipeline.db.dsn import database_dsn, require_running

        require_running(settings)
        return cls(
            database_dsn(settings),
            max_size=max_size or settings.db_pool_max,
            timeout=settings.db_timeout_s if timeout is None else timeout,
        )

    def _ensure_open(self) -> None:
        if self._opened:
            return
        with self._lock:
            if not self._opened:
                with translate_errors():
                    self._pool.open(wait=False)
                self._opened = True

    @contextlib.contextmanager
    def _checked_connection(self) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        """A pooled connection known to be alive.

        After a database restart every idle connection in the pool is a dead socket. The
        pool's own ``check=`` option would discard them one by one with a growing sleep
        between each (1 s, 2 s, 4 s …), so callers time out although the server is back.
        Instead: probe the connection (one empty round trip); if it is dead, sweep all
        idle connections at once (``pool.check()``) and take a fresh one. Only a
        connection the server wrote to while it sat idle is probed (``_quiet``): the
        probe was a second wait for the server on every call.
        """
        self._ensure_open()
        with translate_errors():
            conn = self._pool.getconn()
            try:
                if not _quiet(conn):
                    ConnectionPool.check_connection(conn)
            except psycopg.OperationalError:
                self._pool.putconn(conn)  # broken: the pool discards it
                self._pool.check()
                conn = self._pool.getconn()
        try:
            yield conn
        finally:
            self._pool.putconn(conn)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Session]:
        """A connection in one transaction: committed on success, rolled back on error."""
        with self._checked_connection() as conn, translate_errors(), conn.transaction():
            yield Session(conn)

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        """A raw pooled connection, for code that manages its own transactions."""
        with self._checked_connection() as conn, translate_errors():
            yield conn

    def one(self, name: str, /, **params: Any) -> Row | None:
        with self.transaction() as tx:
            return tx.one(name, **params)

    def one_round_trip(self, name: str, /, **params: Any) -> Row | None:
        """One statement as its own transaction, in one round trip to the server.

        An explicit transaction waits for the server three times (BEGIN, the statement,
        COMMIT). A single statement is atomic on its own, so it runs in autocommit mode:
        the server commits it before answering and the client waits once.
        """
        with self._checked_connection() as conn, translate_errors():
            conn.autocommit = True
            try:
                with conn.cursor() as cur:
                    cur.execute(query(name), params or None)
                    return cur.fetchone()
            finally:
                # a broken connection cannot switch back; the pool discards it on return
                with contextlib.suppress(psycopg.Error):
                    conn.autocommit = False

    def pipelined(self, *statements: tuple[str, Mapping[str, Any]],
                  prepare: bool | None = None) -> list[list[dict[str, Any]]]:
        """Several statements as one transaction in one round trip; each one's rows (none
        for a statement that returns none).

        In autocommit mode the server runs the statements of a pipeline up to its one
        sync as a single implicit transaction (one snapshot, transaction-local settings
        carry over, an error rolls back all), so a read made of dependent statements
        waits for the server once instead of once per statement plus BEGIN and COMMIT.
        ``prepare=True``: each statement is prepared on its first run on a connection
        (in the same round trip), not after psycopg's five unprepared runs, each planned
        anew.
        """
        with self._checked_connection() as conn, translate_errors():
            return _pipeline(conn, statements, prepare)

    def prepare_on_connect(self, *statements: tuple[str, Mapping[str, Any]]) -> None:
        """Run ``statements`` (pipelined, prepared, rows dropped) on every connection the
        pool opens from now on; call it before the first query.

        A statement's first run on a fresh connection pays for filling the backend's
        catalog caches and for planning; a serving process moves that from its first
        requests to the moment the pool opens the connection. psycopg reuses a prepared
        statement for the same SQL and the same parameter types, so ``statements`` carry
        parameters of the types the requests send. A failure (a database not migrated
        yet, a statement over ``PREPARE_BUDGET_MS``) leaves the connection unprepared: its
        first request prepares instead.
        """
        self._on_connect.append(tuple(statements))

    def _configure(self, conn: psycopg.Connection[dict[str, Any]]) -> None:
        _configure(conn)
        budget = ("prepare_budget", {"ms": str(PREPARE_BUDGET_MS)})
        for statements in self._on_connect:
            try:
                _pipeline(conn, [budget, *statements], True)
            except psycopg.errors.QueryCanceled:
                log.warning("statements not prepared at connect: over the %d ms budget", PREPARE_BUDGET_MS)
            except psycopg.Error as exc:
                log.debug("statements not prepared at connect: %s", _first_line(exc))

    def all(self, name: str, /, **params: Any) -> list[Row]:
        with self.transaction() as tx:
            return tx.all(name, **params)

    def scalar(self, name: str, /, **params: Any) -> Any:
        with self.transaction() as tx:
            return tx.scalar(name, **params)

    def execute(self, name: str, /, **params: Any) -> int:
        with self.transaction() as tx:
            return tx.execute(name, **params)

    def ping(self) -> bool:
        try:
            with self.transaction() as tx:
                tx.conn.execute("SELECT 1")
            return True
        except errors.StashError:
            return False

    def probe(self, timeout_s: float = 2.0) -> bool:
        """Whether PostgreSQL answers a fresh connection within about ``timeout_s`` seconds.

        Never waits on the pool: an idle pooled connection, if one is at hand, answers an
        empty round trip (cheap on a loaded host: no new backend); otherwise a fresh
        connection is tried. A health check must not queue behind busy pooled connections,
        nor wait the pool's timeout when the database is down.
        """
        if self._opened:
            try:
                conn = self._pool.getconn(timeout=0.05)
            except (PoolTimeout, psycopg.Error):
                conn = None
            if conn is not None:
                try:
                    ConnectionPool.check_connection(conn)
                    return True
                except psycopg.Error:
                    pass  # a dead socket (the pool discards it): ask a fresh connection
                finally:
                    self._pool.putconn(conn)
        try:
            with psycopg.connect(self.dsn, connect_timeout=max(2, math.ceil(timeout_s)), autocommit=True) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def close(self) -> None:
        if self._opened:
            self._pool.close()
            self._opened = False

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
