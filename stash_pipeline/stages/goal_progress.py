"""Goal-progress stage: model notes on active goals from new facts (never completes a goal).

Input: current facts after the stage's own cursor (30 per batch) × the namespace's active
goals (up to 50); with no active goal the stage does nothing and keeps its cursor (the
backlog query reports no work then). Dead-lettered facts are retried first.
Validation: goal and fact ids must be in the listing (else the answer is retried); an
unknown assessment counts as irrelevant; irrelevant notes are dropped; confidence
clamped to [0.5, 1].
Output: append-only ``goal_notes`` (author model, kind progress | suggested_complete |
contradicted, fact_id) through ``memory.goals.add_note``, with lineage to the fact.
Cursor: max fact id of the batch. Idempotency: one model note per (goal, fact, kind)
(``add_note`` returns None for a repeat).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stash_pipeline import errors
from stash_pipeline.memory.goals import add_note
from stash_pipeline.stages import common, prompts

if TYPE_CHECKING:
    from stash_pipeline.stages.context import StageContext

BATCH = 30
KINDS = {"progress", "suggested_complete", "contradicted"}


def run(ctx: StageContext) -> None:
    goals = ctx.read("stage_active_goals", namespace_id=ctx.namespace_id)
    if not goals:
        ctx.report.message = "no active goals"
        return
    retry, gone = common.retry_facts(ctx)
    if retry or gone:
        process(ctx, goals, retry, cursor=None, resolved=gone)
    for facts, cursor in common.fact_batches(ctx, BATCH):
        process(ctx, goals, facts, cursor=cursor)


def process(
    ctx: StageContext,
    goals: list[dict[str, Any]],
    facts: list[dict[str, Any]],
    *,
    cursor: int | None,
    resolved: list[int] | None = None,
) -> None:
    ctx.report.rows_in += len(facts)
    fact_ids = [int(f["id"]) for f in facts]
    notes: list[prompts.GoalNoteDraft] = []
    failure: str | None = None
    if facts:
        goal_set, fact_set = {int(g["id"]) for g in goals}, set(fact_ids)

        def validate(answer: prompts.GoalProgressAnswer) -> None:
            common.check_ids((n.goal_id for n in answer.notes), goal_set, "goal")
            common.check_ids((n.fact_id for n in answer.notes), fact_set, "fact")

        user = (
            "Goals:\n" + prompts.listing([(int(g["id"]), g["content"]) for g in goals])
            + "\nFacts:\n" + prompts.listing([(int(f["id"]), f["content"]) for f in facts])
        )
        try:
            notes = ctx.call(prompts.GOAL_PROGRESS, user, prompts.GoalProgressAnswer, validate).notes
        except errors.ModelResponseInvalid as exc:
            failure = f"ModelResponseInvalid: {exc.message}"
    with ctx.batch(cursor=cursor) as batch:
        batch.done("fact", resolved or ())
        if not batch.settle("fact", fact_ids, failure):
            return
        for note in notes:
            kind = note.assessment.strip().lower()
            if kind not in KINDS or not note.note.strip():
                continue
            with batch.item("fact", [note.fact_id]):
                row = add_note(
                    batch.tx,
                    goal_id=note.goal_id,
                    namespace_id=ctx.namespace_id,
                    author="model",
                    kind=kind,
                    content=note.note.strip()[:2000],
                    confidence=prompts.clamp(note.confidence, 0.5, 1.0, 0.7),
                    fact_id=note.fact_id,
                )
                if row is not None:
                    batch.wrote(1)
                    common.bump(ctx, f"notes_{kind}")
