"""The contradiction check shared by every fact producer (facts, failure_patterns, hypothesis_evidence).

Input: the facts a batch is about to create (``NewFact``: a key local to the batch plus
entity / property / value and the event time it will hold from, ``valid_from``).
Event time is the one rule of ``memory.timeline`` (the same ``assert_fact`` uses): the
facts of the namespace with the same key (lower(property), and lower(entity) or the same
resolved entity, so facts stated under another alias of it count) and the earlier new
facts of the batch form the key's timeline; ``plan`` sets the new fact's
``valid_until`` where the earliest later known value begins (the producer inserts it
closed there: a late-arriving old statement never supersedes a newer fact), and the
values holding at its start are the candidates (values at different times do not
contradict). A multi-valued property (``timeline.single_valued``) is not checked. Pairs
are classified by the model several per call (replacement | contradiction | compatible,
with confidence and explanation).
Output (``apply``, inside the batch transaction): a replacement at or above
``STASH_CONTRADICTION_SUPERSEDE_THRESHOLD`` retires the old fact (``valid_until`` = the
new fact's ``valid_from``, ``superseded_by``, ``retired_at``; its relationships close with
it) and records a resolved contradiction (method auto, resolution superseded); any other
replacement/contradiction is recorded unresolved (method structured); compatible pairs
write nothing. Every contradiction row gets lineage to both facts and keeps the model's
explanation.
Cursor: none (runs inside its producer's batch). Idempotency: one row per
(old_fact_id, new_fact_id) — ON CONFLICT DO NOTHING.

Planning (``plan``) reads and calls the model before the producer's transaction opens,
so no transaction is held across a model call.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from stash_pipeline import errors
from stash_pipeline.db.gateway import translate_errors
from stash_pipeline.memory import lineage, timeline
from stash_pipeline.stages import prompts
from stash_pipeline.stages.context import ITEM_ERRORS

if TYPE_CHECKING:
    from stash_pipeline.stages.context import Batch, StageContext


PAIRS_PER_CALL = 10


@dataclass
class NewFact:
    key: int
    entity: str | None
    property: str | None
    value: str | None
    #: event time the fact will hold from (None: now)
    valid_from: datetime | None = None
    #: set by ``plan``: where the fact ends as history (None: open-ended, it may be current)
    valid_until: datetime | None = None
    #: the known entity its name resolved to (None: a new entity or none): facts stated
    #: under another alias of that entity are on the same key
    entity_id: int | None = None


@dataclass
class Verdict:
    new_key: int
    old_fact_id: int | None  # an existing current fact …
    old_key: int | None  # … or an earlier new fact of the same batch
    entity: str
    property: str
    old_value: str
    new_value: str
    classification: str
    confidence: float
    explanation: str


def plan(ctx: StageContext, new_facts: list[NewFact]) -> tuple[list[Verdict], set[int]]:
    """Classify every conflicting pair of the new facts; returns verdicts and keys whose check failed.

    Event time is ``memory.timeline.place``: it sets each new fact's ``valid_until`` (a
    later known value ends it as history) and names the values holding at its start, the
    only pairs the model is asked about. Facts of a multi-valued property are not checked.
    A pair chunk whose answer stays invalid marks its new facts as failed (the producer
    dead-letters their sources); ModelUnavailable propagates (run-level).
    """
    pairs: list[tuple[NewFact, int | None, int | None, str]] = []
    seen: list[NewFact] = []
    now = datetime.now(UTC)
    for fact in new_facts:
        if not (fact.entity and fact.property and fact.value) or not timeline.single_valued(ctx.settings, fact.property):
            continue
        start = fact.valid_from or now
        # other facts on the key: stored ones (ref = id) and earlier new facts of the batch
        # (ref = -1 - batch key, so the two never collide)
        known = [
            timeline.Known(int(row["id"]), row["value"], row["valid_from"], row["valid_until"])
            for row in ctx.read(
                "timeline_contradiction_candidates",
                namespace_id=ctx.namespace_id,
                entity=fact.entity,
                entity_id=fact.entity_id,
                property=fact.property,
                value=fact.value,
                valid_from=start,
            )
        ]
        known += [
            timeline.Known(-1 - earlier.key, earlier.value, earlier.valid_from or now, earlier.valid_until)
            for earlier in seen
            if (timeline.same_value(earlier.entity, fact.entity)
                or (fact.entity_id is not None and earlier.entity_id == fact.entity_id))
            and timeline.same_value(earlier.property, fact.property)
        ]
        placed = timeline.place(fact.value, start, None, known)
        fact.valid_until = placed.valid_until
        for other in placed.covered:
            old_id, old_key = (other.ref, None) if other.ref >= 0 else (None, -1 - other.ref)
            pairs.append((fact, old_id, old_key, other.value or ""))
        seen.append(fact)

    verdicts: list[Verdict] = []
    failed: set[int] = set()
    if pairs:
        ctx.report.details["contradiction_pairs"] = ctx.report.details.get("contradiction_pairs", 0) + len(pairs)
    for start in range(0, len(pairs), PAIRS_PER_CALL):
        chunk = pairs[start : start + PAIRS_PER_CALL]
        lines = [
            f"[{n}] entity: {fact.entity} | property: {fact.property} | OLD value: {old_value} | NEW value: {fact.value}"
            for n, (fact, _old_id, _old_key, old_value) in enumerate(chunk, 1)
        ]
        ctx.report.details["contradiction_calls"] = ctx.report.details.get("contradiction_calls", 0) + 1
        try:
            answer = ctx.call(prompts.CONTRADICTIONS, "Pairs:\n" + "\n".join(lines), prompts.ContradictionsAnswer)
        except errors.ModelResponseInvalid:
            failed.update(fact.key for fact, *_ in chunk)
            continue
        by_pair = {v.pair: v for v in answer.pairs}
        for n, (fact, old_id, old_key, old_value) in enumerate(chunk, 1):
            verdict = by_pair.get(n)
            if verdict is None or verdict.classification == "compatible":
                continue
            verdicts.append(
                Verdict(
                    new_key=fact.key,
                    old_fact_id=old_id,
                    old_key=old_key,
                    entity=fact.entity or "",
                    property=fact.property or "",
                    old_value=old_value,
                    new_value=fact.value or "",
                    classification=verdict.classification,
                    confidence=prompts.clamp(verdict.confidence, 0.0, 1.0, 0.5),
                    explanation=verdict.explanation[:2000],
                )
            )
    return verdicts, failed


def apply(ctx: StageContext, batch: Batch, verdicts: list[Verdict], fact_ids: dict[int, int]) -> int:
    """Write the planned verdicts whose facts exist in this batch; returns rows written."""
    threshold = ctx.settings.contradiction_supersede_threshold
    written = 0
    for verdict in verdicts:
        new_id = fact_ids.get(verdict.new_key)
        old_id = verdict.old_fact_id if verdict.old_fact_id is not None else fact_ids.get(verdict.old_key or -1)
        if new_id is None or old_id is None or new_id == old_id:
            continue  # the new fact was not created (failed, deduplicated) — nothing to relate
        supersede = verdict.classification == "replacement" and verdict.confidence >= threshold
        try:
            # A savepoint per pair: a constraint on one pair must not sink the batch
            # (its facts are already written); the failure is counted, not hidden.
            with translate_errors(), batch.tx.conn.transaction():
                written += _write(ctx, batch, verdict, old_id, new_id, supersede)
        except ITEM_ERRORS as exc:
            ctx.report.items_failed += 1
            ctx.report.details.setdefault("contradiction_errors", []).append(f"{old_id}->{new_id}: {exc}")
    # the keys' timelines recomputed with the batch's new facts and verdicts in them: a
    # superseded value ends where its replacement begins, an open pair holds at once
    timeline.settle(batch.tx, ctx.settings, fact_ids.values())
    batch.wrote(written)
    return written


def _write(ctx: StageContext, batch: Batch, verdict: Verdict, old_id: int, new_id: int, supersede: bool) -> int:
    row = batch.tx.one(
        "contradiction_insert",
        namespace_id=ctx.namespace_id,
        old_fact_id=old_id,
        new_fact_id=new_id,
        entity=verdict.entity,
        property=verdict.property,
        old_value=verdict.old_value,
        new_value=verdict.new_value,
        classification=verdict.classification,
        confidence=verdict.confidence,
        explanation=verdict.explanation,
        method="auto" if supersede else "structured",
        resolved=supersede,
        resolution="superseded" if supersede else None,
    )
    if row is None:
        return 0
    lineage.add(batch.tx, ctx.namespace_id, "contradiction", int(row["id"]), [("fact", old_id), ("fact", new_id)])
    ctx.report.details["contradictions"] = ctx.report.details.get("contradictions", 0) + 1
    if supersede:
        ctx.report.details["superseded"] = ctx.report.details.get("superseded", 0) + 1
    return 1
