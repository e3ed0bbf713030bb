"""Import a table export (``memory/export.py``) back: into an empty database, or re-rooted
under another namespace.

The manifest is checked first (format, version, every file's SHA-256), then every table is
read in chunks in ``tables.TABLES`` order and written in ONE transaction through the
database function ``interchange_insert``, which writes whichever of the row's columns the
table has, so a column added later needs no code here. Rows get fresh ids; every
reference (namespace, lineage, dead-letter item, superseded_by, parent goal, …) is
rewritten to the new ids. Vectors are taken from the files only when the export carried
them and its embedding model and dimension are the configured ones; otherwise episodes and
facts are re-embedded, chunk by chunk, with progress.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from psycopg.types.json import Jsonb

from stash_pipeline import errors
from stash_pipeline.db.gateway import Session
from stash_pipeline.memory import validate
from stash_pipeline.memory.export import CHUNK_ROWS, FORMAT, MANIFEST, VERSION, Progress, sha256
from stash_pipeline.memory.tables import TABLES, Table, arrow_type, is_json, is_list
from stash_pipeline.store import Store


def read_manifest(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """(directory, manifest) of a table export given its directory or its manifest file."""
    given = Path(path)
    file = given / MANIFEST if given.is_dir() else given
    if not file.is_file():
        raise errors.InvalidInput(f"no {MANIFEST} at {given}")
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise errors.InvalidInput(f"{file} is not a Stash table export manifest") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise errors.InvalidInput(f"{file} is not a Stash table export manifest")
    if manifest.get("version") != VERSION:
        raise errors.InvalidInput(f"{file} is version {manifest.get('version')}; this Stash reads {VERSION}")
    return file.parent, manifest


def is_table_export(path: str | Path) -> bool:
    try:
        read_manifest(path)
    except errors.InvalidInput:
        return False
    return True


def verify(directory: Path, manifest: dict[str, Any]) -> None:
    """Raise when a file the manifest lists is missing or its checksum differs."""
    for name, entry in manifest["tables"].items():
        file = directory / entry["file"]
        if not file.is_file():
            raise errors.InvalidInput(f"the export lists {entry['file']} for {name} but it is missing")
        if sha256(file) != entry["sha256"]:
            raise errors.InvalidInput(f"{entry['file']} does not match its checksum in {MANIFEST}")


def _batches(file: Path, entry: dict[str, Any], file_format: str, chunk: int) -> Iterator[list[dict[str, Any]]]:
    cols = entry["columns"]
    if file_format == "parquet":
        for batch in pq.ParquetFile(file).iter_batches(batch_size=chunk):
            yield batch.to_pylist()
        return
    types = {c["name"]: pa.string() if is_list(c["type"]) else arrow_type(c["type"]) for c in cols}
    reader = pa_csv.open_csv(
        file,
        convert_options=pa_csv.ConvertOptions(column_types=types, strings_can_be_null=True,
                                              quoted_strings_can_be_null=False),
    )
    for batch in reader:
        rows = batch.to_pylist()
        for c in cols:
            if is_list(c["type"]):
                for row in rows:
                    if row[c["name"]] is not None:
                        row[c["name"]] = json.loads(row[c["name"]])
        yield rows


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def json_dumps(value: Any) -> str:
    return json.dumps(value, default=_json_default)


def vector_text(vector: Any) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


class _Restore:
    """The state of one import: new ids per id space, counts and skips."""

    def __init__(self, store: Store, manifest: dict[str, Any], target: str, with_vectors: bool) -> None:
        self.store = store
        self.root = validate.slug(manifest["root"])
        self.target = target
        self.ids: dict[str, dict[int, int]] = {t.kind: {} for t in TABLES}
        self.counts: dict[str, int] = {}
        self.skipped: dict[str, dict[str, int]] = {}
        #: (table, column, [{id: new row, old: old referenced id}]) filled in by ``finish``
        self.pending: list[tuple[Table, str, list[dict[str, int]]]] = []
        model, dim = store.settings.embedding_model_name, store.settings.vector_dim
        self.reuse_vectors = (with_vectors and bool(manifest.get("with_vectors"))
                              and manifest.get("embedding_model") == model and manifest.get("vector_dim") == dim)

    def skip(self, table: str, why: str) -> None:
        self.skipped.setdefault(table, {})
        self.skipped[table][why] = self.skipped[table].get(why, 0) + 1

    def reroot(self, slug: str) -> str:
        relative = slug[len(self.root):] if self.root != "/" else ("" if slug == "/" else slug)
        base = "" if self.target == "/" else self.target
        return (base + relative) or "/"

    def remap(self, table: Table, row: dict[str, Any]) -> str | None:
        """Rewrite a row's references in place; the reason when it cannot be imported."""
        if "namespace_id" in row:
            row["namespace_id"] = self.ids["namespace"].get(int(row["namespace_id"]))
            if row["namespace_id"] is None:
                return "its namespace is not in the export"
        if table.name == "lineage":
            for side in ("child", "parent"):
                new = self.ids.get(row[f"{side}_kind"], {}).get(int(row[f"{side}_id"]))
                if new is None:
                    return f"its {side} is not in the export"
                row[f"{side}_id"] = new
            return None
        if table.name == "dead_letters":
            new = self.ids.get(row["item_kind"], {}).get(int(row["item_id"]))
            if new is None:
                return "its item is not in the export"
            row["item_id"] = new
        for column, kind in table.references.items():
            old = row.get(column)
            if old is None or column in table.deferred:
                continue
            row[column] = self.ids[kind].get(int(old))
            if row[column] is None and column not in table.nullable:
                return f"{column} points outside the export"
        return None

    def embed(self, table: Table, rows: list[dict[str, Any]]) -> None:
        if table.embedded is None:
            return
        if self.reuse_vectors and all(r.get("embedding") is not None for r in rows):
            for row in rows:
                row["embedding"] = vector_text(row["embedding"])
            return
        vectors = self.store.embedder.embed([r[table.embedded] for r in rows]) if rows else []
        for row, vector in zip(rows, vectors, strict=True):
            row["embedding"] = vector_text(vector)
            row["embedding_model"] = self.store.settings.embedding_model_name

    def namespaces(self, tx: Session, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            slug = self.reroot(row["slug"])
            new = tx.scalar("interchange_import_namespace", slug=slug, row=Jsonb(row, dumps=json_dumps))
            self.ids["namespace"][int(row["id"])] = int(new)
            self.counts["namespaces"] = self.counts.get("namespaces", 0) + 1

    def rows(self, tx: Session, table: Table, rows: list[dict[str, Any]], cols: list[dict[str, str]]) -> None:
        json_columns = [c["name"] for c in cols if is_json(c["type"])]
        ready: list[tuple[int | None, dict[str, Any], dict[str, Any]]] = []
        for row in rows:
            for column in json_columns:
                if isinstance(row.get(column), str):
                    row[column] = json.loads(row[column])
            original = dict(row)
            why = self.remap(table, row)
            if why is not None:
                self.skip(table.name, why)
                continue
            old_id = row.pop("id", None) if table.has_id else None
            for column in table.deferred:
                row[column] = None
            ready.append((old_id, original, row))
        self.embed(table, [r for _, _, r in ready])
        if not ready:
            return
        results = tx.all("interchange_insert_rows", table=table.name,
                         rows=Jsonb([r for _, _, r in ready], dumps=json_dumps))
        deferred: dict[str, list[dict[str, int]]] = {c: [] for c in table.deferred}
        for (old_id, original, _), result in zip(ready, results, strict=True):
            inserted = result["row"]
            if inserted is None:
                self.skip(table.name, "already present (a unique key matched)")
                continue
            self.counts[table.name] = self.counts.get(table.name, 0) + 1
            if old_id is not None:
                self.ids[table.kind][int(old_id)] = int(inserted["id"])
                for column in table.deferred:
                    if original.get(column) is not None:
                        deferred[column].append({"id": int(inserted["id"]), "old": int(original[column])})
        self.pending.extend((table, column, pairs) for column, pairs in deferred.items() if pairs)

    def finish(self, tx: Session) -> None:
        """Fill in self-references once every row of their table has its new id."""
        for table, column, pairs in self.pending:
            mapped = [{"id": p["id"], "ref": self.ids[table.references[column]].get(p["old"])} for p in pairs]
            name = f"interchange_defer_{table.name}_{column}"  # a named query per deferred column
            tx.execute(name, pairs=Jsonb(mapped))


def import_tables(
    store: Store,
    path: str | Path,
    *,
    into: str | None = None,
    with_vectors: bool = False,
    progress: Progress | None = None,
    chunk_rows: int = CHUNK_ROWS,
) -> dict[str, Any]:
    """Import a table export in one transaction (optionally re-rooted under ``into``)."""
    directory, manifest = read_manifest(path)
    verify(directory, manifest)
    target = validate.slug(into) if into is not None else validate.slug(manifest["root"])
    state = _Restore(store, manifest, target, with_vectors)
    with store.db.transaction() as tx:
        parts = target.strip("/").split("/") if target != "/" else []
        for i in range(1, len(parts)):
            tx.execute("ensure_namespace", slug="/" + "/".join(parts[:i]))
        for table in TABLES:
            entry = manifest["tables"].get(table.name)
            if entry is None:
                continue
            done = 0
            if progress is not None:
                progress(table.name, 0, int(entry["rows"]))
            for rows in _batches(directory / entry["file"], entry, manifest["file_format"], chunk_rows):
                if table.name == "namespaces":
                    state.namespaces(tx, rows)
                else:
                    state.rows(tx, table, rows, entry["columns"])
                done += len(rows)
                if progress is not None:
                    progress(table.name, done, int(entry["rows"]))
        state.finish(tx)
    return {
        "namespace": target, "rows": state.counts, "skipped": state.skipped,
        "vectors": "reused" if state.reuse_vectors else "recomputed",
    }
