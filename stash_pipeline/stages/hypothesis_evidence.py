"""Hypothesis-evidence stage: judge new facts as evidence for open hypotheses.

Input: current facts after the stage's own cursor (30 per batch) × proposed/testing
hypotheses (up to 50), each shown with status, confidence and verification plan; with
no open hypothesis the stage does nothing. Dead-lettered facts are retried first.
Validation: hypothesis and fact ids must be in the listing (else retried); unknown
verdicts count as irrelevant and are skipped.
Output: every other verdict is logged in ``hypothesis_evidence`` with the model's
reasoning (``memory.hypotheses.record_evidence``, lineage to hypothesis and fact), then:
supports ≥ STASH_HYPOTHESIS_AUTO_CONFIRM_THRESHOLD moves proposed → testing and testing →
confirmed (a fact, origin hypothesis, via ``confirm_tx``; the shared contradiction check
runs for it); contradicts ≥ STASH_HYPOTHESIS_AUTO_REJECT_THRESHOLD rejects it with the
reasoning; anything below the thresholds sets confidence := new_confidence (contradicts
lowers it too).
Cursor: max fact id of the batch. Idempotency: one verdict per (hypothesis, fact) — a
repeated verdict is not recorded and triggers no action.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stash_pipeline import errors
from stash_pipeline.memory import hypotheses
from stash_pipeline.stages import common, contradictions, prompts

if TYPE_CHECKING:
    from stash_pipeline.stages.context import Batch, StageContext

BATCH = 30
VERDICTS = {"supports", "weakens", "contradicts"}


def run(ctx: StageContext) -> None:
    if not ctx.read("stage_open_hypotheses", namespace_id=ctx.namespace_id):
        ctx.report.message = "no open hypotheses"
        return
    retry, gone = common.retry_facts(ctx)
    if retry or gone:
        process(ctx, retry, cursor=None, resolved=gone)
    for facts, cursor in common.fact_batches(ctx, BATCH):
        process(ctx, facts, cursor=cursor)


def process(ctx: StageContext, facts: list[dict[str, Any]], *, cursor: int | None, resolved: list[int] | None = None) -> None:
    ctx.report.rows_in += len(facts)
    open_hypotheses = ctx.read("stage_open_hypotheses", namespace_id=ctx.namespace_id)
    fact_ids = [int(f["id"]) for f in facts]
    verdicts: list[prompts.VerdictDraft] = []
    failure: str | None = None
    if facts and open_hypotheses:
        hyp_set, fact_set = {int(h["id"]) for h in open_hypotheses}, set(fact_ids)

        def validate(answer: prompts.HypothesisAnswer) -> None:
            common.check_ids((v.hypothesis_id for v in answer.verdicts), hyp_set, "hypothesis")
            common.check_ids((v.fact_id for v in answer.verdicts), fact_set, "fact")

        user = "Hypotheses:\n" + prompts.listing(
            [
                (int(h["id"]), f"({h['status']}, confidence {float(h['confidence']):.2f}) {h['content']}"
                 f" | plan: {h['verification_plan']}")
                for h in open_hypotheses
            ],
            900,
        ) + "\nFacts:\n" + prompts.listing([(int(f["id"]), f["content"]) for f in facts])
        try:
            verdicts = ctx.call(prompts.HYPOTHESIS_EVIDENCE, user, prompts.HypothesisAnswer, validate).verdicts
        except errors.ModelResponseInvalid as exc:
            failure = f"ModelResponseInvalid: {exc.message}"
    verdicts = [v for v in verdicts if v.verdict.strip().lower() in VERDICTS]
    # Confirmations create facts: run the shared contradiction check before the transaction.
    # (A confirmed hypothesis's fact carries no entity/property, so it has no structured
    # candidates today; the call keeps every fact producer on the same path.)
    planned, _failed = contradictions.plan(
        ctx, [contradictions.NewFact(v.hypothesis_id, None, None, None) for v in verdicts]
    )
    # A confirmation inserts a fact: embed the candidates now, not inside the transaction.
    supported = sorted({v.hypothesis_id for v in verdicts if v.verdict.strip().lower() == "supports"})
    content = {int(h["id"]): h["content"] for h in open_hypotheses}
    vectors = dict(zip(supported, ctx.embed([content[i] for i in supported]), strict=True))
    with ctx.batch(cursor=cursor) as batch:
        batch.done("fact", resolved or ())
        if not batch.settle("fact", fact_ids, failure):
            return
        created: dict[int, int] = {}
        for verdict in verdicts:
            with batch.item("fact", [verdict.fact_id]):
                _apply(ctx, batch, verdict, created, vectors.get(verdict.hypothesis_id))
        contradictions.apply(ctx, batch, planned, created)


def _apply(
    ctx: StageContext, batch: Batch, verdict: prompts.VerdictDraft, created: dict[int, int], embedding: Any
) -> None:
    settings = ctx.settings
    tx = batch.tx
    kind = verdict.verdict.strip().lower()
    confidence = prompts.clamp(verdict.confidence, 0.0, 1.0, 0.5)
    new_confidence = prompts.clamp(verdict.new_confidence, 0.0, 1.0, -1.0)
    row = hypotheses.load(tx, verdict.hypothesis_id, {ctx.namespace_id}, lock=True)
    action = "none"
    if row["status"] in ("proposed", "testing"):
        if kind == "supports" and confidence >= settings.hypothesis_auto_confirm_threshold:
            action = "testing" if row["status"] == "proposed" else "confirmed"
        elif kind == "contradicts" and confidence >= settings.hypothesis_auto_reject_threshold:
            action = "rejected"
        elif new_confidence >= 0:
            action = "confidence"
    logged = hypotheses.record_evidence(
        tx,
        hypothesis_id=verdict.hypothesis_id,
        fact_id=verdict.fact_id,
        namespace_id=ctx.namespace_id,
        verdict=kind,
        confidence=confidence,
        new_confidence=None if new_confidence < 0 else new_confidence,
        reasoning=verdict.reasoning.strip()[:4000],
        action=action,
    )
    if logged is None:
        return  # this fact already has a verdict on this hypothesis: nothing new to do
    batch.wrote(1)
    if action == "testing":
        hypotheses.test_tx(tx, row)
    elif action == "confirmed":
        _hypothesis, fact = hypotheses.confirm_tx(
            tx, ctx.store, row, embedding=embedding, rationale=verdict.reasoning.strip()[:4000] or None,
            evidence_fact_id=verdict.fact_id,
        )
        created[verdict.hypothesis_id] = int(fact["id"])
        batch.wrote(1)
    elif action == "rejected":
        hypotheses.reject_tx(tx, row, verdict.reasoning.strip()[:2000] or "contradicted by new evidence")
    elif action == "confidence":
        hypotheses.set_confidence(tx, verdict.hypothesis_id, new_confidence)
    if action != "none":
        common.bump(ctx, f"hypotheses_{action}")
