"""Data interchange: import episodes from JSONL, CSV or Parquet files; export a namespace
tree to JSONL and import it back losslessly.

Each row carries ``content`` and optionally ``occurred_at`` (ISO-8601 with a time zone),
``kind``, ``metadata`` (a JSON object; a JSON string in CSV) and ``idempotency_key``.
The whole file is read and validated first: if any row is bad, the error lists the
offending line numbers and nothing is written. Valid files go in batches of
``BATCH_SIZE`` through ``episodes.remember_batch`` (each batch one transaction, one
embedding call). Rows with an ``idempotency_key`` make a re-import after a crash safe:
already-imported rows are reported as replays, not duplicated.

``export_tree`` writes every row of a namespace tree (namespaces, episodes, entities with
their aliases and corrections, facts, lineage, relationships, causal links, patterns, contradictions, hypotheses and their
evidence, goals and notes, failures, contexts) as one JSON object per line, without
vectors. ``import_tree`` reads such a file in ONE transaction, optionally re-rooted under
another namespace: rows get fresh ids, every reference (lineage, superseded_by, source
fact, the entity of a fact or relationship end, …) is remapped, and episodes, facts and
entity names are re-embedded with the configured model.
Importing the same file twice duplicates rows (or hits idempotency keys → Conflict).
"""

from __future__ import annotations

import json
import math
import stat
from collections.abc import Callable, Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

from psycopg.types.json import Jsonb

from stash_pipeline import errors
from stash_pipeline.memory import episodes, validate
from stash_pipeline.memory.namespaces import resolve_id, resolve_trees
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


def regular_file(path: str | Path) -> Path:
    """``path`` if it names an existing regular file, else InvalidInput naming the path.

    Devices, FIFOs and sockets are refused before anything reads them: ``/dev/zero`` has
    no end and a FIFO may never deliver one.
    """
    file = Path(path)
    try:
        mode = file.stat().st_mode
    except FileNotFoundError:
        raise errors.InvalidInput(f"no such file: {file}") from None
    except OSError as exc:
        raise errors.InvalidInput(f"cannot read {file}: {exc.strerror or type(exc).__name__}") from None
    if not stat.S_ISREG(mode):
        raise errors.InvalidInput(f"{file} is not a regular file (a device, FIFO or directory cannot be imported)")
    return file


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
    unknown = [number for number, column in enumerate(frame.columns, start=1) if column not in FIELDS]
    if unknown:
        # positions, not names: the header is the file's content (say, a secret's first line)
        raise errors.InvalidInput(
            f"unknown column(s) at position {', '.join(map(str, unknown[:MAX_REPORTED]))} of the header; "
            f"expected {', '.join(FIELDS)}"
        )
    if "content" not in frame.columns:
        raise errors.InvalidInput("the file has no 'content' column")
    for offset, record in enumerate(frame.to_dict(orient="records")):
        yield f"{label} {first + offset}", record


def _read_rows(file: Path, kind: str) -> Iterator[tuple[str, dict[str, Any] | Exception]]:
    """``_rows`` with reading failures as InvalidInput that names the file, never its bytes."""
    try:
        yield from _rows(file, kind)
    except UnicodeDecodeError:
        raise errors.InvalidInput(f"{file.name} is not UTF-8 text") from None
    except OSError as exc:
        raise errors.InvalidInput(f"cannot read {file}: {exc.strerror or type(exc).__name__}") from None
    except (ValueError, ImportError) as exc:
        if isinstance(exc, errors.StashError):
            raise
        # the CSV / Parquet reader's messages may quote the file; say only what failed
        raise errors.InvalidInput(f"{file.name} is not a readable {kind} file ({type(exc).__name__})") from None


def read_episodes(store: Store, path: str | Path, *, format: str | None = None) -> list[dict[str, Any]]:
    """Read and validate every row of an episode file; raise listing every bad line."""
    file = regular_file(path)
    kind = _format(file, format)
    items: list[dict[str, Any]] = []
    problems: list[str] = []
    keys: dict[str, tuple[str, str]] = {}
    for where, row in _read_rows(file, kind):
        try:
            if isinstance(row, Exception):
                raise row
            item = _clean(row)
            prepared = episodes.prepare(store, item)
            key = prepared["idempotency_key"]
            if key is not None:
                if key in keys and keys[key][1] != prepared["content"]:
                    raise errors.Conflict(f"its idempotency_key is also used on {keys[key][0]} with other content")
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
    slug = validate.slug(namespace)
    with store.db.transaction() as tx:
        resolve_id(tx, slug)
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


# --- namespace tree export / import ------------------------------------------------------

EXPORT_FORMAT = "stash-tree"
EXPORT_VERSION = 1
#: which id space a field refers to, per row type ("namespace" ids are remapped too)
REFERENCES: dict[str, dict[str, str]] = {
    "episode": {},
    "goal": {"parent_id": "goal"},
    "failure": {"goal_id": "goal"},
    "entity": {},  # merged_into is set after all entities exist
    "entity_alias": {"entity_id": "entity"},
    "entity_correction": {"entity_id": "entity", "other_entity_id": "entity"},
    "fact": {},  # superseded_by is set after all facts exist; entity_id once the fact is in (ENTITY_LINKS)
    "relationship": {"source_fact_id": "fact"},
    "causal_link": {"cause_fact_id": "fact", "effect_fact_id": "fact", "effect_failure_id": "failure"},
    "pattern": {},
    "contradiction": {"old_fact_id": "fact", "new_fact_id": "fact"},
    "hypothesis": {"confirmed_fact_id": "fact"},
    "hypothesis_evidence": {"hypothesis_id": "hypothesis", "fact_id": "fact"},
    "goal_note": {"goal_id": "goal", "fact_id": "fact"},
    "context": {},
}
IMPORT_QUERIES = {
    "episode": "interchange_import_episode",
    "goal": "interchange_import_goal",
    "failure": "interchange_import_failure",
    "entity": "interchange_import_entity",
    "entity_alias": "interchange_import_entity_alias",
    "entity_correction": "interchange_import_entity_correction",
    "fact": "interchange_import_fact",
    "relationship": "interchange_import_relationship",
    "causal_link": "interchange_import_causal_link",
    "pattern": "interchange_import_pattern",
    "contradiction": "interchange_import_contradiction",
    "hypothesis": "interchange_import_hypothesis",
    "hypothesis_evidence": "interchange_import_hypothesis_evidence",
    "goal_note": "interchange_import_goal_note",
    "context": "interchange_import_context",
    "lineage": "interchange_import_lineage",
}
#: entity references of facts and relationship ends, written after the row with the link queries
ENTITY_LINKS = {"fact": ("entity_id",), "relationship": ("from_entity_id", "to_entity_id")}
#: rows with a text whose vector is recomputed on import, and that text
EMBEDDED = {"episode": "content", "fact": "content", "entity": "normalised"}
#: references that may point outside the exported tree and then become null
NULLABLE = {
    ("goal", "parent_id"), ("failure", "goal_id"), ("hypothesis", "confirmed_fact_id"),
    ("hypothesis_evidence", "fact_id"), ("goal_note", "fact_id"),
}


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def export_tree(store: Store, namespace: str, path: str | Path) -> dict[str, Any]:
    """Write every row of a namespace tree to a JSONL file (no vectors); returns counts per type."""
    root = validate.slug(namespace)
    file = Path(path)
    if not file.parent.is_dir():
        raise errors.InvalidInput(f"cannot write {file}: the directory {file.parent} does not exist")
    counts: dict[str, int] = {}
    with store.db.transaction() as tx:
        tx.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")  # one consistent snapshot
        ids = list(resolve_trees(tx, root))
        rows = tx.all("interchange_export_tree", ids=ids)
    try:
        handle = file.open("w", encoding="utf-8")
    except OSError as exc:
        raise errors.InvalidInput(f"cannot write {file}: {exc.strerror or type(exc).__name__}") from None
    with handle:
        header = {"type": EXPORT_FORMAT, "version": EXPORT_VERSION, "root": root,
                  "embedding_model": store.settings.embedding_model_name}
        handle.write(json.dumps(header) + "\n")
        for row in rows:
            handle.write(json.dumps({"type": row["type"], "row": row["row"]}, default=_json_default) + "\n")
            counts[row["type"]] = counts.get(row["type"], 0) + 1
    return {"namespace": root, "path": str(file), "rows": counts}


def _reroot(slug: str, root: str, into: str) -> str:
    relative = slug[len(root):] if root != "/" else ("" if slug == "/" else slug)
    base = "" if into == "/" else into
    return (base + relative) or "/"


def import_tree(store: Store, path: str | Path, *, into: str | None = None) -> dict[str, Any]:
    """Import an ``export_tree`` file in one transaction (optionally under ``into``); returns counts."""
    file = regular_file(path)
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise errors.InvalidInput(f"{file.name} is not UTF-8 text") from None
    lines = [line for line in text.splitlines() if line.strip()]
    try:
        header = json.loads(lines[0]) if lines else {}
        records = [json.loads(line) for line in lines[1:]]
    except json.JSONDecodeError as exc:
        raise errors.InvalidInput(f"{file.name} is not a Stash tree export: {exc.msg}") from None
    if header.get("type") != EXPORT_FORMAT or header.get("version") != EXPORT_VERSION:
        raise errors.InvalidInput(f"{file.name} is not a Stash tree export (version {EXPORT_VERSION})")
    root = validate.slug(header["root"])
    target = validate.slug(into) if into is not None else root
    kinds = set(REFERENCES) | {"namespace", "lineage"}
    bad = sorted({r.get("type") for r in records} - kinds, key=str)
    if bad:
        raise errors.InvalidInput(f"unknown row type(s) in {file.name}: {bad}")
    # embed outside the transaction, in one batched call
    texts = [r["row"][EMBEDDED[r["type"]]] for r in records if r["type"] in EMBEDDED]
    vectors = iter(store.embedder.embed(texts) if texts else [])
    ids: dict[str, dict[int, int]] = {kind: {} for kind in kinds}
    counts: dict[str, int] = {}
    skipped: dict[str, int] = {}
    superseded: list[tuple[int, int]] = []
    merged: list[tuple[int, int]] = []
    with store.db.transaction() as tx:
        parts = target.strip("/").split("/") if target != "/" else []
        for i in range(1, len(parts)):
            tx.execute("ensure_namespace", slug="/" + "/".join(parts[:i]))
        for record in records:
            kind, row = record["type"], dict(record["row"])
            if kind == "namespace":
                slug = _reroot(row["slug"], root, target)
                ids["namespace"][int(row["id"])] = int(tx.scalar("interchange_import_namespace", slug=slug,
                                                                 row=Jsonb(row)))
                counts[kind] = counts.get(kind, 0) + 1
                continue
            if not _remap(kind, row, ids):
                skipped[kind] = skipped.get(kind, 0) + 1
                continue
            params: dict[str, Any] = {"row": Jsonb(row)}
            if kind in EMBEDDED:
                params.update(embedding=next(vectors), embedding_model=store.settings.embedding_model_name)
            new_id = tx.scalar(IMPORT_QUERIES[kind], **params)
            if new_id is None and kind == "entity_alias":  # an alias the namespace already has
                skipped[kind] = skipped.get(kind, 0) + 1
                continue
            if kind == "fact" and record["row"].get("superseded_by") is not None:
                superseded.append((int(new_id), int(record["row"]["superseded_by"])))
            if kind == "entity" and record["row"].get("merged_into") is not None:
                merged.append((int(new_id), int(record["row"]["merged_into"])))
            if kind in ENTITY_LINKS:
                _link_entities(tx, kind, int(new_id), record["row"], ids["entity"])
            if kind not in ("lineage", "context", "entity_alias"):
                ids[kind][int(record["row"]["id"])] = int(new_id)
            counts[kind] = counts.get(kind, 0) + 1
        for new_id, old_target in superseded:
            tx.execute("interchange_set_superseded_by", id=new_id, superseded_by=ids["fact"].get(old_target))
        for new_id, old_target in merged:
            tx.execute("interchange_set_merged_into", id=new_id, merged_into=ids["entity"].get(old_target))
    return {"namespace": target, "rows": counts, "skipped": skipped}


def _link_entities(tx: Any, kind: str, new_id: int, row: dict[str, Any], entity_ids: dict[int, int]) -> None:
    """Point an imported fact or relationship at its imported entities (outside the tree: none)."""
    linked = {field: entity_ids.get(int(row[field])) if row.get(field) is not None else None
              for field in ENTITY_LINKS[kind]}
    if not any(linked.values()):
        return
    if kind == "fact":
        tx.execute("entity_link_fact", id=new_id, entity_id=linked["entity_id"])
    else:
        tx.execute("entity_link_relationship", id=new_id, **linked)


def _remap(kind: str, row: dict[str, Any], ids: dict[str, dict[int, int]]) -> bool:
    """Rewrite a row's references to the new ids; False when a required one is outside the tree."""
    row.pop("id", None)
    if "namespace_id" in row:
        row["namespace_id"] = ids["namespace"].get(int(row["namespace_id"]))
        if row["namespace_id"] is None:
            return False
    if kind == "lineage":
        child = ids.get(row["child_kind"], {}).get(int(row["child_id"]))
        parent = ids.get(row["parent_kind"], {}).get(int(row["parent_id"]))
        if child is None or parent is None:
            return False
        row["child_id"], row["parent_id"] = child, parent
        return True
    if kind == "fact":
        row["superseded_by"] = None
    for field, target in REFERENCES[kind].items():
        old = row.get(field)
        if old is None:
            continue
        new = ids[target].get(int(old))
        if new is None and (kind, field) not in NULLABLE:
            return False
        row[field] = new
    return True
