"""Export a namespace tree: one Parquet or CSV file per table plus ``manifest.json``, or
one JSONL file (a header line, then one ``{"type": kind, "row": {…}}`` line per row).

Every table of ``catalog.TABLES`` is read from one consistent snapshot (a REPEATABLE
READ transaction) through a server-side cursor, ``CHUNK_ROWS`` rows at a time, and
appended to its file as it arrives, so memory stays bounded by one chunk whatever the
size of the tree. Columns are typed from the database catalog: timestamps stay
timestamps (UTC, microseconds), arrays become lists, ``jsonb`` becomes JSON text
(sorted keys), vectors become lists of float32 and travel only with
``with_vectors=True``. CSV has no types of its own: lists and JSON are JSON text there,
timestamps ISO-8601, and the manifest records every column's type so an import reads
them back typed.

The manifest names the format and its version, the schema revision, the exported root,
the embedding model and vector dimension, and per table its file, row count, SHA-256
and columns; the manifest's own SHA-256 is the export's identity, by which an import
knows it has been imported already. A JSONL file's identity is its SHA-256. Neither
writer replaces an existing file or writes through a symlink unless ``force``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from psycopg.types.string import TextLoader

from stash_pipeline import errors
from stash_pipeline.db.catalog import DERIVED, TABLES, Table
from stash_pipeline.db.gateway import Session
from stash_pipeline.db.sql import named
from stash_pipeline.interchange import files
from stash_pipeline.interchange.writer import json_dumps
from stash_pipeline.memory import validate
from stash_pipeline.memory.namespaces import resolve_trees
from stash_pipeline.store import Store

MANIFEST = "manifest.json"
FORMAT = "stash-tables"
VERSION = 1
TREE_FORMAT = "stash-tree"
TREE_VERSION = 1
CHUNK_ROWS = 5000
SUFFIXES = {"parquet": ".parquet", "csv": ".csv"}
#: progress(table, rows done, rows in the table)
Progress = Callable[[str, int, int], None]


_SCALARS: dict[str, pa.DataType] = {
    "bigint": pa.int64(), "integer": pa.int32(), "smallint": pa.int16(), "real": pa.float32(),
    "double precision": pa.float64(), "boolean": pa.bool_(), "date": pa.date32(),
    "timestamp with time zone": pa.timestamp("us", tz="UTC"), "timestamp without time zone": pa.timestamp("us"),
}


def arrow_type(pg_type: str) -> pa.DataType:
    """The Arrow type a PostgreSQL column is written as (JSON and text as strings)."""
    if pg_type.endswith("[]"):
        return pa.list_(arrow_type(pg_type[:-2]))
    if pg_type.startswith("vector"):
        return pa.list_(pa.float32())
    return _SCALARS.get(pg_type, pa.string())


def is_list(pg_type: str) -> bool:
    return pg_type.endswith("[]") or pg_type.startswith("vector")


def _cell(value: Any, pg_type: str, csv: bool) -> Any:
    if value is None:
        return None
    if pg_type in ("jsonb", "json"):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    if pg_type.startswith("vector"):
        value = [float(x) for x in (value.to_list() if hasattr(value, "to_list") else value)]
    if csv and is_list(pg_type):
        return json.dumps(list(value))
    return value


def rows_of(tx: Session, table: Table, ids: list[int], chunk: int, vectors: bool) -> Iterator[list[dict[str, Any]]]:
    """A table's rows in the tree, in an order an import can replay (contexts by their namespace's path)."""
    if table.name == "contexts":
        return stream(tx, "interchange_rows_contexts", chunk, vectors, ids=ids)
    names = {"table": table.name, "scope": table.scope, "order": table.order}
    return stream(tx, "interchange_rows", chunk, vectors, names, ids=ids)


def stream(tx: Session, name: str, chunk: int, vectors: bool, names: dict[str, str] | None = None,
           **params: Any) -> Iterator[list[dict[str, Any]]]:
    """Rows of a named query from a server-side cursor, ``chunk`` at a time; ``names`` fills
    the query's ``{placeholders}`` with identifiers (space-separated names become a list)."""
    statement = named(name, **(names or {}))
    with tx.conn.cursor(name=f"stash_export_{name}") as cursor:
        if not vectors and "vector" in [t.name for t in tx.conn.adapters.types]:
            # the vector is dropped unread: load it as text instead of parsing 384 floats a row
            cursor.adapters.register_loader("vector", TextLoader)
        cursor.itersize = chunk
        cursor.execute(statement, params)
        while rows := cursor.fetchmany(chunk):
            yield rows


def export_tables(
    store: Store,
    namespace: str,
    directory: str | Path,
    *,
    format: str = "parquet",
    with_vectors: bool = False,
    progress: Progress | None = None,
    chunk_rows: int = CHUNK_ROWS,
    force: bool = False,
) -> dict[str, Any]:
    """Write every table of a namespace tree into ``directory``; returns the manifest."""
    if format not in SUFFIXES:
        raise errors.InvalidInput(f"format must be one of {', '.join(SUFFIXES)} for a directory export")
    root = validate.slug(namespace)
    out = files.directory(Path(directory), force=force)
    from stash_pipeline.db.migrate import current_revision

    csv = format == "csv"
    manifest: dict[str, Any] = {
        "format": FORMAT, "version": VERSION, "schema_version": current_revision(store.db.dsn),
        "root": root, "file_format": format, "with_vectors": with_vectors,
        "embedding_model": store.settings.embedding_model_name, "vector_dim": store.settings.vector_dim,
        "exported_at": datetime.now(UTC).isoformat(), "tables": {},
    }
    with store.db.transaction() as tx:
        tx.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")  # one consistent snapshot
        ids = list(resolve_trees(tx, root))
        for table in TABLES:
            manifest["tables"][table.name] = _export_table(
                tx, table, ids, out, format, with_vectors, progress, chunk_rows, csv, force)
    with files.create(out / MANIFEST, force=force) as handle:
        handle.write((json.dumps(manifest, indent=2) + "\n").encode("utf-8"))
    return manifest


def _export_table(
    tx: Session, table: Table, ids: list[int], out: Path, format: str, with_vectors: bool,
    progress: Progress | None, chunk_rows: int, csv: bool, force: bool,
) -> dict[str, Any]:
    # the stored columns with their PostgreSQL types, in table order (the vector with_vectors only)
    cols = [{"name": r["name"], "type": r["type"]} for r in tx.all("interchange_columns", table=table.name)
            if r["name"] not in DERIVED.get(table.name, ()) and (with_vectors or not r["type"].startswith("vector"))]
    schema = pa.schema([pa.field(c["name"], pa.string() if csv and is_list(c["type"]) else arrow_type(c["type"]))
                        for c in cols])
    path = out / f"{table.name}{SUFFIXES[format]}"
    count = tx.conn.execute(named("interchange_count", table=table.name, scope=table.scope), {"ids": ids})
    total = int(count.fetchone()["count"])  # type: ignore[index]
    handle = files.create(path, force=force)  # a new file: never an existing one or a symlink's target
    writer = pq.ParquetWriter(handle, schema, compression="zstd") if not csv else pa_csv.CSVWriter(handle, schema)
    done = 0
    try:
        if progress is not None:
            progress(table.name, 0, total)
        for rows in rows_of(tx, table, ids, chunk_rows, with_vectors):
            writer.write_table(pa.Table.from_pydict(
                {c["name"]: [_cell(r[c["name"]], c["type"], csv) for r in rows] for c in cols}, schema=schema))
            done += len(rows)
            if progress is not None:
                progress(table.name, done, total)
    finally:
        writer.close()
        handle.close()
    return {"file": path.name, "rows": done, "sha256": files.sha256(path), "columns": cols}


def export_tree(store: Store, namespace: str, path: str | Path, *, force: bool = False,
                chunk_rows: int = CHUNK_ROWS) -> dict[str, Any]:
    """Write every row of a namespace tree to one JSONL file (no vectors); returns counts per table."""
    root = validate.slug(namespace)
    file = Path(path)
    if not file.parent.is_dir():
        raise errors.InvalidInput(f"cannot write {file}: the directory {file.parent} does not exist")
    counts: dict[str, int] = {}
    with files.create(file, force=force) as handle, store.db.transaction() as tx:
        tx.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")  # one consistent snapshot
        ids = list(resolve_trees(tx, root))
        header = {"type": TREE_FORMAT, "version": TREE_VERSION, "root": root,
                  "embedding_model": store.settings.embedding_model_name}
        handle.write((json.dumps(header) + "\n").encode("utf-8"))
        for table in TABLES:
            dropped = DERIVED.get(table.name, set()) | ({"embedding"} if table.embedded else set())
            for rows in rows_of(tx, table, ids, chunk_rows, False):
                for row in rows:
                    line = {"type": table.kind, "row": {k: v for k, v in row.items() if k not in dropped}}
                    handle.write((json_dumps(line) + "\n").encode("utf-8"))
                counts[table.name] = counts.get(table.name, 0) + len(rows)
    return {"namespace": root, "path": str(file), "rows": counts}
