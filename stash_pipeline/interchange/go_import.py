"""``stash migrate-from-go``: bring a Go Stash database over, row by row.

Every Go table is read in key order in chunks (``go_rows``); ``go_tables`` maps each row
to a Stash row that keeps its Go ids and hands the chunk to the import writer, which maps
the ids, checks every value and reference as for an export's import, and writes the
chunk in one INSERT. The whole migration is ONE transaction. Each Go row is recorded in
``imported_rows`` (``go_state``), so a second run finds every row already there and
imports nothing; ``dry_run`` does the same work and rolls it back, so its report is
exactly what a real run would do (it puts zero vectors instead of computing them).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.adapt import Loader
from psycopg.rows import dict_row
from psycopg.types.datetime import DateLoader, TimestampLoader, TimestamptzLoader
from psycopg.types.json import JsonbLoader, JsonLoader

from stash_pipeline import errors
from stash_pipeline.db.gateway import Session, translate_errors
from stash_pipeline.interchange import go_tables
from stash_pipeline.interchange.export import Progress
from stash_pipeline.interchange.go_state import GoImport, Unreadable, adopt_legacy_ledger, source_name
from stash_pipeline.store import Store


class _Text(Loader):
    """Text as UTF-8 whatever the database's encoding says (a SQL_ASCII database hands
    over raw bytes); bytes that are not UTF-8 make the value unreadable, not the run."""

    def load(self, data: Any) -> Any:
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            return Unreadable("is not valid UTF-8 text")


def _guarded(base: type[Loader], why: str) -> type[Loader]:
    """``base``'s loader, with a value it cannot load (``infinity``, year 10000) made unreadable."""

    class Guarded(base):  # type: ignore[valid-type,misc]
        def load(self, data: Any) -> Any:
            try:
                return super().load(data)
            except (psycopg.DataError, ValueError, OverflowError):
                return Unreadable(why)

    return Guarded


def _connect(dsn: str) -> psycopg.Connection[Any]:
    try:
        with translate_errors():
            conn = psycopg.connect(dsn, row_factory=dict_row, connect_timeout=15)
    except errors.DatabaseUnavailable as exc:
        raise errors.DatabaseUnavailable(f"cannot reach the Go Stash database: {exc.message}") from None
    for name in ("text", "varchar", "bpchar", "name"):
        conn.adapters.register_loader(name, _Text)
    for name, base in (("timestamptz", TimestamptzLoader), ("timestamp", TimestampLoader), ("date", DateLoader)):
        conn.adapters.register_loader(name, _guarded(base, "is not a time Stash can store (e.g. infinity)"))
    for name, base in (("jsonb", JsonbLoader), ("json", JsonLoader)):
        conn.adapters.register_loader(name, _guarded(base, "is not valid JSON text"))
    return conn


def migrate_from_go(
    store: Store, dsn: str, *, dry_run: bool = False, progress: Progress | None = None, stop: bool = False,
) -> dict[str, Any]:
    """Import a Go Stash database; returns the report (rows written per Stash table, rows
    skipped per table with why, problems).

    A row that breaks a rule is skipped and reported (``problems``), or with ``stop`` ends
    the run with that report and nothing written.
    """
    with _connect(dsn) as go_conn, store.db.transaction() as tx:  # rolled back on any error
        go = Session(go_conn)
        source = source_name(go)
        if not all(go.scalar("go_table_exists", table=t) for t in ("episodes", "facts", "fact_sources")):
            raise errors.InvalidInput("the --from database has no episodes/facts tables: not a Go Stash database")
        adopted = adopt_legacy_ledger(go, tx, source)
        run = GoImport(store, go, tx, source, dry_run, progress, stop)
        go_tables.run_all(run)
        if dry_run:
            raise psycopg.Rollback()  # the transaction ends here, rolled back; the report stands
    return {"source": source, "ledger_adopted_from": adopted, "dry_run": dry_run,
            "imported": sum(run.writer.counts.values()), **run.writer.result(), "vectors": run.writer.vectors}

