"""Relationships stage: entity --relation--> entity edges from new facts, several facts per call.

Input: current facts after the stage's own cursor (``facts.id``), ``STASH_FACTS_BATCH_SIZE``
per batch, ``STASH_RELATIONSHIPS_FACTS_PER_CALL`` per model call; dead-lettered facts first.
Validation: every cited fact id must be in the listing (else the answer is retried);
``from``/``to`` must occur in THEIR fact's text (case-insensitive) and the relation type
must be a lowercase identifier — relationships failing that are dropped and counted.
Output: ``relationships`` rows (confidence clamped to [0.7, 1]) with lineage to the fact;
both ends point at their entities (``entity_resolution``).
Cursor: max fact id of the batch (retired facts are passed, never fed to the model).
Idempotency: ON CONFLICT DO NOTHING on (namespace, from, type, to, source fact).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from stash_pipeline import errors
from stash_pipeline.memory import lineage
from stash_pipeline.stages import common, prompts
from stash_pipeline.stages.entity_resolution import Resolver

if TYPE_CHECKING:
    from stash_pipeline.stages.context import StageContext

_RELATION = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def normalise_relation(value: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "_", value.strip().lower()).strip("_")


def run(ctx: StageContext) -> None:
    retry, gone = common.retry_facts(ctx)
    if retry or gone:
        process(ctx, retry, cursor=None, resolved=gone)
    for facts, cursor in common.fact_batches(ctx, ctx.settings.facts_batch_size):
        process(ctx, facts, cursor=cursor)


def process(ctx: StageContext, facts: list[dict[str, Any]], *, cursor: int | None, resolved: list[int] | None = None) -> None:
    ctx.report.rows_in += len(facts)
    per_call = ctx.settings.relationships_facts_per_call
    found: dict[int, list[prompts.RelationshipDraft]] = {}
    failures: dict[int, str] = {}
    for start in range(0, len(facts), per_call):
        chunk = facts[start : start + per_call]
        allowed = {int(f["id"]) for f in chunk}

        def validate(answer: prompts.RelationshipsAnswer, allowed: set[int] = allowed) -> None:
            common.check_ids((r.fact_id for r in answer.relationships), allowed, "fact")

        try:
            answer = ctx.call(
                prompts.RELATIONSHIPS,
                "Facts:\n" + prompts.listing([(int(f["id"]), f["content"]) for f in chunk]),
                prompts.RelationshipsAnswer,
                validate,
            )
        except errors.ModelResponseInvalid as exc:
            for f in chunk:
                failures[int(f["id"])] = f"ModelResponseInvalid: {exc.message}"
            continue
        for rel in answer.relationships:
            found.setdefault(rel.fact_id, []).append(rel)

    resolver = Resolver(ctx)  # both ends of every relationship, before the transaction
    resolver.plan(name for rels in found.values() for rel in rels for name in (rel.from_, rel.to))

    with ctx.batch(cursor=cursor) as batch:
        if resolved:
            batch.done("fact", resolved)
        for fact in facts:
            fact_id = int(fact["id"])
            if fact_id in failures:
                batch.fail("fact", [fact_id], failures[fact_id])
                continue
            text = fact["content"].lower()
            with batch.item("fact", [fact_id]):
                for rel in found.get(fact_id, []):
                    source, target = rel.from_.strip(), rel.to.strip()
                    relation = normalise_relation(rel.relation_type)
                    if not (source and target and source.lower() in text and target.lower() in text
                            and _RELATION.match(relation)):
                        common.bump(ctx, "relationships_rejected")
                        continue
                    row = batch.tx.one(
                        "stage_relationship_insert",
                        namespace_id=ctx.namespace_id,
                        from_entity=source,
                        relation_type=relation,
                        to_entity=target,
                        confidence=prompts.clamp(rel.confidence, 0.7, 1.0, 0.8),
                        fact_id=fact_id,
                    )
                    if row is not None:
                        resolver.link_relationship(batch.tx, int(row["id"]), source, target)
                        lineage.add(batch.tx, ctx.namespace_id, "relationship", int(row["id"]), [("fact", fact_id)])
                        batch.wrote(1)
