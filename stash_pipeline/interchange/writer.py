"""The one writer every import goes through: a JSONL tree, a Parquet/CSV table export and a
Go Stash database are only readers that hand it catalog rows.

For every row it does what the live write path does before writing: text within the
content cap and free of NUL bytes, JSON within the metadata cap, an episode's kind as
``validate.kind`` checks it, timestamps with a zone and inside the supported range,
namespace paths valid (length included) with every ancestor created. Rows from an export
get fresh ids and every reference is rewritten to them; each reference must then land
where the live tools would let it point (``catalog.Ref.scope``): a nullable one that does
not is dropped, any other refuses the row. Every refusal and drop is reported per table
and row (``errors.BadRow``), and with ``stop`` the first one ends the import (nothing is
written: it is one transaction). Rows are written a chunk at a time, one ``INSERT …
SELECT`` per table and chunk (``write_rows``), vectors in binary.
"""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Any

import numpy as np
from psycopg.types.json import Jsonb

from stash_pipeline import errors
from stash_pipeline.db import catalog
from stash_pipeline.db.catalog import Table
from stash_pipeline.db.gateway import Session
from stash_pipeline.db.sql import named
from stash_pipeline.memory import validate
from stash_pipeline.memory.scope import is_ancestor_or_self, on_one_line
from stash_pipeline.store import Store

Row = dict[str, Any]
#: how many one-line problems a report keeps (the counts per reason are always complete)
MAX_PROBLEMS = 100


def json_dumps(value: Any) -> str:
    return json.dumps(value, default=lambda v: v.isoformat() if isinstance(v, datetime | date) else str(v))


def vector_text(vector: Any) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def vector_array(vector: Any) -> np.ndarray:
    """A vector as float32 (sent in binary); text such as '[0.1,0.2]' is parsed."""
    try:
        if isinstance(vector, str):
            text = vector.strip().removeprefix("[").removesuffix("]")
            return np.array([float(x) for x in text.split(",")] if text.strip() else [], dtype=np.float32)
        return np.asarray(vector, dtype=np.float32)
    except (TypeError, ValueError):
        raise errors.InvalidInput("an embedding is not a list of numbers") from None


def reroot(slug: str, root: str, into: str) -> str:
    """``slug`` (below ``root``) moved under ``into``."""
    relative = "" if slug == root else (slug if root == "/" else slug[len(root):])
    return ((into if into != "/" else "") + relative) or "/"


def vector_length(vector: Any) -> int:
    """Dimensions of a vector, a list or pgvector text ("[0.1,0.2]")."""
    if isinstance(vector, str):
        return vector.count(",") + 1 if vector.strip("[] ") else 0
    return 0 if vector is None else len(vector)


def _within(scope: str, row_slug: str, target_slug: str) -> bool:
    if scope == "same":
        return row_slug == target_slug
    if scope == "ancestor":
        return is_ancestor_or_self(target_slug, row_slug)
    if scope == "tree":
        return is_ancestor_or_self(row_slug, target_slug)
    return on_one_line(row_slug, target_slug)


class Writer:
    """One import: the id maps, where every new row lives, the report."""

    def __init__(self, store: Store, tx: Session, *, stop: bool = False, dry_run: bool = False,
                 root: str = "/", into: str = "/") -> None:
        self.store, self.tx, self.stop, self.dry_run, self.root, self.into = store, tx, stop, dry_run, root, into
        self.vectors = {"reused": 0, "recomputed": 0}
        self.settings = store.settings
        self.ids: dict[str, dict[int, int]] = {t.kind: {} for t in catalog.TABLES}
        #: kind -> new id -> its namespace id; namespace id -> slug
        self.where: dict[str, dict[int, int]] = {t.kind: {} for t in catalog.TABLES}
        self.slugs: dict[int, str | None] = {}
        self.counts: dict[str, int] = {}
        self.skipped: dict[str, dict[str, int]] = {}
        self.problems: list[str] = []
        self._pending: list[tuple[Table, str, list[tuple[int, int]]]] = []

    # -- report -------------------------------------------------------------------------
    def report(self, problem: errors.BadRow, *, dropped: bool = False) -> None:
        """Count one refused row (or dropped reference); with ``stop``, end the import."""
        if self.stop:
            raise problem
        self.skip(problem.details["table"], ("dropped: " if dropped else "") + problem.why)
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(problem.message + (" (reference dropped)" if dropped else ""))

    def skip(self, table: str, why: str) -> None:
        """Count a row not imported for a reason that is no fault of the row (already present)."""
        skipped = self.skipped.setdefault(table, {})
        skipped[why] = skipped.get(why, 0) + 1

    def count(self, table: str) -> None:
        """Count a row written."""
        self.counts[table] = self.counts.get(table, 0) + 1

    def result(self) -> dict[str, Any]:
        return {"rows": self.counts, "skipped": self.skipped, "problems": self.problems}

    # -- namespaces ---------------------------------------------------------------------
    def ensure_ancestors(self, slug: str) -> None:
        parts = slug.strip("/").split("/") if slug != "/" else []
        for i in range(1, len(parts)):
            self.tx.execute("ensure_namespace", slug="/" + "/".join(parts[:i]))

    def namespace(self, where: str, row: Row) -> Row | None:
        """Create (or find) the namespace of an exported (or Go) one, moved from ``root`` to
        ``into``; its id, or None when it is refused."""
        column = "slug"
        try:
            old = validate.slug(row.get("slug"))
            if not is_ancestor_or_self(self.root, old):  # by segment: '/exp-prod' is not below '/exp'
                raise errors.InvalidInput(f"its path is not under the export's root {self.root}")
            slug = validate.slug(reroot(old, self.root, self.into))
            for column in ("name", "description"):
                validate.optional_text(self.settings, row.get(column), column)
        except errors.InvalidInput as exc:
            self.report(errors.BadRow("namespaces", where, column, exc.message))
            return None
        self.ensure_ancestors(slug)
        new = int(self.tx.scalar("interchange_import_namespace", slug=slug, row=Jsonb(row, dumps=json_dumps)))
        self.note("namespace", row.get("id"), new, new, slug)
        self.count("namespaces")
        return {"id": new}

    def note(self, kind: str, old: Any, new: int, namespace_id: int, slug: str | None = None) -> None:
        """Remember a written row: its new id (under its old one) and where it lives."""
        if old is not None:
            self.ids.setdefault(kind, {})[int(old)] = new
        self.where.setdefault(kind, {})[new] = namespace_id
        if slug is not None:
            self.slugs[new] = slug

    # -- rows ---------------------------------------------------------------------------
    def _validate(self, table: Table, where: str, row: Row) -> None:
        kinds, known, derived = table.kinds, table.columns, catalog.DERIVED.get(table.name, set())
        for column in list(row):
            value = row[column]
            kind = kinds.get(column)
            if column in derived:
                del row[column]  # the database computes it (an export leaves it out)
                continue
            try:
                if kind == "name" and value in (None, ""):
                    del row[column]  # the column's default, as the live path gives a missing kind
                    continue
                if value is None:
                    continue
                if kind == "name":
                    row[column] = validate.kind(value)
                elif kind == "content":
                    validate.content(self.settings, value, column)
                elif kind == "text":
                    validate.optional_text(self.settings, str(value), column)
                elif kind == "json":
                    value = json.loads(value) if isinstance(value, str) else value
                    row[column] = value
                    if isinstance(value, dict):
                        validate.metadata(value, self.settings)
                    else:
                        validate.optional_text(self.settings, json_dumps(value), column)
                elif kind == "time":
                    row[column] = validate.timestamp(value, column)
                elif column not in known:
                    raise errors.InvalidInput("is not a column of this table")
            except (errors.InvalidInput, ValueError, TypeError) as exc:
                why = exc.message if isinstance(exc, errors.StashError) else "is not valid JSON"
                raise errors.BadRow(table.name, where, column, why.removeprefix(column).strip() or why) from None
        for column, sources in catalog.FILLED.get(table.name, {}).items():
            if column not in row:
                row[column] = next((row[s] for s in sources if row.get(s) is not None), None)

    def namespace_of(self, kind: str, new: int) -> int | None:
        """The namespace of a row written by this import (or, for a Go migration, by an earlier run)."""
        found = self.where[kind].get(new)
        if found is None:  # ids hold only rows this import wrote and (Go) rows of earlier runs
            table = catalog.BY_KIND[kind].name
            row = self.tx.conn.execute(named("interchange_namespace_of", table=table), {"id": new}).fetchone()
            if row is not None:
                found = self.where[kind][new] = int(row["namespace_id"])
        return found

    def path_of(self, namespace_id: int | None) -> str | None:
        """A namespace's path (looked up once)."""
        if namespace_id is not None and namespace_id not in self.slugs:  # None: no such namespace
            self.slugs[namespace_id] = self.tx.scalar("interchange_namespace_slug", id=namespace_id)
        return None if namespace_id is None else self.slugs[namespace_id]

    def _id(self, table: Table, where: str, column: str, value: Any) -> int:
        if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and value.isdigit())):
            raise errors.BadRow(table.name, where, column, "is not an id")
        return int(value)

    def _references(self, table: Table, where: str, row: Row) -> None:
        if table.has_id and "id" in row:
            self._id(table, where, "id", row["id"])
        ns = row.get("namespace_id")
        if ns is not None:
            ns = self.ids["namespace"].get(self._id(table, where, "namespace_id", ns))
            if ns is None or self.path_of(ns) is None:
                raise errors.BadRow(table.name, where, "namespace_id", "its namespace is not in the import")
            row["namespace_id"] = ns
        for column, ref in table.refs.items():
            old = row.get(column)
            if old is None:
                continue
            kind = row.get(ref.kind_column) if ref.kind_column else ref.kind
            if ref.kind_column and kind not in self.ids:
                raise errors.BadRow(table.name, where, ref.kind_column, "names no known kind")
            old = self._id(table, where, column, old)
            if ref.deferred:
                continue  # resolved and checked by finish(), once the whole table is in
            new = self.ids[kind].get(old)
            why = self._outside(ref, kind, new, ns)
            if why is not None:
                problem = errors.BadRow(table.name, where, column, why)
                if not ref.nullable:
                    raise problem
                self.report(problem, dropped=True)
                new = None
            row[column] = new

    def _outside(self, ref: catalog.Ref, kind: str, new: int | None, ns: int | None) -> str | None:
        """Why a reference may not be written as is, or None."""
        if new is None:
            return "points outside the import"
        target = self.namespace_of(kind, new)
        if target is None:
            return "points outside the import"
        row_slug, target_slug = self.path_of(ns), self.path_of(target)
        if row_slug is None or target_slug is None or not _within(ref.scope, row_slug, target_slug):
            return f"points into another namespace (allowed: {ref.scope})"
        return None

    def vectors_for(self, texts: list[str]) -> list[Any]:
        """New vectors for ``texts`` (zeros in a dry run, which is rolled back: it stays fast)."""
        if self.dry_run:
            return [[0.0] * self.settings.vector_dim for _ in texts]
        return list(self.store.embedder.embed(texts)) if texts else []

    def embed(self, table: Table, rows: list[Row], reuse: bool) -> None:
        """Give embedded rows a vector: their own when ``reuse`` and it is of this deployment's
        model and dimension, else a new one."""
        if table.embedded is None or not rows:
            return
        model, dim = self.settings.embedding_model_name, self.settings.vector_dim
        todo = [r for r in rows if not (reuse and r.get("embedding_model") == model
                                        and vector_length(r.get("embedding")) == dim)]
        self.vectors["reused"] += len(rows) - len(todo)
        self.vectors["recomputed"] += len(todo)
        for row, vector in zip(todo, self.vectors_for([r[table.embedded] for r in todo]), strict=True):
            row["embedding"], row["embedding_model"] = vector, model

    def write_rows(self, table: str, rows: list[Row]) -> list[Row | None]:
        """Write checked rows into ``table``, one statement per set of rows with the same
        columns (a chunk is usually one); per row, its new id and namespace_id, or None
        when a unique key already held it."""
        groups: dict[tuple[str, ...], list[int]] = {}
        for position, row in enumerate(rows):
            groups.setdefault(tuple(row), []).append(position)
        out: list[Row | None] = [None] * len(rows)
        for columns, positions in groups.items():
            group, vectors = [rows[p] for p in positions], None
            if "embedding" in columns and all(r["embedding"] is not None for r in group):
                vectors = [vector_array(r["embedding"]) for r in group]
                group = [{k: v for k, v in r.items() if k != "embedding"} for r in group]
            written = self.tx.all("interchange_insert_set", table=table, vectors=vectors,
                                  rows=Jsonb(group, dumps=json_dumps))
            for result in written:
                out[positions[int(result["n"]) - 1]] = result["inserted"]
        return out

    def rows(self, table: Table, batch: list[tuple[str, Row]], *, reuse_vectors: bool = False) -> list[Row | None]:
        """Check, embed and insert a chunk of (where, row) of one table; per row, its new id
        (and namespace_id), or None when it was refused or a unique key already held it."""
        if table.name == "namespaces":
            return [self.namespace(where, row) for where, row in batch]
        ready: list[tuple[int, Row, Row]] = []  # (position in the batch, the row as given, checked)
        for position, (where, row) in enumerate(batch):
            original = dict(row)
            try:  # validated and re-ided in place
                self._validate(table, where, row)
                self._references(table, where, row)
            except errors.BadRow as exc:
                self.report(exc)
                continue
            row.pop("id", None)
            ready.append((position, original, row | dict.fromkeys(table.deferred)))
        self.embed(table, [r for _, _, r in ready], reuse_vectors)
        out: list[Row | None] = [None] * len(batch)
        try:
            written = self.write_rows(table.name, [r for _, _, r in ready])
        except (errors.InvalidInput, errors.RecordNotFound) as exc:  # the database's message quotes the row
            first, last = batch[ready[0][0]][0], batch[ready[-1][0]][0]
            raise errors.BadRow(table.name, first if first == last else f"{first} to {last}",
                                getattr(getattr(exc.__cause__, "diag", None), "column_name", None),
                                "breaks a rule of the table (a row of these)") from None
        for (position, original, _), inserted in zip(ready, written, strict=True):
            out[position] = inserted
            if inserted is None:
                self.skip(table.name, "already present (a unique key matched)")
                continue
            self.count(table.name)
            if "id" in inserted:
                self.note(table.kind, original.get("id"), int(inserted["id"]), int(inserted["namespace_id"]))
        pairs = [(original, new) for (_, original, _), new in zip(ready, written, strict=True) if new]
        for column in table.deferred:  # filled in by finish(), once the whole table is in
            self.defer(table, column, [(int(new["id"]), int(original[column]))
                                       for original, new in pairs if original.get(column) is not None])
        return out

    def defer(self, table: Table, column: str, pairs: list[tuple[int, int]]) -> None:
        """Queue self-references (new row id, referenced old id) for ``finish``."""
        if pairs:
            self._pending.append((table, column, pairs))

    def finish(self) -> None:
        """Fill in self-references once every row of their table has its new id, scope checked."""
        self.tx.execute("interchange_importing")  # filling them in is no change of an end to keep
        for table, column, pairs in self._pending:
            ref = table.refs[column]
            mapped = []
            for new, old in pairs:
                target = self.ids[ref.kind].get(old)
                why = self._outside(ref, ref.kind, target, self.namespace_of(table.kind, new))
                if why is not None:
                    self.report(errors.BadRow(table.name, f"row id {new}", column, why), dropped=True)
                    target = None
                mapped.append({"id": new, "ref": target})
            self.tx.conn.execute(named("interchange_defer", table=table.name, column=column),
                                 {"pairs": Jsonb(mapped)})
        self._pending = []
