"""The state of one ``migrate-from-go`` run: the ledger of rows already imported from this
source (which seeds the writer's Go id → Stash id maps), the report, and ``put``, which
hands a chunk of mapped rows to the import writer (the live path's checks, references kept
inside the rules of ``catalog``), records each in the ledger and writes their lineage.

The ledger is keyed on the Go database's identity — its cluster's system identifier and
the database's oid and name — so another spelling of the same address finds the rows
already imported, and another database at the same address is a new source. A ledger
written before that (keyed on the DSN) is recognised and moved over (``adopt_legacy_ledger``)."""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from stash_pipeline import errors
from stash_pipeline.db.gateway import Session
from stash_pipeline.interchange import catalog
from stash_pipeline.interchange import go_mapping as mapping
from stash_pipeline.interchange.export import Progress, stream
from stash_pipeline.interchange.writer import Writer
from stash_pipeline.store import Store

CHUNK_ROWS = 1000
Row = dict[str, Any]
#: a mapped row: (Go key, Stash row or None, why it is skipped, lineage parents [(kind, Go id)])
Mapped = tuple[str, Row | None, str | None, list[tuple[str, int]]]


def source_name(go: Session) -> str:
    """The Go database's identity in the ledger: its cluster's system identifier, the
    database's oid and name (never the address or the password used to reach it)."""
    row = go.one("go_identity")
    assert row is not None
    return f"go-stash:{row['system_identifier']}/{row['oid']}:{row['datname']}"


def adopt_legacy_ledger(go: Session, tx: Session, source: str) -> str | None:
    """Recognise a ledger written before it was keyed on the database's identity.

    Such a ledger is keyed on the DSN ('go-stash:HOST:PORT/DB'); without this, the first
    run after an upgrade would import everything again. A legacy ledger of a database of
    the same name is this database's when a sample of its rows (up to ten namespaces,
    episodes and facts) still reads the same here — the path a namespace maps to, the
    content — then it is moved to this identity and returned. Another database that
    merely took the name at that address does not match and starts its own ledger.
    """
    datname = source.split(":", 2)[2]
    for legacy in [r["source"] for r in tx.all("go_legacy_sources", source=source, datname=datname)]:
        sample = tx.all("go_legacy_sample", source=legacy)
        wanted = {t: [r["source_id"] for r in sample if r["source_table"] == t]
                  for t in ("namespaces", "episodes", "facts")}
        here = {(r["source_table"], r["source_id"]): r["value"] for r in go.all("go_fingerprint", **wanted)}
        if sample and all(_same(here, r) for r in sample):
            tx.execute("go_ledger_rekey", source=source, legacy=legacy)
            return legacy
    return None


def _same(here: dict[tuple[str, str], Any], row: Row) -> bool:
    """Whether a Go row still reads as what the ledger's Stash row holds."""
    value = here.get((row["source_table"], row["source_id"]))
    if row["source_table"] == "namespaces":
        value = mapping.slug(value) if isinstance(value, str) else None
    return value == row["value"]


class Unreadable:
    """A Go value the driver could not load (a timestamp ``infinity``, text that is not UTF-8)."""

    def __init__(self, why: str) -> None:
        self.why = why


class GoImport:
    """One migration run: the ledger and the report (the writer keeps the Go id -> Stash id maps)."""

    def __init__(self, store: Store, go: Session, tx: Session, source: str, dry_run: bool,
                 progress: Progress | None, stop: bool = False) -> None:
        self.store, self.go, self.tx, self.source = store, go, tx, source
        self.writer = Writer(store, tx, stop=stop, remap=False, dry_run=dry_run)
        self.progress = progress
        self.ledger: dict[str, dict[str, int | None]] = {}
        for row in tx.all("go_import_ledger", source=source):
            self.ledger.setdefault(row["source_table"], {})[row["source_id"]] = row["stash_id"]
            # the writer maps Go ids to Stash ids: rows of earlier runs are already there
            entry = catalog.BY_NAME.get(row["source_table"])
            if entry is not None and row["source_id"].isdigit() and row["stash_id"] is not None:
                self.writer.ids[entry.kind][int(row["source_id"])] = int(row["stash_id"])
        self.report: dict[str, dict[str, Any]] = {}

    # -- bookkeeping -------------------------------------------------------------------
    def _entry(self, table: str) -> dict[str, Any]:
        return self.report.setdefault(table, {"read": 0, "imported": 0, "already": 0, "skipped": {}})

    def skip(self, table: str, why: str) -> None:
        skipped = self._entry(table)["skipped"]
        skipped[why] = skipped.get(why, 0) + 1

    def new_id(self, kind: str, go_id: Any) -> int | None:
        return None if go_id is None else self.writer.ids.get(kind, {}).get(int(go_id))

    def rows(self, table: str, key: str) -> Any:
        """Chunks of a Go table's rows (nothing when the Go database predates the table)."""
        if not self.go.scalar("go_table_exists", table=table):
            return
        estimate = int(self.go.scalar("go_count_estimate", table=table) or 0)
        done = 0
        for chunk in stream(self.go, "go_rows", CHUNK_ROWS, True, {"table": table, "key": key}):
            self._entry(table)["read"] += len(chunk)
            yield [row for row in chunk if self._readable(table, row)]
            done += len(chunk)
            if self.progress is not None:
                self.progress(table, done, max(estimate, done))

    def _readable(self, table: str, row: Row) -> bool:
        for column, value in row.items():
            if isinstance(value, Unreadable):
                key = row.get("id", row.get("namespace_id", "?"))
                self.writer.report(errors.BadRow(table, f"row Go id {key}", column, value.why))
                self.skip(table, f"unreadable {column}")
                return False
        return True

    def put(self, go_table: str, table: str, mapped: list[Mapped]) -> dict[str, Row | None]:
        """Insert the mapped rows not yet in the ledger, record them all, write their lineage."""
        done = self.ledger.setdefault(go_table, {})
        entry = catalog.BY_NAME.get(table)  # None for the embedding cache: not a record table
        kind = entry.kind if entry is not None else table
        fresh: list[Mapped] = []
        for key, row, why, parents in mapped:
            if key in done:
                self._entry(go_table)["already"] += 1
                continue
            if row is not None and entry is not None and not self.writer.check(entry, f"row Go id {key}", row):
                row, why = None, "refused: a value or reference breaks a rule (see problems)"
            if row is None:
                self.skip(go_table, why or "not importable")
            fresh.append((key, row, why, parents))
        inserting = [m for m in fresh if m[1] is not None]
        if entry is not None:  # Go's vector when of this model and dimension, else a new one
            self.writer.embed(entry, [m[1] for m in inserting], True)  # type: ignore[misc]
        by_key = dict(zip([m[0] for m in inserting], self.writer.write_rows(table, [m[1] for m in inserting]),  # type: ignore[misc]
                          strict=True))
        records: list[Row] = []
        lineage: list[Row] = []
        for key, row, why, parents in fresh:
            inserted = by_key.get(key)
            if row is not None and inserted is None:
                why = "a matching row already exists in Stash"
                self.skip(go_table, why)
            stash_id = None
            if inserted is not None:
                self._entry(go_table)["imported"] += 1
                stash_id = inserted.get("id", inserted.get("namespace_id"))
                if "id" in inserted and "namespace_id" in inserted:
                    self.writer.note(kind, key if key.isdigit() else None, int(inserted["id"]),
                                     int(inserted["namespace_id"]))
                for parent_kind, go_parent in parents:
                    parent = self.new_id(parent_kind, go_parent)
                    if parent is None:
                        self.skip(f"{go_table} lineage", f"the source {parent_kind} was not imported")
                        continue
                    edge = {"child_kind": kind, "child_id": int(inserted["id"]), "parent_kind": parent_kind,
                            "parent_id": parent, "namespace_id": int(inserted["namespace_id"])}
                    if self.writer.check(catalog.BY_NAME["lineage"], f"row Go {go_table} id {key}", edge):
                        lineage.append(edge)
            records.append({"source_table": go_table, "source_id": key, "kind": table,
                            "stash_id": stash_id, "skipped": why})
            done[key] = stash_id
        if lineage:
            self.writer.write_rows("lineage", lineage)
        if records:
            self.tx.execute("go_import_record", source=self.source, rows=Jsonb(records))
        return by_key
