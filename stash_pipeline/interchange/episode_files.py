"""Import episodes from JSONL, CSV or Parquet files, through the live write path.

Each row carries ``content`` and optionally ``occurred_at`` (ISO-8601 with a time zone),
``kind``, ``metadata`` (a JSON object; a JSON string in CSV) and ``idempotency_key``.
The whole file is read and validated first: if any row is bad, the error lists the
offending line numbers and nothing is written. Valid files go in batches of
``BATCH_SIZE`` through ``episodes.remember_batch`` (each batch one transaction, one
embedding call). Rows with an ``idempotency_key`` make a re-import after a crash safe:
already-imported rows are reported as replays, not duplicated.

Every reader streams: a line, CSV block or Parquet row group over
``files.MAX_RECORD_BYTES`` is refused before it is held in memory. A JSONL line nested
deeper than ``validate.MAX_JSON_DEPTH`` (200, what a request body to the MCP server may
be) is a bad row like any other, named by its line.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from pyarrow import ArrowException

from stash_pipeline import errors
from stash_pipeline.interchange import files
from stash_pipeline.interchange.files import regular_file
from stash_pipeline.memory import episodes, validate
from stash_pipeline.memory.namespaces import resolve_id
from stash_pipeline.store import Store

BATCH_SIZE = 500
FIELDS = ("content", "occurred_at", "kind", "metadata", "idempotency_key")
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
#: how many bad rows an error message lists before "…and N more"
MAX_REPORTED = 20
#: a JSONL line Python's own parser cannot nest into (a RecursionError)
TOO_DEEP = object()


def _format(path: Path, format: str | None) -> str:
    if format is not None:
        if format not in ("jsonl", "csv", "parquet"):
            raise errors.InvalidInput("format must be one of jsonl, csv, parquet")
        return format
    try:
        return FORMATS[path.suffix.lower()]
    except KeyError:
        raise errors.InvalidInput(
            f"cannot tell the format of {path.name!r} from its suffix; pass format=jsonl|csv|parquet"
        ) from None


def _clean(raw: dict[str, Any]) -> dict[str, Any]:
    """Map a file row to remember_batch's item fields (missing cells become absent)."""
    item: dict[str, Any] = {}
    for key, value in raw.items():
        if value is None or (isinstance(value, float) and math.isnan(value)) or (value == "" and key != "content"):
            continue
        if key == "metadata" and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise errors.InvalidInput(f"metadata is not valid JSON: {exc.msg}") from None
            except RecursionError:  # nested far deeper than validate.metadata takes
                raise errors.InvalidInput(f"metadata is nested deeper than {validate.MAX_JSON_DEPTH} levels") from None
        if key == "occurred_at" and not isinstance(value, datetime | str):
            raise errors.InvalidInput("occurred_at must be an ISO-8601 timestamp")
        if key in ("kind", "idempotency_key", "content") and not isinstance(value, str):
            value = str(value)
        item[key] = value
    return item


def _rows(path: Path, format: str) -> Iterator[tuple[str, dict[str, Any] | Exception]]:
    """(where, row) pairs; where names the line (JSONL/CSV) or row (Parquet)."""
    if format == "jsonl":
        for number, line in files.lines(path):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                why = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
                yield f"line {number}", errors.InvalidInput(f"not valid JSON: {why}")
                continue
            except RecursionError:  # deeper than Python's parser goes: far past the limit
                row = TOO_DEEP
            if row is TOO_DEEP or validate.deeper_than(row):
                # a line is held to the nesting a request body may have (the MCP transports'
                # parser): deeper, later checks would recurse past Python's stack
                yield f"line {number}", errors.InvalidInput(f"nested deeper than {validate.MAX_JSON_DEPTH} levels")
                continue
            if not isinstance(row, dict):
                yield f"line {number}", errors.InvalidInput("each line must be a JSON object")
                continue
            yield f"line {number}", row
        return
    if format == "csv":  # every column as text
        reader: Any = files.csv(path, column_types={f: "string" for f in FIELDS}, strings_can_be_null=False)
        names, first, label = reader.schema.names, 2, "line"  # line 1 is the header
    else:
        parquet = files.parquet(path)
        reader, names, first, label = parquet.iter_batches(batch_size=BATCH_SIZE), parquet.schema_arrow.names, 1, "row"
    unknown = [number for number, column in enumerate(names, start=1) if column not in FIELDS]
    if unknown:
        # positions, not names: the header is the file's content (say, a secret's first line)
        raise errors.InvalidInput(
            f"unknown column(s) at position {', '.join(map(str, unknown[:MAX_REPORTED]))} of the header; "
            f"expected {', '.join(FIELDS)}"
        )
    if "content" not in names:
        raise errors.InvalidInput("the file has no 'content' column")
    offset = first
    for batch in reader:
        for record in batch.to_pylist():
            yield f"{label} {offset}", record
            offset += 1


def _read_rows(file: Path, kind: str) -> Iterator[tuple[str, dict[str, Any] | Exception]]:
    """``_rows`` with reading failures as InvalidInput that names the file, never its bytes."""
    try:
        yield from _rows(file, kind)
    except UnicodeDecodeError:
        raise errors.InvalidInput(f"{file.name} is not UTF-8 text") from None
    except OSError as exc:
        raise errors.InvalidInput(f"cannot read {file}: {exc.strerror or type(exc).__name__}") from None
    except (ValueError, ImportError, ArrowException) as exc:
        if isinstance(exc, errors.StashError):
            raise
        # the CSV / Parquet reader's messages may quote the file; say only what failed
        raise errors.InvalidInput(f"{file.name} is not a readable {kind} file ({type(exc).__name__})") from None


def _items(store: Store, file: Path, kind: str, problems: list[str] | None) -> Iterator[dict[str, Any]]:
    """The file's rows as remember_batch items, streamed; with ``problems``, bad rows are listed
    there (and idempotency keys checked across the file) instead of raising."""
    keys: dict[str, tuple[str, str]] = {}
    for where, row in _read_rows(file, kind):
        try:
            if isinstance(row, Exception):
                raise row
            item = _clean(row)
            if problems is not None:
                prepared = episodes.prepare(store, item)
                key = prepared.idempotency_key
                if key is not None:
                    digest = hashlib.sha256(prepared.content.encode("utf-8")).hexdigest()
                    if key in keys and keys[key][1] != digest:
                        raise errors.Conflict(f"its idempotency_key is also used on {keys[key][0]} with other content")
                    keys.setdefault(key, (where, digest))
            yield item
        except (errors.InvalidInput, errors.Conflict) as exc:
            if problems is None:
                raise
            problems.append(f"{where}: {exc.message}")


def read_episodes(store: Store, path: str | Path, *, format: str | None = None) -> int:
    """Read and validate every row of an episode file (streamed); the row count, or raise
    listing every bad line."""
    file = regular_file(path)
    kind = _format(file, format)
    problems: list[str] = []
    rows = sum(1 for _ in _items(store, file, kind, problems))
    if problems:
        more = f"\n  …and {len(problems) - MAX_REPORTED} more" if len(problems) > MAX_REPORTED else ""
        raise errors.InvalidInput(f"{len(problems)} invalid row(s) in {file.name}; nothing was imported:\n  "
                                  + "\n  ".join(problems[:MAX_REPORTED]) + more)
    if not rows:
        raise errors.InvalidInput(f"{file.name} holds no episodes")
    return rows


def import_episodes(store: Store, namespace: str, path: str | Path, *, format: str | None = None,
                    progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Import episodes from a JSONL/CSV/Parquet file into one namespace, validated up front.

    The file is read twice, streaming both times: once to check every row (nothing is
    written when one is bad), then in batches of ``BATCH_SIZE`` to write them.
    """
    slug = validate.slug(namespace)
    with store.db.transaction() as tx:
        resolve_id(tx, slug)
    file = regular_file(path)
    total = read_episodes(store, file, format=format)
    created = replayed = batches = done = 0
    items = _items(store, file, _format(file, format), None)
    while batch := list(itertools.islice(items, BATCH_SIZE)):
        results = episodes.remember_batch(store, slug, batch)
        batches += 1
        done += len(results)
        created += sum(1 for r in results if r.created)
        replayed += sum(1 for r in results if not r.created)
        if progress is not None:
            progress(done, total)
    return {"namespace": slug, "rows": total, "created": created, "replayed": replayed, "batches": batches}
