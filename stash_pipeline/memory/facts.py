"""Facts: what the agent learned. Insert (the one internal path), assert, query, get,
withdraw, purge.

``insert_fact`` is THE single way every producer creates a fact — caller assertions,
hypothesis confirmations and every consolidation stage — so each fact gets its
embedding, its origin, its lineage and (for a derived fact) its sources' event time in
the same transaction. ``assert_fact`` slots the fact into its entity+property timeline
without a model (``structured_conflicts``, by the one rule of ``memory.timeline``).
Withdrawal and purge cascade through lineage and give back the time the fact took.

Two time axes. Event time (``valid_from``, ``valid_until``): when the fact was true in
the world; a stage takes it from its evidence, a caller may state it. System time
(``recorded_at``, ``retired_at``): when Stash learned the fact, and when it stopped being
Stash's belief as recorded (superseded, expired or withdrawn). Superseding closes the old
fact's event interval where the new one's begins; every earlier end and replacement is
kept with the system time it changed (``fact_ends``, migration 0016), so a read "as known
at" an earlier time sees the interval and ``superseded_by`` Stash believed then.

Reads take two times, both defaulting to now: ``as_of`` (event time, "what was true
then") and ``known_at`` (system time, "according to what Stash knew then"). A fact is
returned when it was recorded by ``known_at``, not withdrawn by then, and ``as_of`` lies
in [valid_from, end), where end is the end the fact had at ``known_at``
(``fact_valid_until``). With both at now that is exactly the current facts. ``include_history`` (with neither time given) returns every state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

from stash_pipeline import errors
from stash_pipeline.config import Settings
from stash_pipeline.db.gateway import Row, Session
from stash_pipeline.memory import entities, erasure, lineage, timeline, validate
from stash_pipeline.memory.namespaces import resolve_id, resolve_trees
from stash_pipeline.memory.scope import found_in_scope, read_scope, scope_ids
from stash_pipeline.models import (
    AssertedFact,
    Contradiction,
    ErasurePreview,
    Fact,
    FactLineage,
    FactPurge,
    FactWithdrawal,
)
from stash_pipeline.store import Store

MAX_KEY_CHARS = 500


@dataclass
class Conflicts:
    """What slotting a fact into its timeline did: the contradictions it recorded and the
    facts it superseded."""

    contradictions: list[Contradiction] = field(default_factory=list)
    superseded_fact_ids: list[int] = field(default_factory=list)


def _short(settings: Settings, value: str | None, field: str) -> str | None:
    text = validate.optional_text(settings, value, field)
    if text is not None and len(text) > MAX_KEY_CHARS:
        raise errors.InvalidInput(f"{field} is limited to {MAX_KEY_CHARS} characters")
    return text.strip() if text is not None else None


def insert_fact(
    tx: Session,
    store: Store,
    *,
    namespace_id: int,
    content: str,
    origin: str,
    confidence: float,
    entity: str | None = None,
    property: str | None = None,
    value: str | None = None,
    parents: Iterable[tuple[str, int]] = (),
    rationale: str | None = None,
    embedding: np.ndarray | None = None,
    valid_from: datetime | None = None,
    valid_until: datetime | None = None,
    stated_valid_until: datetime | None = None,
    time_sources: Iterable[tuple[str, int]] = (),
) -> Row:
    """Insert one fact plus its lineage in the caller's transaction; returns the row (no vector).

    Pass ``embedding`` when you can (embed before opening the transaction); otherwise the
    content is embedded here through the cache. ``valid_from``/``valid_until`` are its
    event time (validated UTC datetimes; ``valid_until`` defaults to open-ended).
    ``valid_from`` defaults to its sources' time for a derived fact (the earliest
    ``valid_from`` of its parent facts, ``occurred_at`` of its parent episodes, creation
    of its parent failures, never later than now; ``time_sources`` are more rows whose
    time counts without being parents) and to now for a caller's assertion.
    ``stated_valid_until`` is the end the statement itself gave (``valid_until`` may be
    earlier: the timeline ended it at the next known value).
    """
    text = validate.content(store.settings, content)
    if origin not in validate.FACT_ORIGINS:
        raise errors.InvalidInput(f"origin must be one of {', '.join(validate.FACT_ORIGINS)}")
    parent_list = [(kind, int(pid)) for kind, pid in parents]
    if embedding is None:
        embedding = store.embedder.embed_one(text)
    sources = [*parent_list, *((kind, int(i)) for kind, i in time_sources)]
    if valid_from is None and origin != "asserted" and sources:
        valid_from = tx.scalar(
            "fact_event_start_of_sources",
            fact_ids=[i for kind, i in sources if kind == "fact"],
            episode_ids=[i for kind, i in sources if kind == "episode"],
            failure_ids=[i for kind, i in sources if kind == "failure"],
        )
    row = tx.one(
        "fact_insert",
        namespace_id=int(namespace_id),
        content=text,
        entity=_short(store.settings, entity, "entity"),
        property=_short(store.settings, property, "property"),
        value=_short(store.settings, value, "value"),
        confidence=validate.probability(confidence),
        origin=origin,
        embedding=embedding,
        embedding_model=store.settings.embedding_model_name,
        rationale=validate.optional_text(store.settings, rationale, "rationale"),
        valid_from=valid_from,
        valid_until=valid_until,
        stated_valid_until=stated_valid_until,
    )
    assert row is not None
    lineage.add(tx, int(namespace_id), "fact", int(row["id"]), parent_list)
    row["source_episode_ids"] = sorted(pid for kind, pid in parent_list if kind == "episode")
    row["current"] = _current_now(row)
    return row


def _current_now(row: Row) -> bool:
    now = datetime.now(UTC)
    return row["withdrawn_at"] is None and row["valid_from"] <= now and (
        row["valid_until"] is None or row["valid_until"] > now
    )


def event_interval(start: datetime | None, end: datetime | None) -> tuple[datetime | None, datetime | None]:
    """An event time's interval (each end parsed by the caller): the end after the start."""
    if end is not None and end <= (start if start is not None else datetime.now(UTC)):
        raise errors.InvalidInput("valid_until must be later than valid_from (which defaults to now)")
    return start, end


def structured_conflicts(
    tx: Session, new_fact: Row, *, supersede: bool, confidence: float | None = None, settings: Settings | None = None
) -> Conflicts:
    """Slot a new fact into its entity+property timeline (``memory.timeline``; no model).

    The values holding at its start (``timeline.place``) each get a contradiction row:
    resolved 'replacement' when ``supersede`` (the timeline closes them where the new fact
    begins), else an open 'contradiction' (both hold until it is resolved). Then the key's
    timeline is recomputed (``timeline.settle``): a later known value ends the new fact (it
    is history and supersedes nothing). A multi-valued property
    (``timeline.single_valued``) has no timeline: nothing is compared.
    """
    out = Conflicts()
    entity, prop, value = new_fact.get("entity"), new_fact.get("property"), new_fact.get("value")
    if not entity or not prop or value is None or not timeline.single_valued(settings, prop):
        return out
    start, end = new_fact["valid_from"], new_fact["valid_until"]
    olds = {
        int(old["id"]): old
        for old in tx.all(
            "fact_same_key_overlapping",
            namespace_id=new_fact["namespace_id"],
            entity=entity,
            entity_id=new_fact.get("entity_id"),
            property=prop,
            exclude_id=new_fact["id"],
            valid_from=start,
            valid_until=end,
        )
    }
    known = [timeline.Known(i, o["value"], o["valid_from"], o["valid_until"]) for i, o in olds.items()]
    placed = timeline.place(value, start, end, known)
    for covered in placed.covered:
        old = olds[covered.ref]
        old_value = old["value"]
        common = {
            "namespace_id": new_fact["namespace_id"],
            "old_fact_id": old["id"],
            "new_fact_id": new_fact["id"],
            "entity": entity,
            "property": prop,
            "old_value": old_value or "",
            "new_value": value,
            "confidence": new_fact["confidence"] if confidence is None else confidence,
        }
        if supersede:  # the timeline closes it where the new fact begins (settle, below)
            out.superseded_fact_ids.append(int(old["id"]))
            row = tx.one(
                "contradiction_insert",
                **common,
                classification="replacement",
                explanation=f"{entity} {prop} changed from {old_value!r} to {value!r}; the old fact was superseded",
                method="auto",
                resolved=True,
                resolution="superseded",
            )
        else:
            row = tx.one(
                "contradiction_insert",
                **common,
                classification="contradiction",
                explanation=(
                    f"the asserted value {value!r} of {entity} {prop} differs from the value {old_value!r} "
                    "of a fact valid at the same time"
                ),
                method="structured",
                resolved=False,
                resolution=None,
            )
        if row is not None:
            out.contradictions.append(Contradiction.from_row(row))
    # the key's timeline, recomputed with the new statement (and its contradictions) in it
    timeline.settle(tx, settings, [new_fact["id"]])
    row = tx.one("fact_get", id=new_fact["id"], as_of=None, known_at=None)
    assert row is not None
    new_fact.update(valid_until=row["valid_until"], recorded_valid_until=row["recorded_valid_until"],
                    superseded_by=row["superseded_by"])
    new_fact["current"] = _current_now(new_fact)
    return out


def assert_fact(
    store: Store,
    namespace: str,
    content: str,
    *,
    entity: str | None = None,
    property: str | None = None,
    value: str | None = None,
    confidence: float = 1.0,
    source_episode_ids: list[int] | None = None,
    supersede: bool = False,
    valid_from: datetime | None = None,
    valid_until: datetime | None = None,
) -> AssertedFact:
    """A caller-made fact (origin 'asserted') with optional cited episodes and a conflict check.

    ``valid_from``/``valid_until`` state when the fact was true in the world (event time;
    default: from now, open-ended). A fact older than the current one on its
    entity+property is stored as history and supersedes nothing (``structured_conflicts``).
    """
    slug = validate.slug(namespace)
    start, end = event_interval(valid_from, valid_until)
    text = validate.content(store.settings, content)
    entity = _short(store.settings, entity, "entity")
    property = _short(store.settings, property, "property")
    value = _short(store.settings, value, "value")
    if (entity is None) != (property is None):
        raise errors.InvalidInput("entity and property go together: give both or neither")
    confidence = validate.probability(confidence)
    cited = sorted(set(source_episode_ids or ()))
    with store.db.transaction() as tx:
        resolve_id(tx, slug)  # fail before embedding on an unknown namespace
    embedding = store.embedder.embed_one(text, [slug])
    entity_embedding = entities.name_embedding(store.embedder, entity, [slug])  # its entity: exact name or a new one
    with store.db.transaction() as tx:
        namespace_id = resolve_id(tx, slug)
        if cited:
            tree = list(resolve_trees(tx, slug))
            found = {int(r["id"]) for r in tx.all("fact_episodes_in_tree", ids=cited, namespace_ids=tree)}
            missing = [i for i in cited if i not in found]
            if missing:
                raise errors.RecordNotFound(
                    f"episode(s) {', '.join(map(str, missing))} not found in {slug} or its sub-namespaces"
                )
        row = insert_fact(
            tx,
            store,
            namespace_id=namespace_id,
            content=text,
            origin="asserted",
            confidence=confidence,
            entity=entity,
            property=property,
            value=value,
            parents=[("episode", i) for i in cited],
            embedding=embedding,
            valid_from=start,
            valid_until=end,
            stated_valid_until=end,
        )
        row["entity_id"] = entities.link_asserted_fact(tx, store, row, entity_embedding)
        conflicts = structured_conflicts(tx, row, supersede=supersede, settings=store.settings)
    return AssertedFact(
        fact=Fact.from_row(row),
        contradictions=conflicts.contradictions,
        superseded_fact_ids=conflicts.superseded_fact_ids,
    )


def query(
    store: Store,
    namespaces: Sequence[str] = ("/",),
    *,
    entity: str | None = None,
    property: str | None = None,
    origin: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    include_history: bool = False,
    as_of: datetime | None = None,
    known_at: datetime | None = None,
    limit: int | None = None,
    offset: int | None = None,
) -> list[Fact]:
    """Facts in the trees, newest first: those valid at ``as_of`` (event time) as Stash knew
    them at ``known_at`` (system time), both now by default; every state with
    ``include_history`` when neither time is given. ``valid_until`` and ``current`` are
    reported as known at ``known_at``. The times arrive parsed (``validate.timestamp``)."""
    limit, offset = validate.page(limit, offset)
    if origin is not None and origin not in validate.FACT_ORIGINS:
        raise errors.InvalidInput(f"origin must be one of {', '.join(validate.FACT_ORIGINS)}")
    params = {
        "entity": _short(store.settings, entity, "entity"),
        "property": _short(store.settings, property, "property"),
        "origin": origin,
        "since": since,
        "until": until,
        "as_of": as_of,
        "known_at": known_at,
        "include_history": bool(include_history),
        "limit": limit,
        "offset": offset,
    }
    with store.db.transaction() as tx:
        all_ns, ids = read_scope(tx, namespaces)
        rows = tx.all("facts_query", all_namespaces=all_ns, namespace_ids=ids, **params)
    return [Fact.from_row(r) for r in rows]


def _load(
    tx: Session,
    ident: int,
    namespaces: Sequence[str] | None,
    as_of: datetime | None = None,
    known_at: datetime | None = None,
) -> Row:
    row = tx.one("fact_get", id=ident, as_of=as_of, known_at=known_at)
    row = found_in_scope(row, scope_ids(tx, namespaces), f"fact {ident}")
    if known_at is not None and row["recorded_at"] > known_at:
        raise errors.RecordNotFound(f"fact {ident} was recorded after known_at")
    return row


def get(
    store: Store,
    fact_id: int,
    namespaces: Sequence[str] | None = None,
    *,
    as_of: datetime | None = None,
    known_at: datetime | None = None,
) -> Fact:
    """One fact by id, in any state (see ``current``, ``valid_until``, ``withdrawn_at``).

    ``current`` says whether it was valid at ``as_of`` (event time) as Stash knew it at
    ``known_at`` (system time), both now by default; ``valid_until`` and
    ``superseded_by`` are as known at ``known_at``. A fact recorded after ``known_at`` is
    not found.
    """
    with store.db.transaction() as tx:
        return Fact.from_row(_load(tx, fact_id, namespaces, as_of, known_at))


def get_with_lineage(
    store: Store,
    fact_id: int,
    namespaces: Sequence[str] | None = None,
    *,
    as_of: datetime | None = None,
    known_at: datetime | None = None,
) -> FactLineage:
    """A fact (as ``get`` reads it) with its parents and the rows derived from it."""
    with store.db.transaction() as tx:
        row = _load(tx, fact_id, namespaces, as_of, known_at)
        scope = scope_ids(tx, namespaces)  # only ids inside the caller's trees are handed out
        parents = lineage.parents_of(tx, "fact", int(row["id"]), scope)
        children = lineage.children_of(tx, "fact", int(row["id"]), scope)
    return FactLineage(fact=Fact.from_row(row), parents=parents, children=children)


def withdraw(store: Store, fact_id: int, reason: str, namespaces: Sequence[str] | None = None) -> FactWithdrawal:
    """Withdraw a fact (it stays as history) and cascade to what was derived only from it."""
    why = validate.content(store.settings, reason, "reason")
    with store.db.transaction() as tx:
        row = _load(tx, fact_id, namespaces)
        ident = int(row["id"])
        if not tx.execute("fact_withdraw", id=ident, reason=why):
            raise errors.InvalidTransition(f"fact {ident} is already withdrawn")
        cascade = lineage.withdraw_cascade(
            tx, [("fact", ident)], f"source fact {ident} withdrawn: {why[:200]}", settings=store.settings,
            scope=scope_ids(tx, namespaces),
        )
    return FactWithdrawal(fact_id=ident, withdrawn=True, cascade=cascade)


def purge(store: Store, fact_id: int, namespaces: Sequence[str] | None = None) -> FactPurge:
    """Erase a fact and everything derived from it (``erasure.erase``): rows, end history,
    lineage, cached vectors; what gathered it is gathered again from what remains."""
    with store.db.transaction() as tx:
        row = _load(tx, fact_id, namespaces)
        ident = int(row["id"])
        erased = erasure.erase(tx, store, [("fact", ident)], scope=scope_ids(tx, namespaces))
    return FactPurge(fact_id=ident, namespace=row["namespace"], purged=True, erased=erased)


def purge_preview(store: Store, fact_id: int, namespaces: Sequence[str] | None = None) -> ErasurePreview:
    """What ``purge`` would erase, by running it and rolling it back (``erasure.rehearse``)."""
    with store.db.transaction() as tx:
        row = _load(tx, fact_id, namespaces)
        root = ("fact", int(row["id"]))
        scope = scope_ids(tx, namespaces)
        erased = erasure.rehearse(tx, lambda: erasure.erase_rows(tx, store, [root], scope=scope).rows)
        return erasure.preview(tx, root, erased, scope)
