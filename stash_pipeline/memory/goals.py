"""Goals: a tree of multi-session outcomes, with append-only notes.

Rules:

* **Parent rule.** A sub-goal lives in its parent's namespace or in a *descendant* of
  it (a ``/projects`` goal may have a ``/projects/x`` sub-goal, not the other way
  round). So whoever reads a parent's namespace tree also sees all its sub-goals, and a
  goal's whole subtree lies inside its namespace tree. The parent must be active and
  not deleted.
* **Listing.** With no filter, ``list_`` returns every non-deleted goal of any status in
  the trees, sub-goals included. ``top_level_only=True`` restricts to roots, ``status`` and ``parent_id``
  filter further.
* **Notes** are rows in ``goal_notes``, never overwritten: a caller's note on
  complete/abandon/update is appended after whatever the model wrote. Model notes are
  idempotent per (goal, fact, kind).
* **Complete / abandon** need an active goal. Afterwards the ancestors are checked
  bottom-up: an active parent is completed when it has at least one non-abandoned,
  non-deleted child and all such children are completed (so abandoning the last open
  sub-goal can complete the parent too). A scoped caller's walk stops at the first
  ancestor outside its scope.
* ``update`` keeps a field when its argument is None, so priority 0 can be set.
* ``delete`` soft-deletes the goal and all its descendants.

The functions take parsed values (``validate``'s module docstring says which layer checks
what): ids and priorities as ints, ``status`` one of ``validate.GOAL_STATUSES``, namespace
paths checked; they check the text against the store's limits and the rules above.
"""

from __future__ import annotations

from collections.abc import Sequence

from stash_pipeline import errors
from stash_pipeline.db.gateway import Row, Session
from stash_pipeline.memory import lineage, validate
from stash_pipeline.memory.namespaces import get as get_namespace
from stash_pipeline.memory.paging import Page
from stash_pipeline.memory.scope import (
    found_in_scope,
    in_scope,
    is_ancestor_or_self,
    on_one_line,
    scope_ids,
    visible,
)
from stash_pipeline.models import Goal, GoalDeletion, GoalFinish, GoalNote
from stash_pipeline.store import Store

NOTE_AUTHORS = ("caller", "model")
NOTE_KINDS = ("note", "progress", "suggested_complete", "contradicted", "completed", "abandoned")


# --- reads -------------------------------------------------------------------------------


def list_(
    store: Store,
    namespaces: Sequence[str] = ("/",),
    *,
    status: validate.GoalStatus | None = None,
    parent_id: int | None = None,
    top_level_only: bool = False,
    limit: int = validate.LIST_LIMIT_DEFAULT,
    offset: int = 0,
    refs_within: Sequence[str] | None = None,
) -> list[Goal]:
    """Non-deleted goals in the namespace trees, highest priority first, then oldest.

    Default: every goal of any status (sub-goals included). A parent outside
    ``refs_within`` (the caller's trees; None: anywhere) is not shown.
    """
    if parent_id is not None and top_level_only:
        raise errors.InvalidInput("parent_id and top_level_only exclude each other")
    return Page(limit, offset).in_trees(
        store,
        "goal_list",
        Goal,
        namespaces,
        refs_within=refs_within,
        status=status,
        parent_id=parent_id,
        top_level_only=top_level_only,
    )


def show(store: Store, goal_id: int, namespaces: Sequence[str] | None = None) -> Goal:
    """One goal with its direct sub-goal counts by status and all its notes."""
    with store.db.transaction() as tx:
        row = load(tx, goal_id, scope_ids(tx, namespaces))
        return _full(tx, row)


# --- writes ------------------------------------------------------------------------------


def create(
    store: Store,
    namespace: str,
    content: str,
    *,
    parent_id: int | None = None,
    priority: int = 0,
    namespaces: Sequence[str] | None = None,
) -> Goal:
    """Create an active goal in one exact namespace, optionally under an active parent.

    The parent must be in the same namespace or an ancestor namespace (module docstring),
    and inside ``namespaces`` (the caller's trees; None: anywhere): a parent outside them
    is not found, whatever its status, as ``show`` would answer.
    """
    content = validate.content(store.settings, content)
    with store.db.transaction() as tx:
        target = get_namespace(tx, namespace)
        scope = scope_ids(tx, namespaces)
        if parent_id is not None:
            tx.one("goal_lock", id=parent_id)  # a concurrent delete/complete of the parent waits for us
            prow = tx.one("goal_get", id=parent_id, **visible(scope))
            if (
                prow is None
                or prow["deleted_at"] is not None
                or not in_scope(scope, prow["namespace_id"])
                or not on_one_line(prow["namespace"], target["slug"])
            ):
                raise errors.RecordNotFound(
                    f"parent goal {parent_id} not found in namespace {target['slug']!r} or its ancestors"
                )
            if not is_ancestor_or_self(prow["namespace"], target["slug"]):
                raise errors.InvalidInput(
                    f"parent goal {parent_id} is in {prow['namespace']!r}, below {target['slug']!r}; a sub-goal "
                    "must live in its parent's namespace or a descendant of it"
                )
            if prow["status"] != "active":
                raise errors.InvalidTransition(
                    f"parent goal {parent_id} is {prow['status']}; sub-goals can only be added to an active goal"
                )
        row = tx.one("goal_insert", namespace_id=target["id"], parent_id=parent_id, content=content, priority=priority)
        assert row is not None
        created = tx.one("goal_get", id=row["id"], **visible(scope))
    return Goal.from_row(created)


def update(
    store: Store,
    goal_id: int,
    *,
    content: str | None = None,
    priority: int | None = None,
    note: str | None = None,
    namespaces: Sequence[str] | None = None,
) -> Goal:
    """Change content and/or priority (None keeps; 0 is a valid priority) and/or append a note."""
    content = None if content is None else validate.content(store.settings, content)
    note = validate.optional_text(store.settings, note, "note")
    if content is None and priority is None and note is None:
        raise errors.InvalidInput("nothing to update: give content, priority or note")
    with store.db.transaction() as tx:
        scope = scope_ids(tx, namespaces)
        row = load(tx, goal_id, scope, lock=True)
        if content is not None or priority is not None:
            tx.execute("goal_update", id=goal_id, content=content, priority=priority)
        if note is not None:
            add_note(tx, goal_id=goal_id, namespace_id=row["namespace_id"], author="caller", kind="note", content=note)
        return _full(tx, tx.one("goal_get", id=goal_id, **visible(scope)))


def complete(
    store: Store, goal_id: int, *, note: str | None = None, namespaces: Sequence[str] | None = None
) -> GoalFinish:
    """Complete an active goal, append the caller's note, then auto-complete ancestors
    (``auto_completed``: the ancestor ids completed, bottom-up)."""
    return _finish(store, goal_id, "completed", note, namespaces)


def abandon(
    store: Store, goal_id: int, *, note: str | None = None, namespaces: Sequence[str] | None = None
) -> GoalFinish:
    """Abandon an active goal (sub-goals are left as they are), then check ancestors, like ``complete``."""
    return _finish(store, goal_id, "abandoned", note, namespaces)


def delete(store: Store, goal_id: int, namespaces: Sequence[str] | None = None) -> GoalDeletion:
    """Soft-delete a goal and all its descendants. Returns the ids deleted."""
    with store.db.transaction() as tx:
        load(tx, goal_id, scope_ids(tx, namespaces), lock=True)
        deleted = sorted(int(r["id"]) for r in tx.all("goal_soft_delete_tree", id=goal_id))
    return GoalDeletion(ok=True, id=goal_id, deleted_ids=deleted)


# --- transaction-level helpers (also used by the goal-progress stage) ----------------


def load(tx: Session, goal_id: int, scope: set[int] | None = None, *, lock: bool = False) -> Row:
    """A live goal row in scope, optionally locked; RecordNotFound otherwise."""
    if lock:
        tx.one("goal_lock", id=goal_id)
    return found_in_scope(tx.one("goal_get", id=goal_id, **visible(scope)), scope, f"goal {goal_id}")


def add_note(
    tx: Session,
    *,
    goal_id: int,
    namespace_id: int,
    author: str,
    kind: str,
    content: str,
    confidence: float | None = None,
    fact_id: int | None = None,
) -> Row | None:
    """Append a note to a goal; returns the row, or None for a repeated model note.

    A model note is written once per (goal, fact, kind); its lineage points at the fact.
    """
    if author not in NOTE_AUTHORS:
        raise errors.InvalidInput(f"author must be one of {', '.join(NOTE_AUTHORS)}")
    validate.one_of(kind, NOTE_KINDS, "kind")
    if not isinstance(content, str) or not content.strip():
        raise errors.EmptyContent("note must not be empty")
    row = tx.one(
        "goal_insert_note",
        goal_id=int(goal_id),
        namespace_id=int(namespace_id),
        author=author,
        kind=kind,
        content=content,
        confidence=None if confidence is None else validate.probability(confidence),
        fact_id=None if fact_id is None else int(fact_id),
    )
    if row is not None and fact_id is not None:
        lineage.add(tx, int(namespace_id), "goal_note", int(row["id"]), [("fact", int(fact_id))])
    return row


def auto_complete_ancestors(tx: Session, parent_id: int | None, scope: set[int] | None = None) -> list[int]:
    """Complete ancestors whose live, non-abandoned children are all completed; bottom-up ids.

    With a ``scope`` (a token's namespaces), the walk stops at the first ancestor outside
    it: a scoped caller never changes a goal it could not address by id.
    """
    done: list[int] = []
    current = parent_id
    while current is not None:
        # Lock, then evaluate in a new statement: two siblings completed concurrently
        # serialise here and the second sees the first's commit (READ COMMITTED).
        tx.one("goal_lock", id=current)
        row = tx.one("goal_parent_ready", id=current)
        if row is None or not row["ready"] or not in_scope(scope, row["namespace_id"]):
            break
        tx.execute("goal_set_completed", id=current)
        done.append(int(current))
        current = row["parent_id"]
    return done


# --- internals ---------------------------------------------------------------------------


def _finish(store: Store, goal_id: int, to: str, note: str | None, namespaces: Sequence[str] | None) -> GoalFinish:
    note = validate.optional_text(store.settings, note, "note")
    with store.db.transaction() as tx:
        scope = scope_ids(tx, namespaces)
        row = load(tx, goal_id, scope, lock=True)
        if row["status"] != "active":
            verb = "complete" if to == "completed" else "abandon"
            raise errors.InvalidTransition(
                f"goal {goal_id}: {row['status']} → {to} is not allowed; only an active goal can be "
                f"{to} ({verb}); {row['status']} is final",
                goal_id=goal_id,
                status=row["status"],
                to=to,
            )
        tx.execute("goal_set_completed" if to == "completed" else "goal_set_abandoned", id=goal_id)
        if note is not None:
            add_note(tx, goal_id=goal_id, namespace_id=row["namespace_id"], author="caller", kind=to, content=note)
        auto = auto_complete_ancestors(tx, row["parent_id"], scope)
        goal = _full(tx, tx.one("goal_get", id=goal_id, **visible(scope)))
    return GoalFinish(goal=goal, auto_completed=auto)


def _full(tx: Session, row: Row | None) -> Goal:
    assert row is not None
    counts = tx.one("goal_sub_goal_counts", id=row["id"])
    notes = tx.all("goal_notes_for", goal_id=row["id"])
    return Goal.from_row(
        {
            **row,
            "sub_goals": {key: int(val) for key, val in (counts or {}).items()},
            "notes": [GoalNote.from_row(n) for n in notes],
        }
    )

