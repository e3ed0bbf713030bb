"""Import an export back — a table export (a directory of Parquet/CSV files with
``manifest.json``) or a JSONL tree — into an empty database or re-rooted under another
namespace (``into``).

Both are readers that yield chunks of catalog rows, table by table in catalog order; the
one ``writer.Writer`` validates and writes them in ONE transaction. The manifest is
checked first (its shape, every file inside the directory, every file's SHA-256). An
export's identity (the manifest's or the JSONL file's SHA-256) and the target root are
recorded in the import's transaction: importing it there again is a no-op that says so,
and an import that died half way left nothing, so running it again does all of it.
Vectors are taken from the files only with ``with_vectors``, and then per row only when
the row's embedding model and dimension are the configured ones (``Writer.embed``, the
rule a Go row's vector follows too); otherwise they are computed again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from stash_pipeline import errors
from stash_pipeline.db import catalog
from stash_pipeline.interchange import files
from stash_pipeline.interchange.export import (
    CHUNK_ROWS,
    FORMAT,
    MANIFEST,
    SUFFIXES,
    TREE_FORMAT,
    TREE_VERSION,
    VERSION,
    Progress,
    arrow_type,
    is_list,
)
from stash_pipeline.interchange.writer import Row, Writer
from stash_pipeline.memory import validate
from stash_pipeline.store import Store

#: a chunk of one table's rows, each with where it was read ("row 3", "line 12"); a row its
#: reader refused is the BadRow that says why (the writer reports it)
Chunk = tuple[catalog.Table, list[tuple[str, Row | errors.BadRow]]]


def _manifest_shape(manifest: Any, file: Path) -> dict[str, Any]:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise errors.InvalidInput(f"{file} is not a Stash table export manifest")
    if manifest.get("version") != VERSION:
        raise errors.InvalidInput(f"{file} is a version this Stash does not read (it reads {VERSION})")
    if manifest.get("file_format") not in SUFFIXES or not isinstance(manifest.get("tables"), dict):
        raise errors.InvalidInput(f"{file} lacks its file format or its tables")
    validate.slug(manifest.get("root"))
    for name, entry in manifest["tables"].items():
        if name not in catalog.BY_NAME:
            raise errors.InvalidInput(f"{file} lists a table this Stash does not have")
        columns = entry.get("columns") if isinstance(entry, dict) else None
        if (not isinstance(columns, list) or not isinstance(entry.get("sha256"), str)
                or not isinstance(entry.get("rows"), int)
                or not all(isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("type"), str)
                           for c in columns)):
            raise errors.InvalidInput(f"{file}: the entry for {name} lacks its rows, sha256 or columns")
    return manifest


def read_manifest(path: str | Path) -> tuple[Path, dict[str, Any], str]:
    """(directory, manifest, identity) of a table export given its directory or manifest."""
    given = Path(path)
    file = given / MANIFEST if given.is_dir() else given
    if not file.is_file():
        raise errors.InvalidInput(f"no {MANIFEST} at {given}")
    if file.stat().st_size > files.MAX_RECORD_BYTES:
        raise errors.InvalidInput(f"{file} is too large to be a manifest")
    raw = file.read_bytes()
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise errors.InvalidInput(f"{file} is not a Stash table export manifest") from None
    return file.parent, _manifest_shape(manifest, file), hashlib.sha256(raw).hexdigest()


def verify(directory: Path, manifest: dict[str, Any]) -> None:
    """Raise when a file the manifest lists is outside the directory, missing, or altered."""
    for name, entry in manifest["tables"].items():
        file = files.inside(directory, entry.get("file"), name)
        if not file.is_file():
            raise errors.InvalidInput(f"the export lists a file for {name} but it is missing")
        if files.sha256(file) != entry["sha256"]:
            raise errors.InvalidInput(f"the file for {name} does not match its checksum in {MANIFEST}")


def _csv(file: Path, cols: list[dict[str, str]]) -> Iterator[list[Row]]:
    types = {c["name"]: pa.string() if is_list(c["type"]) else arrow_type(c["type"]) for c in cols}
    lists = [c["name"] for c in cols if is_list(c["type"])]  # JSON text in a CSV file
    for batch in files.csv(file, column_types=types, strings_can_be_null=True, quoted_strings_can_be_null=False):
        rows = batch.to_pylist()
        for row in rows:
            row |= {name: json.loads(row[name]) for name in lists if row.get(name) is not None}
        yield rows


def table_chunks(directory: Path, manifest: dict[str, Any], chunk: int = CHUNK_ROWS) -> Iterator[Chunk]:
    """Rows of a table export, table by table in catalog order, ``chunk`` rows at a time."""
    for table in catalog.TABLES:
        entry = manifest["tables"].get(table.name)
        if entry is None:
            continue
        file, done = directory / entry["file"], 0
        try:
            batches = ((b.to_pylist() for b in files.parquet(file).iter_batches(batch_size=chunk))
                       if manifest["file_format"] == "parquet" else _csv(file, entry["columns"]))
            for rows in batches:
                yield table, [(f"row {done + i}", row) for i, row in enumerate(rows, start=1)]
                done += len(rows)
        except errors.StashError:
            raise
        except (pa.ArrowException, ValueError, TypeError, KeyError, OSError, RecursionError) as exc:
            # the reader's own message may quote the file: say only where and what kind
            raise errors.InvalidInput(
                f"{table.name} row {done + 1}: the file is not a readable {manifest['file_format']} "
                f"file of this table ({type(exc).__name__})") from None


def tree_chunks(file: Path, chunk: int = CHUNK_ROWS) -> Iterator[Chunk]:
    """Rows of a JSONL tree after its header line, grouped into chunks of one table."""
    current: catalog.Table | None = None
    batch: list[tuple[str, Row | errors.BadRow]] = []
    order = {t.name: i for i, t in enumerate(catalog.TABLES)}
    for number, line in files.lines(file):
        if number == 1 or not line.strip():
            continue
        try:
            record = json.loads(line)
            table = catalog.BY_KIND[record["type"]]
            row = record["row"]
            if not isinstance(row, dict):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            raise errors.InvalidInput(f"{file.name} line {number} is not a row of a Stash tree export") from None
        except RecursionError:  # deeper than Python's parser goes: its table cannot be told
            raise errors.InvalidInput(f"{file.name} line {number} is nested deeper than "
                                      f"{validate.MAX_JSON_DEPTH} levels") from None
        if validate.deeper_than(record):
            # a line is held to the nesting a request body may have; the writer's checks would
            # recurse past Python's stack. A bad row like any other: reported, or the end
            # of the import with --stop-on-bad-row.
            deep = next((c for c, v in row.items() if validate.deeper_than(v, validate.MAX_JSON_DEPTH - 2)), None)
            row = errors.BadRow(table.name, f"line {number}", deep,
                                f"is nested deeper than the {validate.MAX_JSON_DEPTH} levels a line may have")
        if table is not current:
            if current is not None and order[table.name] < order[current.name]:
                raise errors.InvalidInput(f"{file.name} line {number}: rows are not in table order")
            if batch:
                yield current, batch  # type: ignore[misc]
            current, batch = table, []
        batch.append((f"line {number}", row))
        if len(batch) >= chunk:
            yield table, batch
            batch = []
    if batch and current is not None:
        yield current, batch


def read_tree_header(file: Path) -> tuple[dict[str, Any], str]:
    """(header, identity) of a JSONL tree; the identity is the file's SHA-256."""
    try:
        header = json.loads(next(files.lines(file), (0, b"null"))[1])
    except (ValueError, RecursionError):
        header = None
    if not isinstance(header, dict) or header.get("type") != TREE_FORMAT or header.get("version") != TREE_VERSION:
        raise errors.InvalidInput(f"{file.name} is not a Stash tree export (version {TREE_VERSION})")
    validate.slug(header.get("root"))
    return header, files.sha256(file)


def import_export(
    store: Store,
    path: str | Path,
    *,
    into: str | None = None,
    with_vectors: bool = False,
    stop: bool = False,
    progress: Progress | None = None,
    chunk_rows: int = CHUNK_ROWS,
) -> dict[str, Any]:
    """Import a table export or a JSONL tree in one transaction (optionally under ``into``)."""
    given = Path(path)
    if given.is_dir() or given.name == MANIFEST:
        directory, manifest, identity = read_manifest(given)
        verify(directory, manifest)
        chunks: Iterator[Chunk] = table_chunks(directory, manifest, chunk_rows)
        totals = {name: int(entry["rows"]) for name, entry in manifest["tables"].items()}
    else:
        file = files.regular_file(given)
        manifest, identity = read_tree_header(file)
        chunks, totals = tree_chunks(file, chunk_rows), {}  # a tree carries no vectors
    root = validate.slug(manifest["root"])
    target = validate.slug(into) if into is not None else root
    source = f"export:{identity}"
    with store.db.transaction() as tx:
        seen = tx.one("interchange_export_imported", source=source, target=target)
        if seen is not None:
            return {"namespace": target, "rows": {}, "skipped": {}, "problems": [], "identity": identity,
                    "already_imported": seen["created_at"].isoformat(), "vectors": "none"}
        writer = Writer(store, tx, stop=stop, root=root, into=target)
        writer.ensure_ancestors(target)
        done: dict[str, int] = {}
        for table, rows in chunks:
            for problem in (row for _, row in rows if isinstance(row, errors.BadRow)):
                writer.report(problem)  # a row its reader refused (tree_chunks: nested too deep)
            writer.rows(table, [(where, row) for where, row in rows if not isinstance(row, errors.BadRow)],
                        reuse_vectors=with_vectors)
            done[table.name] = done.get(table.name, 0) + len(rows)
            if progress is not None:
                progress(table.name, done[table.name], totals.get(table.name, done[table.name]))
        writer.finish()
        top = (tx.one("get_namespace_by_slug", slug=target) or {}).get("id")
        tx.execute("interchange_export_record", source=source, target=target, namespace_id=top)
    return {"namespace": target, "identity": identity, "already_imported": None,
            "vectors": "reused" if writer.vectors["reused"] else "recomputed", **writer.result()}
