"""Entity resolution: which entity of the namespace a name written by a stage is.

The facts stage resolves each fact's ``entity``, the relationships stage both ends of
each relationship. A name is resolved by the first rule that answers:

1. alias: its normalised form (``memory.entities.normalise``: case, punctuation and
   spacing folded, "she (Alice)" read as "alice") is an alias in the namespace;
2. token subset: a one-word name that is the first or last word of a known 2–3 word
   alias ("Alice" → "Alice Chen"), or a 2–3 word name whose first or last word is a
   known one-word alias ("Alice Chen" → "Alice"), when exactly one entity of the
   namespace qualifies; an entity already known by another full name sharing that word
   ("Alice Wong") does not qualify for "Alice Chen";
3. embedding: the nearest live entity's name embedding is at least
   ``STASH_ENTITY_SAME_THRESHOLD`` similar (all-MiniLM-L6-v2 puts spelling variants such as
   "Acme Corp" / "ACME Corporation" at 0.98 and different names at most ~0.81);
4. model check: names whose nearest entity lies in [``STASH_ENTITY_CHECK_THRESHOLD``,
   ``STASH_ENTITY_SAME_THRESHOLD``) go to the model in ONE small structured call per
   batch (``prompts.ENTITIES``), recorded in the model-call ledger under the stage's name
   like every other stage call; "same" joins the entity. A failed call joins nothing;
5. otherwise a new entity, with the name as its first alias.

Names that normalise to nothing or only to pronouns ("she") resolve to no entity.
Every name resolved to an entity is recorded as its alias, so the next occurrence is an
exact match. ``plan`` reads and calls the model OUTSIDE any transaction; ``entity_for``
runs inside the stage's batch transaction, creates what is new and returns the id.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from stash_pipeline import errors
from stash_pipeline.embedding.vectors import unit_vector
from stash_pipeline.memory.entities import PRONOUNS, find_or_create, normalise
from stash_pipeline.stages import common, prompts

if TYPE_CHECKING:
    from stash_pipeline.db.gateway import Session
    from stash_pipeline.stages.context import StageContext

#: a full name in the token-subset rule has this many words
FULL_NAME_WORDS = (2, 3)
#: the embedding rule compares a name with the one nearest entity of the namespace
NEAREST = 1


def resolvable_key(name: str | None) -> str | None:
    """The normalised form a name is resolved by, or None when it names nothing."""
    key = normalise(name or "")
    if not key or all(word in PRONOUNS for word in key.split()):
        return None
    return key


def subset_match(key: str, aliases: Iterable[tuple[Hashable, str]]) -> Hashable | None:
    """The one entity a name matches by the token-subset rule, or None (no match, or ambiguous).

    ``aliases`` are (entity, normalised alias) pairs of the namespace.
    """
    words = key.split()
    pairs = [(entity, alias.split()) for entity, alias in aliases]
    if len(words) == 1:
        if len(words[0]) < 2:
            return None
        found = {e for e, a in pairs if len(a) in FULL_NAME_WORDS and words[0] in (a[0], a[-1])}
    elif len(words) in FULL_NAME_WORDS:
        ends = {words[0], words[-1]}
        found = {e for e, a in pairs if len(a) == 1 and a[0] in ends}
        # Known by another full name that shares the word: "Alice Chen" is not "Alice Wong".
        other = {e for e, a in pairs if len(a) in FULL_NAME_WORDS and a != words and ends & {a[0], a[-1]}}
        found -= other
    else:
        return None
    return next(iter(found)) if len(found) == 1 else None


@dataclass
class _Target:
    """What a name resolves to: a known entity, or the new entity keyed by ``new_key``."""

    entity_id: int | None = None
    new_key: str | None = None
    method: str = ""


@dataclass
class _NewEntity:
    name: str
    key: str
    embedding: Any


@dataclass
class _Unsure:
    """A name whose nearest entity is in the band where the model decides."""

    key: str
    name: str
    embedding: Any
    best: dict[str, Any]


class Resolver:
    """Resolves the names of one stage batch: ``plan`` them, then ``entity_for`` each in the batch."""

    def __init__(self, ctx: StageContext) -> None:
        self.ctx = ctx
        self._targets: dict[str, _Target] = {}
        self._new: dict[str, _NewEntity] = {}

    # -- outside the transaction ------------------------------------------------------------
    def plan(self, names: Iterable[str | None]) -> None:
        """Decide every name's entity (reads, embeddings, at most one model call)."""
        ctx = self.ctx
        waiting: dict[str, str] = {}
        for name in names:
            key = resolvable_key(name)
            if key and key not in self._targets and key not in waiting:
                waiting[key] = " ".join((name or "").split())
        if not waiting:
            return
        known = ctx.read("entity_alias_lookup", namespace_id=ctx.namespace_id, normalised=list(waiting))
        for row in known:
            self._decide(row["normalised"], _Target(entity_id=int(row["entity_id"]), method="alias"))
            waiting.pop(row["normalised"], None)
        if not waiting:
            return
        vectors = ctx.embed(list(waiting))
        unsure: list[_Unsure] = []
        for (key, name), vector in zip(waiting.items(), vectors, strict=True):
            target = self._by_subset(key) or self._by_embedding(key, name, vector, unsure)
            if target is not None:
                self._decide(key, target)
        self._check_with_model(unsure)

    def _by_subset(self, key: str) -> _Target | None:
        words = key.split()
        rows = self.ctx.read("entity_alias_word_matches", namespace_id=self.ctx.namespace_id, words=words)
        aliases: list[tuple[Hashable, str]] = [(("entity", int(r["entity_id"])), r["normalised"]) for r in rows]
        aliases += [(("new", new.key), new.key) for new in self._new.values()]
        match = subset_match(key, aliases)
        if match is None:
            return None
        kind, ref = match  # type: ignore[misc]
        return _Target(entity_id=ref, method="subset") if kind == "entity" else _Target(new_key=ref, method="subset")

    def _by_embedding(self, key: str, name: str, vector: Any, unsure: list[_Unsure]) -> _Target | None:
        settings = self.ctx.settings
        with self.ctx.store.db.transaction() as tx:
            tx.one("stage_hnsw_iterative_scan")  # a filtered HNSW scan must reach this namespace
            nearest = tx.all("entity_nearest", namespace_id=self.ctx.namespace_id, embedding=vector, limit=NEAREST)
        best = nearest[0] if nearest else None
        unit = unit_vector(vector)
        pending = max(self._new.values(), key=lambda n: float(np.dot(unit, n.embedding)), default=None)
        if pending is not None and float(np.dot(unit, pending.embedding)) >= settings.entity_same_threshold:
            if best is None or float(np.dot(unit, pending.embedding)) >= float(best["similarity"]):
                return _Target(new_key=pending.key, method="embedding")
        if best is not None and float(best["similarity"]) >= settings.entity_same_threshold:
            return _Target(entity_id=int(best["id"]), method="embedding")
        if best is not None and float(best["similarity"]) >= settings.entity_check_threshold:
            unsure.append(_Unsure(key, name, unit, best))
            return None
        self._new[key] = _NewEntity(name=name, key=key, embedding=unit)
        return _Target(new_key=key, method="new")

    def _check_with_model(self, unsure: list[_Unsure]) -> None:
        if not unsure:
            return
        listing = prompts.listing(
            [
                (n, f"NAME: {u.name} | KNOWN: {u.best['name']} (also: {', '.join(u.best['aliases']) or u.best['name']})")
                for n, u in enumerate(unsure, 1)
            ]
        )
        allowed = set(range(1, len(unsure) + 1))

        def validate(answer: prompts.EntitiesAnswer) -> None:
            common.check_ids((p.pair for p in answer.pairs), allowed, "pair")

        same: set[int] = set()
        try:
            answer = self.ctx.call(prompts.ENTITIES, "Pairs:\n" + listing, prompts.EntitiesAnswer, validate)
            same = {p.pair for p in answer.pairs if p.same}
        except errors.ModelResponseInvalid:
            # Unsure and unanswered: a new entity, which a merge can still join later.
            common.bump(self.ctx, "entity_checks_failed")
        for n, u in enumerate(unsure, 1):
            if n in same:
                self._decide(u.key, _Target(entity_id=int(u.best["id"]), method="model"))
            else:
                self._new[u.key] = _NewEntity(name=u.name, key=u.key, embedding=u.embedding)
                self._decide(u.key, _Target(new_key=u.key, method="new"))

    def _embedding_of(self, key: str) -> Any:
        return unit_vector(self.ctx.embed([key])[0])

    def _decide(self, key: str, target: _Target) -> None:
        self._targets[key] = target
        common.bump(self.ctx, f"entities_by_{target.method}")

    def known_entity(self, name: str | None) -> int | None:
        """The existing entity a planned name resolved to (None: a new entity, or no name)."""
        key = resolvable_key(name)
        target = self._targets.get(key) if key else None
        return target.entity_id if target else None

    # -- inside the batch transaction -----------------------------------------------------
    def entity_for(self, tx: Session, name: str | None) -> int | None:
        """The entity id of a planned name, creating the entity and recording the alias as needed."""
        key = resolvable_key(name)
        if key is None:
            return None
        namespace_id = self.ctx.namespace_id
        target = self._targets.get(key) or _Target(new_key=key, method="new")
        entity_id = target.entity_id
        if entity_id is None:
            entity_id = self._create(tx, target.new_key or key, name or key)
        tx.one(
            "entity_alias_add",
            entity_id=entity_id,
            namespace_id=namespace_id,
            alias=" ".join((name or "").split()) or key,
            normalised=key,
        )
        return entity_id

    def _create(self, tx: Session, key: str, name: str) -> int:
        # Looked up each time rather than remembered: a rolled-back item takes its new entity with it.
        new = self._new.get(key) or _NewEntity(name=name, key=key, embedding=self._embedding_of(key))
        entity_id, created = find_or_create(
            tx, self.ctx.namespace_id, new.name, key,
            embedding=new.embedding, embedding_model=self.ctx.settings.embedding_model_name,
        )
        if created:
            common.bump(self.ctx, "entities_created")
        return entity_id

    def link_fact(self, tx: Session, fact_id: int, name: str | None) -> None:
        """Point a new fact at the entity of its ``entity`` name."""
        entity_id = self.entity_for(tx, name)
        if entity_id is not None:
            tx.execute("entity_link_fact", id=fact_id, entity_id=entity_id)

    def link_relationship(self, tx: Session, relationship_id: int, source: str, target: str) -> None:
        """Point a new relationship's two ends at their entities."""
        tx.execute(
            "entity_link_relationship",
            id=relationship_id,
            from_entity_id=self.entity_for(tx, source),
            to_entity_id=self.entity_for(tx, target),
        )
