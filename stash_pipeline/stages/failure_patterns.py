"""Failure-patterns stage: spot failures happening again, and patterns behind them.

Input: two cursors. ``cursor`` over episodes: new evidence (30 per batch; episodes of
kind ``repeat_failure`` are passed, never used as evidence, so a repeat cannot
re-trigger itself). ``aux_cursor`` over failures: a NEW failure is first compared with
the most recent evidence before the cursor. Every live failure (newest 50) is re-checked
against each batch of new evidence — not only once. Dead-lettered evidence episodes are
retried first. No live failure: the cursors move on without a model call.
Validation: failure and evidence ids must be in the listing (else retried).
Output: a repetition → a new EMBEDDED episode of kind ``repeat_failure`` with lineage to
the failure and the evidence episode; a pattern → a fact (origin failure_pattern,
entity/property/value when given) through ``insert_fact`` with lineage to the failure
and the evidence, after the shared contradiction check — or, if a current fact is
already that close, a reinforcement of it. Its event time is its sources': from the
earlier of the failure's creation and the evidence's ``occurred_at``.
Cursor: max episode id / max failure id of the batch.
Idempotency: repeat episodes carry the key ``repeat_failure:<failure>:<evidence>``
(ON CONFLICT DO NOTHING); pattern facts dedup by similarity.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from stash_pipeline import errors
from stash_pipeline.embedding.vectors import unit_vector
from stash_pipeline.memory import lineage
from stash_pipeline.memory.facts import insert_fact
from stash_pipeline.stages import common, contradictions, prompts
from stash_pipeline.stages.entity_resolution import Resolver
from stash_pipeline.stages.facts import grounding_errors

if TYPE_CHECKING:
    from stash_pipeline.stages.context import Batch, StageContext

EVIDENCE_BATCH = 30
RECENT_EVIDENCE = 10


@dataclass
class _Pattern:
    key: int
    finding: prompts.FailureFinding
    text: str
    embedding: Any
    reinforce_id: int | None = None
    #: event time: the earliest of its sources (the failure's creation, the evidence's occurred_at)
    valid_from: datetime | None = None


def run(ctx: StageContext) -> None:
    retry_ids = ctx.pending("episode", EVIDENCE_BATCH)
    if retry_ids:
        rows = ctx.read("stage_evidence_by_ids", namespace_id=ctx.namespace_id, ids=retry_ids)
        gone = sorted(set(retry_ids) - {int(r["id"]) for r in rows})
        # One evidence episode per call on a retry: a poison episode must not take the
        # evidence that once shared its model call down with it.
        for n, row in enumerate(rows):
            process(ctx, [row], [], cursor=None, aux_cursor=None, resolved=gone if n == 0 else None)
        if not rows:
            process(ctx, [], [], cursor=None, aux_cursor=None, resolved=gone)
    while True:
        evidence = ctx.read(
            "stage_evidence_after", namespace_id=ctx.namespace_id, cursor=ctx.cursor, limit=EVIDENCE_BATCH
        )
        new_failures = ctx.read("stage_new_failures", namespace_id=ctx.namespace_id, aux_cursor=ctx.aux_cursor)
        if not evidence and not new_failures:
            return
        cursor = int(evidence[-1]["id"]) if evidence else None
        aux = int(ctx.read("stage_failure_max_id", namespace_id=ctx.namespace_id)[0]["head"]) if new_failures else None
        if not evidence:
            # a new failure with no new evidence: compare it with what was seen recently
            recent = ctx.read(
                "stage_recent_evidence", namespace_id=ctx.namespace_id, cursor=ctx.cursor, limit=RECENT_EVIDENCE
            )
            process(ctx, list(reversed(recent)), new_failures, cursor=None, aux_cursor=aux, count_input=False)
        else:
            process(ctx, evidence, None, cursor=cursor, aux_cursor=aux)


def process(
    ctx: StageContext,
    episodes: list[dict[str, Any]],
    failures: list[dict[str, Any]] | None,
    *,
    cursor: int | None,
    aux_cursor: int | None,
    resolved: list[int] | None = None,
    count_input: bool = True,
) -> None:
    if failures is None or not failures:
        failures = failures or ctx.read("stage_live_failures", namespace_id=ctx.namespace_id)
    evidence = [e for e in episodes if e["kind"] != "repeat_failure"]
    if count_input:
        ctx.report.rows_in += len(evidence)
    evidence_ids = [int(e["id"]) for e in evidence]
    findings: list[prompts.FailureFinding] = []
    failure_msg: str | None = None
    if evidence and failures:
        failure_set, evidence_set = {int(f["id"]) for f in failures}, set(evidence_ids)

        def validate(answer: prompts.FailurePatternsAnswer) -> None:
            common.check_ids((f.failure_id for f in answer.findings), failure_set, "failure")
            common.check_ids((f.evidence_id for f in answer.findings if f.evidence_id is not None), evidence_set, "evidence")

        user = "Failures:\n" + prompts.listing(
            [(int(f["id"]), f"{f['content']} | {f['reason']} | {f['lesson']}") for f in failures]
        ) + "\nEvidence:\n" + prompts.listing([(int(e["id"]), e["content"]) for e in evidence])
        try:
            findings = ctx.call(prompts.FAILURE_PATTERNS, user, prompts.FailurePatternsAnswer, validate).findings
        except errors.ModelResponseInvalid as exc:
            failure_msg = f"ModelResponseInvalid: {exc.message}"

    failure_text = {int(f["id"]): f"{f['content']} {f['reason']} {f['lesson']}" for f in failures}
    evidence_text = {int(e["id"]): e["content"] for e in evidence}
    failure_time = {int(f["id"]): f["created_at"] for f in failures}
    evidence_time = {int(e["id"]): e["occurred_at"] for e in evidence}
    repeats = [f for f in findings if f.type == "repetition" and f.evidence_id is not None and (f.evidence or "").strip()]
    repeat_texts = [f"REPEAT FAILURE [failure #{f.failure_id}]: {' '.join((f.evidence or '').split())}" for f in repeats]
    repeat_vectors = ctx.embed(repeat_texts)

    patterns: list[_Pattern] = []
    for n, finding in enumerate(f for f in findings if f.type == "pattern" and (f.pattern_fact or "").strip()):
        text = " ".join((finding.pattern_fact or "").split())
        sources = [failure_text.get(finding.failure_id, "")]
        if finding.evidence_id is not None:
            sources.append(evidence_text.get(finding.evidence_id, ""))
        if grounding_errors({"summary": text, "entity": finding.entity, "value": finding.value}, sources):
            common.bump(ctx, "patterns_ungrounded")
            continue
        times = [t for t in (failure_time.get(finding.failure_id), evidence_time.get(finding.evidence_id or 0)) if t]
        patterns.append(_Pattern(key=n, finding=finding, text=text, embedding=None,
                                 valid_from=min([*times, datetime.now(UTC)])))
    for pattern, vector in zip(patterns, ctx.embed([p.text for p in patterns]), strict=True):
        pattern.embedding = vector
        nearest = ctx.nearest_fact(vector)
        if nearest and float(nearest["similarity"]) >= ctx.settings.consolidation_dedup_threshold:
            pattern.reinforce_id = int(nearest["id"])
    unique: list[_Pattern] = []
    for pattern in patterns:  # two findings of the same pattern in one answer: keep the first
        if pattern.reinforce_id is None and any(
            float(np.dot(unit_vector(pattern.embedding), unit_vector(u.embedding))) >= ctx.settings.consolidation_dedup_threshold
            for u in unique
        ):
            continue
        unique.append(pattern)
    checked = [
        contradictions.NewFact(p.key, p.finding.entity, p.finding.property, p.finding.value, p.valid_from)
        for p in unique if p.reinforce_id is None
    ]
    planned, failed_keys = contradictions.plan(ctx, checked)
    ends = {c.key: c.valid_until for c in checked}  # a later known value ends a pattern fact as history

    resolver = Resolver(ctx)  # the pattern facts' entities, before the transaction
    resolver.plan(p.finding.entity for p in unique if p.reinforce_id is None)

    with ctx.batch(cursor=cursor, aux_cursor=aux_cursor) as batch:
        if resolved:
            batch.done("episode", resolved)
        if failure_msg:
            batch.fail("episode", evidence_ids, failure_msg)
            return
        batch.done("episode", evidence_ids)
        for finding, text, vector in zip(repeats, repeat_texts, repeat_vectors, strict=True):
            with batch.item("episode", [finding.evidence_id or 0]):
                _repeat(ctx, batch, finding, text, vector)
        created: dict[int, int] = {}
        for pattern in unique:
            if pattern.key in failed_keys:
                batch.fail("episode", [pattern.finding.evidence_id or 0], "contradiction check: invalid answer")
                continue
            with batch.item("episode", [pattern.finding.evidence_id or 0]):
                created.update(_pattern_fact(ctx, batch, pattern, resolver, ends.get(pattern.key)))
        contradictions.apply(ctx, batch, planned, created)


def _repeat(ctx: StageContext, batch: Batch, finding: prompts.FailureFinding, text: str, vector: Any) -> None:
    row = batch.tx.one(
        "stage_repeat_failure_insert",
        namespace_id=ctx.namespace_id,
        content=text,
        metadata=json.dumps({"failure_id": finding.failure_id, "evidence_episode_id": finding.evidence_id,
                             "confidence": prompts.clamp(finding.confidence, 0.5, 1.0, 0.7)}),
        idempotency_key=f"repeat_failure:{finding.failure_id}:{finding.evidence_id}",
        embedding=vector,
        embedding_model=ctx.settings.embedding_model_name,
    )
    if row is None:
        return
    lineage.add(
        batch.tx, ctx.namespace_id, "episode", int(row["id"]),
        [("failure", finding.failure_id), ("episode", int(finding.evidence_id or 0))],
    )
    batch.wrote(1)
    common.bump(ctx, "repeat_failures")


def _pattern_fact(
    ctx: StageContext, batch: Batch, pattern: _Pattern, resolver: Resolver, valid_until: datetime | None
) -> dict[int, int]:
    finding = pattern.finding
    parents = [("failure", finding.failure_id)]
    if finding.evidence_id is not None:
        parents.append(("episode", finding.evidence_id))
    if pattern.reinforce_id is not None:
        batch.tx.execute("stage_facts_reinforce", id=pattern.reinforce_id, namespace_id=ctx.namespace_id, gain=0.25)
        lineage.add(batch.tx, ctx.namespace_id, "fact", pattern.reinforce_id, parents)
        batch.wrote(1)
        common.bump(ctx, "pattern_facts_reinforced")
        return {}
    row = insert_fact(
        batch.tx,
        ctx.store,
        namespace_id=ctx.namespace_id,
        content=pattern.text,
        origin="failure_pattern",
        confidence=prompts.clamp(finding.confidence, 0.5, 1.0, 0.7),
        entity=(finding.entity or "").strip() or None,
        property=(finding.property or "").strip() or None,
        value=(finding.value or "").strip() or None,
        parents=parents,
        embedding=pattern.embedding,
        valid_from=pattern.valid_from,
        valid_until=valid_until,
    )
    resolver.link_fact(batch.tx, int(row["id"]), finding.entity)
    batch.wrote(1)
    common.bump(ctx, "pattern_facts")
    return {pattern.key: int(row["id"])}
