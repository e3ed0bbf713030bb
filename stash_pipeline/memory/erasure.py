"""Erasure: a purge deletes a record and everything derived from it, wherever it lives.

A derived row quotes, gathers or summarises its sources, so withdrawing it would keep
the purged words readable (``get_fact``, ``include_history``, ``known_at`` reads, export).
The rule: purging records erases them and every row whose lineage leads back to them,
transitively and in any namespace, whatever other sources it also had. With each row go
its end history, its lineage edges, its dead letters, its cached vector and the lexemes
only it held; an entity nothing names any more goes too. Facts are retired before they
are deleted, so what gathers them reacts as to any retirement: an entity whose profile
was erased is asked for again and the next run gathers what remains. The closure is
locked before it is erased, and ``lineage.add`` locks a new row's parents, so a purge
and a derivation in flight cannot miss each other.

Which table holds a kind, and which of its columns is embedded, comes from the table
catalog: a new derived table is covered by its catalog entry and lineage.

A preview (``episodes.purge_preview`` and its kin) runs the real purge inside a savepoint
and rolls it back (``rehearse``), then reads the rows it erased (``preview``): it names
exactly what the purge would take, and changes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

import psycopg

from stash_pipeline.db import catalog
from stash_pipeline.db.gateway import Session
from stash_pipeline.db.sql import named
from stash_pipeline.memory import timeline
from stash_pipeline.models import ErasedRow, Erasure, ErasurePreview
from stash_pipeline.store import Store


@dataclass(frozen=True)
class Erased:
    """What ``erase_rows`` deleted: the report, and the ids of the rows in the scope by kind:
    the roots, the closure, the entities left nameless and the dead letters of the erased."""

    report: Erasure
    rows: dict[str, list[int]]


def erase(
    tx: Session, store: Store, roots: Iterable[tuple[str, int]], *, scope: set[int] | None = None
) -> Erasure:
    """Delete ``roots`` and everything derived from them; returns what went.

    The report names and counts only rows in ``scope`` (namespace ids; None: all) and
    leaves the roots out of ``erased_fact_ids``: rows outside the caller's trees are
    erased without a word about them.
    """
    return erase_rows(tx, store, roots, scope=scope).report


def erase_rows(
    tx: Session, store: Store, roots: Iterable[tuple[str, int]], *, scope: set[int] | None = None
) -> Erased:
    """``erase``, also answering the ids it erased by kind (those in ``scope``)."""
    root_set = {(kind, int(ident)) for kind, ident in roots}
    if not root_set:
        return Erased(Erasure(), {})
    by_kind = _locked_closure(tx, root_set)
    shown: dict[str, list[int]] = {}
    texts: list[str] = []
    namespaces: set[int] = set()
    for kind, ids in by_kind.items():
        table = catalog.BY_KIND[kind]
        found = tx.conn.execute(named("erasure_rows", table=table.name), {"ids": ids}).fetchall()
        namespaces.update(int(r["namespace_id"]) for r in found)
        shown[kind] = sorted(int(r["id"]) for r in found if scope is None or int(r["namespace_id"]) in scope)
        if table.embedded:
            texts += [r["text"] for r in tx.conn.execute(
                named("erasure_texts", table=table.name, text=table.embedded), {"ids": ids})]
    entities = _entities_of(tx, by_kind)
    fact_ids = by_kind.get("fact", [])
    if fact_ids:
        tx.execute("erasure_retire_facts", ids=fact_ids)
        timeline.gone(tx, store.settings, fact_ids)
    # dependents first: a relationship or link on an erased fact would go by foreign key
    # anyway, but deleting leaves-first keeps every statement's row count its own
    for kind in sorted(by_kind, key=_delete_order):
        tx.conn.execute(named("erasure_delete", table=catalog.BY_KIND[kind].name), {"ids": by_kind[kind]})
    if fact_ids:
        tx.execute("erasure_forget_history", ids=fact_ids)
    kinds = [k for k, ids in by_kind.items() for _ in ids]
    ids = [i for ids in by_kind.values() for i in ids]
    tx.execute("erasure_delete_edges", kinds=kinds, ids=ids)
    letters = [int(r["id"]) for r in tx.all("erasure_delete_dead_letters", kinds=kinds, ids=ids)
               if scope is None or int(r["namespace_id"]) in scope]
    for row in tx.all("erasure_orphan_entities", ids=sorted(entities)):
        texts.append(row["text"])
        if scope is None or int(row["namespace_id"]) in scope:
            shown.setdefault("entity", []).append(int(row["id"]))
    store.embedder.forget_texts(tx, [t for t in texts if t])
    tx.execute("erasure_forget_lexemes", ids=sorted(namespaces))
    root_facts = {i for k, i in root_set if k == "fact"}
    report = Erasure(
        erased_fact_ids=[i for i in shown.get("fact", []) if i not in root_facts],
        erased={kind: len(ids) for kind, ids in sorted(shown.items()) if ids},
    )
    rows = {kind: sorted(set(ids)) for kind, ids in sorted(shown.items()) if ids}
    return Erased(report, {**rows, "dead_letter": sorted(letters)} if letters else rows)


def _locked_closure(tx: Session, roots: set[tuple[str, int]]) -> dict[str, list[int]]:
    """The closure of ``roots``, every row of it locked: locking stops new children (see
    ``lineage.add``), and one written before the lock shows in the next read, so read and
    lock again until the closure stays the same."""
    locked: set[tuple[str, int]] = set()
    while True:
        found = {(r["kind"], int(r["id"])) for r in tx.all(
            "erasure_closure", kinds=[k for k, _ in roots], ids=[i for _, i in roots])}
        if found <= locked:
            break
        by_kind: dict[str, list[int]] = defaultdict(list)
        for kind, ident in sorted(found - locked):
            by_kind[kind].append(ident)
        for kind in sorted(by_kind):
            tx.conn.execute(named("erasure_lock", table=catalog.BY_KIND[kind].name), {"ids": by_kind[kind]})
        locked |= found
    out: dict[str, list[int]] = defaultdict(list)
    for kind, ident in sorted(found):
        out[kind].append(ident)
    return out


def erase_trees(tx: Session, store: Store, namespace_ids: list[int]) -> Erasure:
    """Before namespaces are deleted: erase what rows outside them derived from their rows,
    and forget the cached vectors of their texts (the rows themselves go with the namespaces)."""
    roots: list[tuple[str, int]] = []
    texts: list[str] = []
    for table in catalog.TABLES:
        if table.lineage:
            found = tx.conn.execute(named("erasure_tree_roots", table=table.name),
                                    {"ids": namespace_ids, "kind": table.kind})
            roots += [(table.kind, int(r["id"])) for r in found]
        if table.embedded:
            texts += [r["text"] for r in tx.conn.execute(
                named("erasure_tree_texts", table=table.name, text=table.embedded), {"ids": namespace_ids})]
    report = erase(tx, store, roots, scope=set(namespace_ids))
    store.embedder.forget_texts(tx, [t for t in texts if t])
    return report


# --- previews: the purge run and rolled back ----------------------------------------------

T = TypeVar("T")

#: how many rows of each kind a preview shows with their text (all of them are counted)
PREVIEW_ROWS = 50
#: the longest text a preview shows of one row
PREVIEW_TEXT = 300
#: the columns a preview shows of a row, by kind (joined by " · "); a kind not listed
#: shows its embedded text, else its first text column
LABELS = {
    "entity": "name",
    "entity_correction": "action reason",
    "relationship": "from_entity relation_type to_entity",
    "contradiction": "entity property old_value new_value",
    "hypothesis_evidence": "verdict reasoning",
    "dead_letter": "stage last_error",
}


def rehearse(tx: Session, work: Callable[[], T]) -> T:
    """``work()`` inside a savepoint that is then rolled back: its answer, none of its
    changes (the row locks it took go with them). A preview runs the real purge this way,
    so it names exactly what the purge erases."""
    answers: list[T] = []
    with tx.conn.transaction() as savepoint:
        answers.append(work())
        raise psycopg.Rollback(savepoint)
    return answers[0]


def preview(
    tx: Session, root: tuple[str, int], erased: dict[str, list[int]], scope: set[int] | None
) -> ErasurePreview:
    """The preview of purging ``root``, from the ids a rehearsed purge ``erased`` by kind:
    every id in ``scope`` (namespace ids; None: all) and, for the first ``PREVIEW_ROWS`` of
    each kind, the row's text; with them the rows a foreign key deletes (a relationship on an
    erased fact…). Read after the rollback, so the rows are there to read."""
    kind, ident = root[0], int(root[1])
    wanted: dict[str, set[int]] = defaultdict(set)
    for k, v in erased.items():
        wanted[k].update(v)
    wanted[kind].add(ident)
    for r in tx.all("erasure_preview_dependents", fact_ids=sorted(wanted["fact"]), entity_ids=sorted(wanted["entity"])):
        wanted[r["kind"]].add(int(r["id"]))
    ids: dict[str, list[int]] = {}
    rows: dict[str, list[ErasedRow]] = {}
    for k in sorted((k for k in wanted if wanted[k]), key=_delete_order, reverse=True):
        table = catalog.BY_KIND[k]
        found = tx.conn.execute(named("erasure_rows", table=table.name), {"ids": sorted(wanted[k])}).fetchall()
        inside = sorted(int(r["id"]) for r in found if scope is None or int(r["namespace_id"]) in scope)
        if inside:
            ids[k] = inside
            rows[k] = _described(tx, k, inside[:PREVIEW_ROWS])
    record = _described(tx, kind, [ident])
    if not record:
        raise ValueError(f"{kind} {ident} is not there to preview")
    return ErasurePreview(kind=kind, id=ident, namespace=record[0].namespace, record=record[0], ids=ids, rows=rows)


def _described(tx: Session, kind: str, ids: list[int]) -> list[ErasedRow]:
    table = catalog.BY_KIND[kind]
    columns = LABELS.get(kind) or table.embedded or table.text.split(" ")[0]
    if not columns:
        found = tx.conn.execute(named("erasure_preview_ids", table=table.name), {"ids": ids}).fetchall()
        return [ErasedRow(kind=kind, id=int(r["id"]), namespace=r["namespace"], text="") for r in found]
    found = tx.conn.execute(named("erasure_preview_rows", table=table.name, columns=columns), {"ids": ids}).fetchall()
    out = []
    for r in found:
        text = " · ".join(str(r[c]) for c in columns.split() if r[c] not in (None, ""))
        if len(text) > PREVIEW_TEXT:
            text = text[: PREVIEW_TEXT - 1] + "…"
        out.append(ErasedRow(kind=kind, id=int(r["id"]), namespace=r["namespace"], text=text))
    return out


def _entities_of(tx: Session, by_kind: dict[str, list[int]]) -> set[int]:
    rows = tx.all("erasure_entities_of", fact_ids=by_kind.get("fact", []),
                  relationship_ids=by_kind.get("relationship", []))
    return {int(r["id"]) for r in rows}


def _delete_order(kind: str) -> int:
    """Tables later in the catalog may point at earlier ones: delete them first."""
    return -[t.kind for t in catalog.TABLES].index(kind)
