"""Causal-links stage: cause → effect links among new facts.

Input: current facts after the stage's own cursor (``facts.id``), never the
relationships cursor: a shared cursor would let one stage consume the facts before the
other saw them. Windows of ``WINDOW`` facts, one model call per
window with at least 2 facts; dead-lettered facts are retried first.
Validation: cause/effect ids must be in the window (else the answer is retried);
self-loops are dropped; confidence clamped to [0.5, 1].
Output: ``causal_links`` rows (method extracted, the model's rationale) with lineage to
the cause and effect facts.
Cursor: max fact id of the window.
Idempotency: ON CONFLICT DO NOTHING on the live (cause, effect) unique index.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stash_pipeline import errors
from stash_pipeline.memory import lineage
from stash_pipeline.stages import common, prompts

if TYPE_CHECKING:
    from stash_pipeline.stages.context import StageContext

WINDOW = 30


def run(ctx: StageContext) -> None:
    retry, gone = common.retry_facts(ctx)
    if retry or gone:
        process(ctx, retry, cursor=None, resolved=gone)
    for facts, cursor in common.fact_batches(ctx, WINDOW):
        process(ctx, facts, cursor=cursor)


def process(ctx: StageContext, facts: list[dict[str, Any]], *, cursor: int | None, resolved: list[int] | None = None) -> None:
    ctx.report.rows_in += len(facts)
    ids = [int(f["id"]) for f in facts]
    links: list[prompts.CausalDraft] = []
    failure: str | None = None
    if len(facts) >= 2:
        allowed = set(ids)

        def validate(answer: prompts.CausalAnswer) -> None:
            common.check_ids([x for link in answer.links for x in (link.cause_id, link.effect_id)], allowed, "fact")

        try:
            answer = ctx.call(
                prompts.CAUSAL_LINKS,
                "Facts:\n" + prompts.listing([(int(f["id"]), f["content"]) for f in facts], 300),
                prompts.CausalAnswer,
                validate,
            )
            links = answer.links
        except errors.ModelResponseInvalid as exc:
            failure = f"ModelResponseInvalid: {exc.message}"
    with ctx.batch(cursor=cursor) as batch:
        batch.done("fact", resolved or ())
        if not batch.settle("fact", ids, failure):
            return
        for link in links:
            if link.cause_id == link.effect_id:
                common.bump(ctx, "self_loops_dropped")
                continue
            with batch.item("fact", [link.cause_id]):
                row = batch.tx.one(
                    "stage_causal_insert",
                    namespace_id=ctx.namespace_id,
                    cause_id=link.cause_id,
                    effect_id=link.effect_id,
                    confidence=prompts.clamp(link.confidence, 0.5, 1.0, 0.7),
                    rationale=link.rationale[:2000] or None,
                )
                if row is not None:
                    lineage.add(
                        batch.tx, ctx.namespace_id, "causal_link", int(row["id"]),
                        [("fact", link.cause_id), ("fact", link.effect_id)],
                    )
                    batch.wrote(1)
