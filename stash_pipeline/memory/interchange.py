"""Data interchange: import episodes from JSONL, CSV or Parquet files.

Each row carries ``content`` and optionally ``occurred_at`` (ISO-8601 with a time zone),
``kind``, ``metadata`` (a JSON object; a JSON string in CSV) and ``idempotency_key``.
The whole file is read and validated first: if any row is bad, the error lists the
offending line numbers and nothing is written. Valid files go in batches of
``BATCH_SIZE`` through ``episodes.remember_batch`` (each batch one transaction, one
embedding call). Rows with an ``idempotency_key`` make a re-import after a crash safe:
already-imported rows are reported as replays, not duplicated.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from stash_pipeline import errors
from stash_pipeline.memory import _validate as v
from stash_pipeline.memory import episodes
from stash_pipeline.memory import namespaces as ns
from stash_pipeline.store import Store

BATCH_SIZE = 500
FIELDS = ("content", "occurred_at", "kind", "metadata", "idempotency_key")
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
#: how many bad rows an error message lists before "…and N more"
MAX_REPORTED = 20


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


def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    try:
        import pandas as pd

        return value is pd.NaT or (not isinstance(value, (str, dict, list)) and bool(pd.isna(value)))
    except (TypeError, ValueError):
        return False


def _clean(raw: dict[str, Any]) -> dict[str, Any]:
    """Map a file row to remember_batch's item fields (missing cells become absent)."""
    item: dict[str, Any] = {}
    for key, value in raw.items():
        if _missing(value) or (isinstance(value, str) and value == "" and key != "content"):
            continue
        if key == "metadata" and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise errors.InvalidInput(f"metadata is not valid JSON: {exc.msg}") from None
        if key == "occurred_at" and hasattr(value, "to_pydatetime"):
            value = value.to_pydatetime()
        if key == "occurred_at" and not isinstance(value, datetime | str):
            raise errors.InvalidInput("occurred_at must be an ISO-8601 timestamp")
        if key in ("kind", "idempotency_key", "content") and not isinstance(value, str):
            value = str(value)
        item[key] = value
    return item


def _rows(path: Path, format: str) -> Iterator[tuple[str, dict[str, Any] | Exception]]:
    """(where, row) pairs; where names the line (JSONL/CSV) or row (Parquet)."""
    if format == "jsonl":
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield f"line {number}", errors.InvalidInput(f"not valid JSON: {exc.msg}")
                    continue
                if not isinstance(row, dict):
                    yield f"line {number}", errors.InvalidInput("each line must be a JSON object")
                    continue
                yield f"line {number}", row
        return
    import pandas as pd

    if format == "csv":
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        first, label = 2, "line"  # line 1 is the header
    else:
        frame = pd.read_parquet(path)
        first, label = 1, "row"
    unknown = set(frame.columns) - set(FIELDS)
    if unknown:
        raise errors.InvalidInput(f"unknown column(s) {', '.join(sorted(map(str, unknown)))}; expected {FIELDS}")
    if "content" not in frame.columns:
        raise errors.InvalidInput("the file has no 'content' column")
    for offset, record in enumerate(frame.to_dict(orient="records")):
        yield f"{label} {first + offset}", record


def read_episodes(store: Store, path: str | Path, *, format: str | None = None) -> list[dict[str, Any]]:
    """Read and validate every row of an episode file; raise listing every bad line."""
    file = Path(path)
    kind = _format(file, format)
    if not file.is_file():
        raise errors.InvalidInput(f"no such file: {file}")
    items: list[dict[str, Any]] = []
    problems: list[str] = []
    keys: dict[str, tuple[str, str]] = {}
    for where, row in _rows(file, kind):
        try:
            if isinstance(row, Exception):
                raise row
            item = _clean(row)
            prepared = episodes.prepare(store, item)
            key = prepared["idempotency_key"]
            if key is not None:
                if key in keys and keys[key][1] != prepared["content"]:
                    raise errors.Conflict(f"idempotency_key {key!r} is also used on {keys[key][0]} with other content")
                keys.setdefault(key, (where, prepared["content"]))
            items.append(item)
        except (errors.InvalidInput, errors.Conflict) as exc:
            problems.append(f"{where}: {exc.message}")
    if problems:
        more = f"\n  …and {len(problems) - MAX_REPORTED} more" if len(problems) > MAX_REPORTED else ""
        raise errors.InvalidInput(
            f"{len(problems)} invalid row(s) in {file.name}; nothing was imported:\n  "
            + "\n  ".join(problems[:MAX_REPORTED])
            + more
        )
    if not items:
        raise errors.InvalidInput(f"{file.name} holds no episodes")
    return items


def import_episodes(
    store: Store,
    namespace: str,
    path: str | Path,
    *,
    format: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Import episodes from a JSONL/CSV/Parquet file into one namespace, validated up front."""
    slug = v.slug(namespace)
    with store.db.transaction() as tx:
        ns.resolve_id(tx, slug)
    items = read_episodes(store, path, format=format)
    created = replayed = batches = 0
    for start in range(0, len(items), BATCH_SIZE):
        results = episodes.remember_batch(store, slug, items[start : start + BATCH_SIZE])
        batches += 1
        created += sum(1 for r in results if r["created"])
        replayed += sum(1 for r in results if not r["created"])
        if progress is not None:
            progress(start + len(results), len(items))
    return {"namespace": slug, "rows": len(items), "created": created, "replayed": replayed, "batches": batches}
