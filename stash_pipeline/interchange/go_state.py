"""The state of one ``migrate-from-go`` run: the ledger of rows already imported from this
source (which seeds the writer's Go id → Stash id maps) and ``put``, which hands a chunk
of mapped rows, Go ids and all, to the import writer's insert path (the live path's checks,
ids mapped, references kept inside the rules of ``catalog``, the report), records each in
the ledger and writes their lineage.

The ledger is keyed on the Go database's identity — its cluster's system identifier and
the database's oid and name — so another spelling of the same address finds the rows
already imported, and another database at the same address is a new source. A ledger
written before that (keyed on the DSN) is recognised and moved over (``adopt_legacy_ledger``)."""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from stash_pipeline import errors
from stash_pipeline.db import catalog
from stash_pipeline.db.gateway import Session
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
        # each sampled Go row as Stash would hold it now (a namespace: the path its slug maps to)
        here = {(r["source_table"], r["source_id"]): mapping.slug(r["value"]) if r["source_table"] == "namespaces"
                and isinstance(r["value"], str) else r["value"] for r in go.all("go_fingerprint", **wanted)}
        if sample and all(here.get((r["source_table"], r["source_id"])) == r["value"] for r in sample):
            tx.execute("go_ledger_rekey", source=source, legacy=legacy)
            return legacy
    return None


class Unreadable:
    """A Go value the driver could not load (a timestamp ``infinity``, text that is not UTF-8)."""

    def __init__(self, why: str) -> None:
        self.why = why


class GoImport:
    """One migration run: the ledger (the writer keeps the Go id -> Stash id maps and the report)."""

    def __init__(self, store: Store, go: Session, tx: Session, source: str, dry_run: bool,
                 progress: Progress | None, stop: bool = False) -> None:
        self.store, self.go, self.tx, self.source, self.progress = store, go, tx, source, progress
        self.writer = Writer(store, tx, stop=stop, dry_run=dry_run)
        self.ledger: dict[str, dict[str, int | None]] = {}
        for row in tx.all("go_import_ledger", source=source):
            self.ledger.setdefault(row["source_table"], {})[row["source_id"]] = row["stash_id"]
            # the writer maps Go ids to Stash ids: rows of earlier runs are already there
            entry = catalog.BY_NAME.get(row["source_table"])
            if entry is not None and entry.has_id and row["source_id"].isdigit() and row["stash_id"] is not None:
                self.writer.ids[entry.kind][int(row["source_id"])] = int(row["stash_id"])

    def namespace_paths(self) -> dict[int, str | None]:
        """The Stash path of each Go namespace imported so far, by Go id (earlier runs' too)."""
        return {go_id: self.writer.path_of(new) for go_id, new in self.writer.ids["namespace"].items()}

    def rows(self, table: str, key: str) -> Any:
        """Chunks of a Go table's rows (nothing when the Go database predates the table)."""
        found = self.go.one("go_table_exists", table=table) or {}
        if not found.get("exists"):
            return
        done, estimate = 0, int(found["estimate"] or 0)
        name = "go_fact_sources" if table == "fact_sources" else "go_rows"
        for chunk in stream(self.go, name, CHUNK_ROWS, True, {"table": table, "key": key}):
            yield [row for row in chunk if self._readable(table, row)]
            done += len(chunk)
            if self.progress is not None:
                self.progress(table, done, max(estimate, done))

    def _readable(self, table: str, row: Row) -> bool:
        for column, value in row.items():
            if isinstance(value, Unreadable):
                key = row.get("id", row.get("namespace_id", "?"))
                self.writer.report(errors.BadRow(table, f"row Go id {key}", column, value.why))
                return False
        return True

    def put(self, go_table: str, table: catalog.Table, mapped: list[Mapped]) -> dict[str, Row]:
        """Hand the mapped rows not yet in the ledger to the writer (the rows of a namespace
        that was not imported are skipped), record each in the ledger and write the lineage
        of those written; returns the written rows' ids by Go key."""
        done, namespaces = self.ledger.setdefault(go_table, {}), self.writer.ids["namespace"]
        batch: list[tuple[str, Row]] = []
        lineage: list[tuple[str, Row]] = []
        skipped: dict[str, str] = {}  # Go key -> why it was not written
        for key, row, why, parents in mapped:
            if key in done:
                self.writer.skip(table.name, "already imported by an earlier run")
            elif row is None or ("namespace_id" in row and row["namespace_id"] not in namespaces):
                skipped[key] = (why if row is None else "its namespace was not imported") or "not importable"
                self.writer.skip(table.name, skipped[key])
            else:
                batch.append((key, row))
                lineage += [(key, {"namespace_id": row["namespace_id"], "child_kind": table.kind,
                                   "child_id": int(key), "parent_kind": kind, "parent_id": parent})
                            for kind, parent in parents]
        results = self.writer.rows(table, [(f"row Go id {key}", row) for key, row in batch], reuse_vectors=True)
        written = {key: new for (key, _), new in zip(batch, results, strict=True) if new is not None}
        skipped |= {key: "refused or already in Stash (see the report)" for key, _ in batch if key not in written}
        done |= {key: new.get("id", new.get("namespace_id")) for key, new in written.items()}
        done |= dict.fromkeys(skipped)
        self.writer.rows(catalog.BY_NAME["lineage"],
                         [(f"row Go {go_table} id {key}", edge) for key, edge in lineage if key in written])
        if written or skipped:
            self.tx.execute("go_import_record", source=self.source, rows=Jsonb([
                {"source_table": go_table, "source_id": key, "kind": table.name, "stash_id": done[key],
                 "skipped": skipped.get(key)} for key in [*written, *skipped]]))
        return written
