"""Contradictions between two facts about one entity/property: list, and resolve by acting
on the facts (the reference only flipped a flag and changed no fact).

Actions of ``resolve`` (the pair is ``old_fact_id``, ``new_fact_id``):

=========  ===========================================================================
keep_new   the old fact is retired: valid_until = now, superseded_by = the new fact;
           the new fact is restored if it had been superseded by the old one
keep_old   the new fact is retired (superseded_by = the old fact) and gives back the
           time it took: the old fact, if the new one had superseded it (e.g. by the
           facts stage's auto-resolution), and any other fact it cut end again at the
           next value or their stated end (``timeline.reopen``)
keep_both  both facts become current again: any supersession of one by the other is
           undone
neither    both facts are withdrawn, and the lineage cascade withdraws what was derived
           only from them (relationships, causal links, patterns, facts)
=========  ===========================================================================

Relationships drawn from a fact follow it: a restored fact's relationships reopen, a
retired fact's close. A restore only undoes a supersession by the *other fact of the pair*; an expiry by
decay or a supersession by a third fact is left alone. A withdrawn fact cannot be kept.

State: unresolved → resolved (final). A contradiction the facts stage resolved on its
own (method 'auto', resolution 'superseded') may be overridden by the caller once —
that is how a wrong automatic supersession is undone. Resolving a caller-resolved
contradiction again is ``InvalidTransition``. An open contradiction one of whose facts
is withdrawn (by hand, by a resolution or through lineage) is resolved on its own with
resolution 'withdrawn': nothing is left to decide.

``note`` (optional free text) is stored with the resolution (``resolution_note``) and,
for ``neither``, is also the withdrawal reason of both facts.
"""

from __future__ import annotations

from typing import Any

from stash_pipeline import errors
from stash_pipeline.memory import lineage, timeline, validate
from stash_pipeline.memory.paging import Page
from stash_pipeline.memory.scope import found_in_scope, scope_ids
from stash_pipeline.models import Contradiction, Fact
from stash_pipeline.store import Store

ACTIONS = ("keep_new", "keep_old", "keep_both", "neither")


def list_(
    store: Store,
    namespaces: Any = "/",
    *,
    include_resolved: bool = False,
    limit: Any = None,
    offset: Any = None,
) -> list[Contradiction]:
    """Contradictions in the namespace trees, newest first (unresolved only by default)."""
    page = Page.of(limit, offset)
    return page.in_trees(
        store, "contradiction_list", Contradiction, namespaces, include_resolved=bool(include_resolved)
    )


def get(store: Store, contradiction_id: Any, namespaces: Any = None) -> Contradiction:
    """One contradiction."""
    contradiction_id = validate.record_id(contradiction_id, "contradiction_id")
    with store.db.transaction() as tx:
        row = found_in_scope(
            tx.one("contradiction_get", id=contradiction_id), scope_ids(tx, namespaces), f"contradiction {contradiction_id}"
        )
    return Contradiction.from_row(row)


def resolve(
    store: Store,
    contradiction_id: Any,
    action: str,
    *,
    note: str | None = None,
    namespaces: Any = None,
) -> dict[str, Any]:
    """Resolve a contradiction with an action on its two facts (see the module docstring).

    Returns ``{"contradiction", "old_fact", "new_fact", "withdrawn", "note"}``; ``withdrawn``
    is the lineage cascade report for ``neither`` and None otherwise.
    """
    contradiction_id = validate.record_id(contradiction_id, "contradiction_id")
    validate.one_of(action, ACTIONS, "action")
    note = validate.optional_text(store.settings, note, "note")

    with store.db.transaction() as tx:
        row = found_in_scope(
            tx.one("contradiction_get_for_update", id=contradiction_id),
            scope_ids(tx, namespaces),
            f"contradiction {contradiction_id}",
        )
        if row["resolved"] and not (row["method"] == "auto" and row["resolution"] == "superseded"):
            raise errors.InvalidTransition(
                f"contradiction {contradiction_id} is already resolved ({row['resolution']}); "
                "a caller's resolution is final"
            )
        old_id, new_id = int(row["old_fact_id"]), int(row["new_fact_id"])
        facts = {int(f["id"]): f for f in tx.all("contradiction_lock_facts", ids=[old_id, new_id])}
        kept = {"keep_new": [new_id], "keep_old": [old_id], "keep_both": [old_id, new_id], "neither": []}[action]
        for fact_id in kept:
            if facts[fact_id]["withdrawn_at"] is not None:
                raise errors.InvalidTransition(
                    f"fact {fact_id} was withdrawn ({facts[fact_id]['withdrawn_reason'] or 'no reason'}) "
                    f"and cannot be kept; resolve contradiction {contradiction_id} with another action"
                )

        withdrawn = None
        if action == "keep_new":
            tx.execute("contradiction_restore_fact", id=new_id, other_id=old_id)
            tx.execute("contradiction_retire_fact", id=old_id, superseded_by=new_id)
            timeline.give_back_emptied(tx, [old_id])
        elif action == "keep_old":
            # the new statement is rejected: it gives back the time it took on its key
            # (the old fact and any other it cut end again at the next value)
            tx.execute("contradiction_retire_fact", id=new_id, superseded_by=old_id)
            timeline.give_back_emptied(tx, [new_id])
            tx.execute("contradiction_restore_fact", id=old_id, other_id=new_id)
        elif action == "keep_both":
            tx.execute("contradiction_restore_fact", id=old_id, other_id=new_id)
            tx.execute("contradiction_restore_fact", id=new_id, other_id=old_id)
        else:
            reason = note or f"contradiction {contradiction_id} resolved: neither fact holds"
            tx.all("contradiction_withdraw_facts", ids=[old_id, new_id], reason=reason)
            withdrawn = lineage.withdraw_cascade(tx, [("fact", old_id), ("fact", new_id)], reason)
            withdrawn["withdrawn_fact_ids"] = sorted({old_id, new_id, *withdrawn["withdrawn_fact_ids"]})

        # relationships hold while their source fact does: they reopen with a restored
        # fact and close with a retired one
        timeline.follow(tx, [old_id, new_id])
        tx.execute("contradiction_mark_resolved", id=contradiction_id, resolution=action, note=note)
        resolved = tx.one("contradiction_get", id=contradiction_id)
        old_fact = tx.one("fact_get", id=old_id, as_of=None, known_at=None)
        new_fact = tx.one("fact_get", id=new_id, as_of=None, known_at=None)
    assert resolved is not None and old_fact is not None and new_fact is not None
    return {
        "contradiction": Contradiction.from_row(resolved),
        "old_fact": Fact.from_row(old_fact),
        "new_fact": Fact.from_row(new_fact),
        "withdrawn": withdrawn,
        "note": note,
    }
