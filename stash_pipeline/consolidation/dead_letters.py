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
from stash_pipeline.memory import namespaces as ns_ops
from stash_pipeline.memory import validate
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
    lim, off = validate.page(limit, offset)
    with store.db.transaction() as tx:
        ids = sorted(ns_ops.resolve_trees(tx, namespaces or "/"))
        return tx.all(
            "consolidation_dead_letter_list", namespace_ids=ids, stage=stage, status=status, limit=lim, offset=off
        )


def _ids(values: Any) -> list[int]:
    if isinstance(values, int | str):
        values = [values]
    return [validate.record_id(x) for x in values or []]


def _scope(store: Store, namespaces: Any) -> list[int] | None:
    if namespaces is None:
        return None
    with store.db.transaction() as tx:
        return sorted(ns_ops.resolve_trees(tx, namespaces))


def _change(store: Store, action: str, ids: Any, namespaces: Any, stage: str | None) -> list[int]:
    wanted = _ids(ids)
    if stage is not None:
        get_stage(stage)
    if wanted:
        scope = _scope(store, namespaces)
        with store.db.transaction() as tx:
            rows = tx.all(f"consolidation_dead_letter_{action}", ids=wanted, namespace_ids=scope)
    else:
        if stage is None and namespaces is None:
            raise errors.InvalidInput("give dead-letter ids, or a namespace tree and/or a stage")
        scope = _scope(store, namespaces or "/")
        with store.db.transaction() as tx:
            rows = tx.all(f"consolidation_dead_letter_{action}_all", namespace_ids=scope, stage=stage)
    return sorted(int(r["id"]) for r in rows)


def retry(store: Store, ids: Any = None, namespaces: Any = None, *, stage: str | None = None) -> list[int]:
    """Queue dead letters for another try (status pending, attempts reset); returns the ids changed.

    With ``ids`` only those (within ``namespaces`` when given); without, every dead item
    of ``namespaces`` (default all) and ``stage`` (default all).
    """
    return _change(store, "retry", ids, namespaces, stage)


def drop(store: Store, ids: Any = None, namespaces: Any = None, *, stage: str | None = None) -> list[int]:
    """Give up on dead letters (status dropped); returns the ids changed. Selection as ``retry``."""
    return _change(store, "drop", ids, namespaces, stage)
