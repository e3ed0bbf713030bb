"""Patterns stage: recurring themes across facts and their relationships, exact sources only.

Input: current facts after the stage's own cursor and at most up to the RELATIONSHIPS
cursor (so a fact is seen only once its relationships exist), 30 per batch, plus the
live relationships extracted from those facts.
Validation: cited ids must be in the listing (else the answer is retried); a pattern
needs at least 2 valid cited sources — there is no "all ids" fallback.
Output: ``patterns`` rows (confidence = lowest cited confidence × coherence, the model's
rationale) with lineage to exactly the cited facts and relationships.
Cursor: max fact id of the batch. Idempotency: unique content per namespace
(ON CONFLICT DO NOTHING).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stash_pipeline import errors
from stash_pipeline.memory import lineage
from stash_pipeline.stages import common, prompts

if TYPE_CHECKING:
    from stash_pipeline.stages.context import StageContext

BATCH = 30


def run(ctx: StageContext) -> None:
    upper = int(ctx.read("stage_checkpoint_cursor", namespace_id=ctx.namespace_id, stage="relationships")[0]["cursor"])
    retry, gone = common.retry_facts(ctx)
    if retry or gone:
        process(ctx, retry, cursor=None, resolved=gone)
    for facts, cursor in common.fact_batches(ctx, BATCH, upper=upper):
        process(ctx, facts, cursor=cursor)


def process(ctx: StageContext, facts: list[dict[str, Any]], *, cursor: int | None, resolved: list[int] | None = None) -> None:
    ctx.report.rows_in += len(facts)
    fact_ids = [int(f["id"]) for f in facts]
    rels = ctx.read("stage_pattern_relationships", namespace_id=ctx.namespace_id, fact_ids=fact_ids) if facts else []
    patterns: list[prompts.PatternDraft] = []
    failure: str | None = None
    if len(facts) + len(rels) >= 2:
        fact_set, rel_set = set(fact_ids), {int(r["id"]) for r in rels}

        def validate(answer: prompts.PatternsAnswer) -> None:
            common.check_ids([i for p in answer.patterns for i in p.source_facts], fact_set, "fact")
            common.check_ids([i for p in answer.patterns for i in p.source_rels], rel_set, "relationship")

        user = "Facts:\n" + prompts.listing(
            [(int(f["id"]), f"{f['content']} (confidence {float(f['confidence']):.2f})") for f in facts]
        )
        if rels:
            user += "\nRelationships:\n" + prompts.listing(
                [(int(r["id"]), f"{r['from_entity']} --{r['relation_type']}--> {r['to_entity']}") for r in rels]
            )
        try:
            patterns = ctx.call(prompts.PATTERNS, user, prompts.PatternsAnswer, validate).patterns
        except errors.ModelResponseInvalid as exc:
            failure = f"ModelResponseInvalid: {exc.message}"
    confidence_of = {("fact", int(f["id"])): float(f["confidence"]) for f in facts}
    confidence_of.update({("relationship", int(r["id"])): float(r["confidence"]) for r in rels})
    with ctx.batch(cursor=cursor) as batch:
        batch.done("fact", resolved or ())
        if not batch.settle("fact", fact_ids, failure):
            return
        for pattern in patterns:
            sources = sorted({("fact", i) for i in pattern.source_facts} | {("relationship", i) for i in pattern.source_rels})
            text = " ".join(pattern.pattern.split())
            if len(sources) < 2 or not text:
                common.bump(ctx, "patterns_rejected")
                continue
            coherence = pattern.coherence if 0 < pattern.coherence <= 1 else 0.5
            confidence = min(confidence_of[s] for s in sources) * coherence
            with batch.item("fact", [i for kind, i in sources if kind == "fact"]):
                row = batch.tx.one(
                    "stage_pattern_insert",
                    namespace_id=ctx.namespace_id,
                    content=text,
                    confidence=confidence,
                    coherence=coherence,
                    rationale=pattern.rationale[:2000] or None,
                )
                if row is not None:
                    lineage.add(batch.tx, ctx.namespace_id, "pattern", int(row["id"]), sources)
                    batch.wrote(1)
