"""Contradictions between two facts about one entity/property: list, and resolve by acting
on the facts: a resolution changes the facts' validity, not only the contradiction's flag.

Actions of ``resolve`` (the pair is ``old_fact_id``, ``new_fact_id``):

=========  ===========================================================================
keep_new   the old fact is rejected when it began no earlier than the new one (no value:
           an empty interval, superseded_by = the new fact); otherwise it ends where the
           new one begins
keep_old   the new fact is rejected when it began no earlier than the old one; otherwise
           (a late statement) it ends where the old one begins. A rejected fact gives back
           the time it took: the old fact, if the new one had superseded it (e.g. by the
           facts stage's auto-resolution), holds again until the next value
keep_both  both facts hold at once: neither ends the other on the timeline (as while the
           contradiction was open)
neither    both facts are withdrawn, and the lineage cascade withdraws what was derived
           only from them (relationships, causal links, patterns, facts)
=========  ===========================================================================

After any action the key's timeline is recomputed from its live statements
(``timeline.settle``): relationships drawn from a fact follow it (they reopen with a
restored fact and close with a retired one); an expiry by decay is kept (a given end). A
withdrawn fact cannot be kept. A rejection is final: a rejected fact stays no value even
if the fact kept over it is withdrawn later.

State: unresolved → resolved (final). A contradiction the facts stage resolved on its
own (method 'auto', resolution 'superseded') may be overridden by the caller once —
that is how a wrong automatic supersession is undone. Resolving a caller-resolved
contradiction again is ``InvalidTransition``. An open contradiction one of whose facts
is withdrawn (by hand, by a resolution or through lineage) is resolved on its own with
resolution 'withdrawn': nothing is left to decide.

``note`` (optional free text) is stored with the resolution (``resolution_note``) and,
for ``neither``, is also the withdrawal reason of both facts.

The functions take parsed values (``validate``'s module docstring says which layer checks
what): ids as ints, ``action`` one of ``validate.CONTRADICTION_ACTIONS``; they check the
note against the store's limits, the scope and each resolution against the state machine.
"""

from __future__ import annotations

from collections.abc import Sequence

from stash_pipeline import errors
from stash_pipeline.memory import lineage, timeline, validate
from stash_pipeline.memory.paging import Page
from stash_pipeline.memory.scope import found_in_scope, scope_ids
from stash_pipeline.models import Cascade, Contradiction, Fact, Resolution
from stash_pipeline.store import Store


def list_(
    store: Store,
    namespaces: Sequence[str] = ("/",),
    *,
    include_resolved: bool = False,
    limit: int = validate.LIST_LIMIT_DEFAULT,
    offset: int = 0,
) -> list[Contradiction]:
    """Contradictions in the namespace trees, newest first (unresolved only by default)."""
    return Page(limit, offset).in_trees(
        store, "contradiction_list", Contradiction, namespaces, include_resolved=include_resolved
    )


def get(store: Store, contradiction_id: int, namespaces: Sequence[str] | None = None) -> Contradiction:
    """One contradiction."""
    with store.db.transaction() as tx:
        row = found_in_scope(
            tx.one("contradiction_get", id=contradiction_id), scope_ids(tx, namespaces), f"contradiction {contradiction_id}"
        )
    return Contradiction.from_row(row)


def resolve(
    store: Store,
    contradiction_id: int,
    action: validate.ContradictionAction,
    *,
    note: str | None = None,
    namespaces: Sequence[str] | None = None,
) -> Resolution:
    """Resolve a contradiction with an action on its two facts (see the module docstring).

    ``withdrawn`` is the lineage cascade report for ``neither`` and None otherwise.
    """
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

        # the resolution first: an open (or keep_both) pair is what keeps two values of a
        # key holding at once, so the timeline below reads it
        tx.execute("contradiction_mark_resolved", id=contradiction_id, resolution=action, note=note)
        withdrawn: Cascade | None = None
        if action == "keep_new":
            timeline.reject(tx, [old_id], new_id)
        elif action == "keep_old":
            timeline.reject(tx, [new_id], old_id)
        elif action == "neither":
            reason = note or f"contradiction {contradiction_id} resolved: neither fact holds"
            tx.all("contradiction_withdraw_facts", ids=[old_id, new_id], reason=reason)
            cascade = lineage.withdraw_cascade(
                tx, [("fact", old_id), ("fact", new_id)], reason, settings=store.settings,
                scope=scope_ids(tx, namespaces),
            )
            withdrawn = cascade.model_copy(
                update={"withdrawn_fact_ids": sorted({old_id, new_id, *cascade.withdrawn_fact_ids})}
            )
        # the key's timeline recomputed: a rejected fact gives back the time it took, a kept
        # one holds again until the next value, keep_both lets both hold; relationships follow
        timeline.settle(tx, store.settings, [old_id, new_id])
        resolved = tx.one("contradiction_get", id=contradiction_id)
        old_fact = tx.one("fact_get", id=old_id, as_of=None, known_at=None)
        new_fact = tx.one("fact_get", id=new_id, as_of=None, known_at=None)
    assert resolved is not None and old_fact is not None and new_fact is not None
    return Resolution(
        contradiction=Contradiction.from_row(resolved),
        old_fact=Fact.from_row(old_fact),
        new_fact=Fact.from_row(new_fact),
        withdrawn=withdrawn,
        note=note,
    )
