"""Dead letters: consolidation items that kept failing, for operators to inspect, retry or drop.

A stage records an item here when it fails (invalid model answer, grounding, a
constraint on that item): status ``pending`` is retried first by the next runs; after
``STASH_MAX_ITEM_ATTEMPTS`` it becomes ``dead`` and waits for an operator. ``retry``
puts items back in the queue with a fresh attempt count; ``drop`` gives up on them
(kept as ``dropped`` for the record). Items that later succeed become ``retried``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stash_pipeline import errors
from stash_pipeline.memory import _validate as v
from stash_pipeline.memory import namespaces as ns_ops
from stash_pipeline.stages import get_stage

if TYPE_CHECKING:
    from stash_pipeline.store import Store

STATUSES = ("pending", "dead", "retried", "dropped")


def list_(
    store: Store,
    namespaces: Any = "/",
    *,
    stage: str | None = None,
    status: str | None = None,
    limit: Any = None,
    offset: Any = None,
) -> list[dict[str, Any]]:
    """Dead letters in the given namespace trees, newest first."""
    if stage is not None:
        get_stage(stage)
    if status is not None and status not in STATUSES:
        raise errors.InvalidInput(f"status must be one of {', '.join(STATUSES)}")
    lim, off = v.page(limit, offset)
    with store.db.transaction() as tx:
        ids = sorted(ns_ops.resolve_trees(tx, namespaces or "/"))
        return tx.all(
            "consolidation_dead_letter_list", namespace_ids=ids, stage=stage, status=status, limit=lim, offset=off
        )


def _ids(values: Any) -> list[int]:
    if isinstance(values, int | str):
        values = [values]
    out = [v.record_id(x) for x in values or []]
    if not out:
        raise errors.InvalidInput("give at least one dead-letter id")
    return out


def _scope(store: Store, namespaces: Any) -> list[int] | None:
    if namespaces is None:
        return None
    with store.db.transaction() as tx:
        return sorted(ns_ops.resolve_trees(tx, namespaces))


def retry(store: Store, ids: Any, namespaces: Any = None) -> list[int]:
    """Queue dead letters for another try (status pending, attempts reset); returns the ids changed."""
    wanted, scope = _ids(ids), _scope(store, namespaces)
    with store.db.transaction() as tx:
        rows = tx.all("consolidation_dead_letter_retry", ids=wanted, namespace_ids=scope)
    return sorted(int(r["id"]) for r in rows)


def drop(store: Store, ids: Any, namespaces: Any = None) -> list[int]:
    """Give up on dead letters (status dropped); returns the ids changed."""
    wanted, scope = _ids(ids), _scope(store, namespaces)
    with store.db.transaction() as tx:
        rows = tx.all("consolidation_dead_letter_drop", ids=wanted, namespace_ids=scope)
    return sorted(int(r["id"]) for r in rows)
