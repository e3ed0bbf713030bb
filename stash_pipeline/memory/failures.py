"""Failures: what went wrong, why, and the lesson learned — optionally tied to a goal.

Create takes one exact namespace, which must exist; the
content, reason and lesson are all required. A goal, when given, must be non-deleted
and on the same namespace line: the failure's namespace, an ancestor or a descendant
of it (a failure in ``/projects/x`` may concern a ``/projects`` goal and vice versa;
a goal in an unrelated namespace is not found). Reads take namespace trees; by-id
operations take an optional ``namespaces`` scope; deleted failures are not found.

The functions take parsed values (``validate``'s module docstring says which layer checks
what) and check the texts against the store's limits and the goal's namespace line.
"""

from __future__ import annotations

from collections.abc import Sequence

from stash_pipeline import errors
from stash_pipeline.db.gateway import Row, Session
from stash_pipeline.memory import validate
from stash_pipeline.memory.namespaces import get as get_namespace
from stash_pipeline.memory.paging import Page
from stash_pipeline.memory.scope import found_in_scope, in_scope, on_one_line, scope_ids, visible
from stash_pipeline.models import Deleted, Failure
from stash_pipeline.store import Store


def create(
    store: Store,
    namespace: str,
    content: str,
    reason: str,
    lesson: str,
    *,
    goal_id: int | None = None,
    namespaces: Sequence[str] | None = None,
) -> Failure:
    """Record a failure in one exact namespace; its goal, when given, inside ``namespaces``
    (the caller's trees; None: anywhere), else not found."""
    content = validate.content(store.settings, content)
    reason = validate.content(store.settings, reason, "reason")
    lesson = validate.content(store.settings, lesson, "lesson")
    with store.db.transaction() as tx:
        target = get_namespace(tx, namespace)
        scope = scope_ids(tx, namespaces)
        if goal_id is not None:
            row = tx.one("goal_get", id=goal_id, **visible(scope))
            if (
                row is None
                or row["deleted_at"] is not None
                or not in_scope(scope, row["namespace_id"])
                or not on_one_line(row["namespace"], target["slug"])
            ):
                raise errors.RecordNotFound(
                    f"goal {goal_id} not found in namespace {target['slug']!r}, its ancestors or descendants"
                )
        row = tx.one(
            "failure_insert", namespace_id=target["id"], goal_id=goal_id, content=content, reason=reason, lesson=lesson
        )
        assert row is not None
        created = tx.one("failure_get", id=row["id"], **visible(scope))
    return Failure.from_row(created)


def list_(
    store: Store,
    namespaces: Sequence[str] = ("/",),
    *,
    goal_id: int | None = None,
    limit: int = validate.LIST_LIMIT_DEFAULT,
    offset: int = 0,
    refs_within: Sequence[str] | None = None,
) -> list[Failure]:
    """Non-deleted failures in the namespace trees, newest first; optionally of one goal.
    A goal outside ``refs_within`` (the caller's trees; None: anywhere) is not shown."""
    return Page(limit, offset).in_trees(
        store, "failure_list", Failure, namespaces, refs_within=refs_within, goal_id=goal_id
    )


def show(store: Store, failure_id: int, namespaces: Sequence[str] | None = None) -> Failure:
    """One non-deleted failure."""
    with store.db.transaction() as tx:
        row = _load(tx, failure_id, scope_ids(tx, namespaces))
    return Failure.from_row(row)


def delete(store: Store, failure_id: int, namespaces: Sequence[str] | None = None) -> Deleted:
    """Soft-delete a failure; afterwards it is not found."""
    with store.db.transaction() as tx:
        _load(tx, failure_id, scope_ids(tx, namespaces))
        tx.execute("failure_soft_delete", id=failure_id)
    return Deleted(ok=True, id=failure_id)


def _load(tx: Session, failure_id: int, scope: set[int] | None) -> Row:
    return found_in_scope(tx.one("failure_get", id=failure_id, **visible(scope)), scope, f"failure {failure_id}")
