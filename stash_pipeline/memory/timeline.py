"""The event-time rule: one timeline per (entity, property), used by every fact producer.

A *single-valued* property (``works_at``, ``lives_in``, ``engine``) has one value at a
time: its facts form one timeline per (namespace, entity, property), where each value
ends where the next known value begins. A *multi-valued* property (``likes``, ``speaks``)
holds several values at once: its facts have no timeline and different values never
contradict. Which properties are multi-valued is the setting
``STASH_MULTI_VALUED_PROPERTIES`` (comma-separated names, case-insensitive; the default
lists likes, speaks, skills, member_of and the like); every other property is single-valued.

The rules, for every fact of a key at once (``settle``: ``intervals``
over the rows of ``timeline_key_facts``; the *live* statements are those not withdrawn):

* a statement rejected by a contradiction's resolution (``reject``: its given end is its
  own start) is no value, for good;
* a statement corrected at its own start (a later arrival with the same ``valid_from``
  and another value) is no value: an empty interval;
* every other statement ends at the earliest of its stated ``valid_until``, its given end
  (an expiry by the decay stage) and the start of the next value of the key (by
  ``valid_from``, then arrival); a later arrival that ends it supersedes it, an earlier
  arrival makes it history (a late statement supersedes nothing);
* two facts in an open contradiction (or one resolved ``keep_both``) do not end or correct
  each other: both hold until it is resolved;
* the same value stated twice is no change: the two facts may overlap.

So the timeline does not depend on the order of arrival: every change to a key (a new
statement, a withdrawal, a rejection, a restore) calls ``settle``, which recomputes the
whole key and re-aligns the relationships of the facts whose interval changed (``follow``).
``place`` is the same rule for one new statement before it is stored: it names the values
holding at its start (``covered``), the pairs that get a contradiction row — superseding
(``assert_fact(supersede=True)``, or a replacement the facts stage's model is sure of)
records it resolved, otherwise it stays open. ``assert_fact`` (``memory.facts``) and the
stages' contradiction check (``stages.contradictions``) both use ``place`` and ``settle``;
nothing else decides event time.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from stash_pipeline.config import Settings
from stash_pipeline.db.gateway import Row, Session
from stash_pipeline.memory import validate


def multi_valued(settings: Settings | None) -> list[str]:
    """The multi-valued property names (lower-case) configured for this deployment."""
    raw = getattr(settings, "multi_valued_properties", None)
    if raw is None:
        raw = Settings.model_fields["multi_valued_properties"].default
    return sorted({name.strip().lower() for name in str(raw).split(",") if name.strip()})


def single_valued(settings: Settings | None, property: str | None) -> bool:
    """True when facts on ``property`` form one timeline (one value at a time)."""
    return bool(property) and " ".join(str(property).lower().split()) not in multi_valued(settings)


def norm(value: str | None) -> str:
    """A value as compared: case and runs of white space do not matter."""
    return " ".join((value or "").lower().split())


def same_value(a: str | None, b: str | None) -> bool:
    return norm(a) == norm(b)


def end_or_max(end: datetime | None) -> datetime:
    """An interval end, open (None) read as the latest storable instant."""
    return end if end is not None else validate.MAX_TIMESTAMP


@dataclass(frozen=True)
class Known:
    """A statement already on the key: a stored fact (``ref`` its id) or an earlier fact of
    the same batch (``ref`` its batch key), with its current interval."""

    ref: int
    value: str | None
    valid_from: datetime
    valid_until: datetime | None


@dataclass(frozen=True)
class Placement:
    """Where a new statement goes on its key's timeline."""

    #: where it ends: its stated end, or the start of the next known value if earlier
    valid_until: datetime | None
    #: True when a later known value ended it (it is history before that value)
    history: bool
    #: the other values holding at its start: superseding closes them where it begins,
    #: else each is an open contradiction
    covered: tuple[Known, ...]


def place(value: str | None, valid_from: datetime, valid_until: datetime | None, known: Iterable[Known]) -> Placement:
    """Slot a new statement into its key's timeline (see the module docstring)."""
    others = [k for k in known if not same_value(k.value, value) and k.valid_until != k.valid_from]
    end, history = valid_until, False
    later = [k.valid_from for k in others if k.valid_from > valid_from]
    if later and min(later) < end_or_max(end):
        end, history = min(later), True
    covered = tuple(k for k in others if k.valid_from <= valid_from < end_or_max(k.valid_until))
    return Placement(end, history, covered)


@dataclass(frozen=True)
class Statement:
    """A live fact of a key as ``settle`` reads it (``timeline_key_facts``)."""

    id: int
    value: str  # normalised
    valid_from: datetime
    stated_until: datetime | None
    given_until: datetime | None
    superseded_by: int | None

    @property
    def rejected(self) -> bool:
        return self.given_until is not None and self.given_until <= self.valid_from


def intervals(statements: list[Statement], together: set[frozenset[int]]) -> dict[int, tuple[datetime | None, int | None]]:
    """The rule of the module docstring for one key: each statement's (end, superseded_by).

    ``statements`` are the key's live facts; ``together`` the pairs that may hold at once
    (an open or keep_both contradiction). Sorting and one pass per value: O(n log n) while
    such pairs are rare.
    """
    def apart(a: Statement, b: Statement) -> bool:
        return a.value != b.value and frozenset((a.id, b.id)) not in together

    by_start: dict[datetime, list[Statement]] = {}
    for st in statements:
        if not st.rejected:
            by_start.setdefault(st.valid_from, []).append(st)
    corrected: dict[int, int] = {}
    for group in by_start.values():  # the same start: a later arrival with another value corrects
        for st in group:
            by = min((o.id for o in group if o.id > st.id and apart(st, o)), default=None)
            if by is not None:
                corrected[st.id] = by
    valued = sorted((st for st in statements if not st.rejected and st.id not in corrected),
                    key=lambda st: (st.valid_from, st.id))
    starts = [st.valid_from for st in valued]
    # the next position whose value differs from this position's
    other_after = [len(valued)] * len(valued)
    for i in range(len(valued) - 2, -1, -1):
        other_after[i] = i + 1 if valued[i + 1].value != valued[i].value else other_after[i + 1]
    out: dict[int, tuple[datetime | None, int | None]] = {}
    for i, st in enumerate(valued):
        j = bisect_right(starts, st.valid_from, lo=i)
        if j < len(valued) and valued[j].value == st.value:
            j = other_after[j]
        while j < len(valued) and not apart(st, valued[j]):
            j += 1
        nxt = valued[j] if j < len(valued) else None
        ends = [e for e in (st.stated_until, st.given_until, nxt.valid_from if nxt else None) if e is not None]
        end = min(ends, default=None)
        if nxt is not None and end == nxt.valid_from and nxt.id > st.id:
            by = nxt.id  # a later arrival ended it: superseded
        elif st.given_until is not None and end == st.given_until:
            by = st.superseded_by  # an expiry keeps what it had
        else:
            by = None  # open, its stated end, or history before an earlier-known value
        out[st.id] = (end, by)
    for st in statements:
        if st.rejected:
            out[st.id] = (st.valid_from, st.superseded_by)
        elif st.id in corrected:
            out[st.id] = (st.valid_from, corrected[st.id])
    return out


def settle(tx: Session, settings: Settings | None, fact_ids: Iterable[int], *, gone: Iterable[int] = ()) -> list[int]:
    """Recompute the timelines of these facts' keys from their live statements (the rule of
    the module docstring, ``intervals``, for every fact of each key at once) and re-align the
    relationships of the facts whose interval changed. Call it after any change to a key: a
    new statement, a supersession, a withdrawal, a rejection, a restore. ``gone`` facts count
    as withdrawn (a purge settles before its delete). Multi-valued properties are left
    alone. Returns the changed facts' ids."""
    ids = sorted({int(i) for i in fact_ids})
    if not ids:
        return []
    rows = tx.all("timeline_key_facts", ids=ids, gone=sorted({int(i) for i in gone}),
                  multi_valued=multi_valued(settings))
    if not rows:
        return []
    together = {frozenset((int(r["old_fact_id"]), int(r["new_fact_id"])))
                for r in tx.all("timeline_held_together", ids=[int(r["id"]) for r in rows])}
    current = {int(r["id"]): (r["valid_until"], r["superseded_by"]) for r in rows}
    changes: dict[int, tuple[datetime | None, int | None]] = {}
    for key in _keys(rows):
        statements = [Statement(int(r["id"]), r["value"], r["valid_from"], r["stated_valid_until"],
                                r["given_valid_until"], r["superseded_by"]) for r in key]
        for fact_id, placed in intervals(statements, together).items():
            if placed != current[fact_id]:
                changes[fact_id] = placed
    if changes:
        changed = sorted(changes)
        tx.execute("timeline_save", ids=changed, ends=[changes[i][0] for i in changed],
                   bys=[changes[i][1] for i in changed])
        follow(tx, changed)
    return sorted(changes)


def _keys(rows: list[Row]) -> list[list[Row]]:
    """Group facts into keys: the same namespace and property, and the same entity name or
    resolved entity (facts linked through either are one key)."""
    parent = list(range(len(rows)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    seen: dict[tuple[Any, ...], int] = {}
    for n, r in enumerate(rows):
        names = [("name", r["namespace_id"], r["property"], r["entity"])]
        if r["entity_id"] is not None:
            names.append(("id", r["namespace_id"], r["property"], r["entity_id"]))
        for name in names:
            if name in seen:
                parent[root(n)] = root(seen[name])
            else:
                seen[name] = n
    groups: dict[int, list[Row]] = {}
    for n, r in enumerate(rows):
        groups.setdefault(root(n), []).append(r)
    return list(groups.values())


def reject(tx: Session, fact_ids: Iterable[int], kept_id: int) -> list[int]:
    """A resolution kept ``kept_id`` over these facts: each that began no earlier than the
    kept fact is no value from now on (its given end is its start); ``settle`` then gives
    back the time it took. Returns the rejected facts' ids."""
    ids = sorted({int(i) for i in fact_ids})
    return [int(r["id"]) for r in tx.all("timeline_reject", ids=ids, kept_id=int(kept_id))] if ids else []


def gone(tx: Session, settings: Settings | None, fact_ids: Iterable[int]) -> list[int]:
    """Withdrawn (or about to be purged) facts give back the time they took on their keys
    (``settle``), and contradictions still open on them are resolved ('withdrawn'): there
    is nothing left to decide. Returns the ids of the facts whose interval changed."""
    ids = sorted({int(i) for i in fact_ids})
    if not ids:
        return []
    changed = settle(tx, settings, ids, gone=ids)
    tx.execute("timeline_contradictions_of_gone", ids=ids)
    return changed


def follow(tx: Session, fact_ids: Iterable[int]) -> None:
    """Relationships hold while their source fact does: re-align them with these facts'
    intervals (closing or reopening them)."""
    ids = sorted({int(i) for i in fact_ids})
    if ids:
        tx.execute("timeline_relationships_follow", ids=ids)
