"""The event-time rule: one timeline per (entity, property), used by every fact producer.

A *single-valued* property (``works_at``, ``lives_in``, ``engine``) has one value at a
time: its facts form one timeline per (namespace, entity, property), where each value
ends where the next known value begins. A *multi-valued* property (``likes``, ``speaks``)
holds several values at once: its facts have no timeline and different values never
contradict. Which properties are multi-valued is the setting
``STASH_MULTI_VALUED_PROPERTIES`` (comma-separated names, case-insensitive; the default
lists likes, speaks, skills, member_of and the like); every other property is single-valued.

The rules (``place`` for a new statement, ``reopen`` when one goes away):

* a statement ends where the earliest *later* known value of the key begins (a late
  statement slots in before it: it is stored as history and supersedes nothing), or at
  its own stated ``valid_until`` if that is earlier;
* a value holding at the new statement's start is *covered* by it: superseding closes it
  where the new one begins (``assert_fact(supersede=True)``, or a replacement the facts
  stage's model is sure of); otherwise the pair is recorded as an open contradiction;
* equal ``valid_from``: the later arrival is the correction: it covers the earlier one,
  whose interval becomes empty when superseded (it was never true, as now known);
* the same value stated twice is no change: the two facts may overlap;
* an empty interval (a statement corrected at its own start, or rejected by resolving its
  contradiction ``keep_old``) is no value: it neither ends nor covers another;
* withdrawing a fact (or its source) gives back the time it took: a fact it closed ends
  again at the next known value or at its stated end (``reopen``); a restored fact's
  relationships reopen with it (``follow``).

``assert_fact`` (``memory.facts``) and the stages' shared contradiction check
(``stages.contradictions``) both call ``place``; nothing else decides event time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from stash_pipeline.config import Settings
from stash_pipeline.db.gateway import Session
from stash_pipeline.memory import validate


def multi_valued(settings: Any) -> list[str]:
    """The multi-valued property names (lower-case) configured for this deployment."""
    raw = getattr(settings, "multi_valued_properties", None)
    if raw is None:
        raw = Settings.model_fields["multi_valued_properties"].default
    return sorted({name.strip().lower() for name in str(raw).split(",") if name.strip()})


def single_valued(settings: Any, property: str | None) -> bool:
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


def follow(tx: Session, fact_ids: Iterable[int]) -> None:
    """Relationships hold while their source fact does: re-align them with these facts'
    intervals (closing or reopening them)."""
    ids = sorted({int(i) for i in fact_ids})
    if ids:
        tx.execute("timeline_relationships_follow", ids=ids)


def supersede(tx: Session, old_id: int, new_id: int) -> bool:
    """Close ``old_id`` where ``new_id`` begins (``fact_supersede``: only when its interval
    holds there); a fact emptied by it (the same start: a correction) gives back the time
    it took. Returns whether it was superseded."""
    if tx.scalar("fact_supersede", old_id=old_id, new_id=new_id) is None:
        return False
    give_back_emptied(tx, [old_id])
    return True


def give_back_emptied(tx: Session, fact_ids: Iterable[int]) -> list[int]:
    """Of these facts, those whose interval is now empty (corrected at their own start, or
    rejected) are no value: the facts they had cut end again at the next value."""
    emptied = [int(r["id"]) for r in tx.all("timeline_empty_of", ids=sorted({int(i) for i in fact_ids}))]
    return reopen(tx, emptied, withdrawn=False) if emptied else []


def reopen(tx: Session, gone_fact_ids: Iterable[int], *, withdrawn: bool = True) -> list[int]:
    """Give back the time that withdrawn (or about to be purged) facts took on their keys.

    A live fact of the same key that ended where a gone fact began, because of it
    (superseded by it, or closed as history before it), ends again at the next live value
    after it, or at its stated end; its relationships follow. Contradictions still open
    on a gone fact are resolved ('withdrawn'): there is nothing left to decide (only when
    ``withdrawn``; a fact rejected by a resolution keeps its other contradictions).
    Returns the ids of the facts whose interval changed.
    """
    ids = sorted({int(i) for i in gone_fact_ids})
    if not ids:
        return []
    # a fact emptied by a later correction (not withdrawn) still corrects what it corrected
    changed = [int(r["id"]) for r in tx.all("timeline_reopen", ids=ids, keep_corrections=not withdrawn)]
    if changed:  # a reopened value ends what began before it and still ran past its start
        changed += [int(r["id"]) for r in tx.all("timeline_recut", ids=changed)]
    follow(tx, changed)
    if withdrawn:
        tx.execute("timeline_contradictions_of_gone", ids=ids)
    return changed
