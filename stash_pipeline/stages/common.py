"""Helpers shared by the fact-driven stages: batch selection, retries, id checks."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stash_pipeline.stages.context import StageContext


def retry_facts(ctx: StageContext) -> tuple[list[dict[str, Any]], list[int]]:
    """Dead-lettered facts to retry (current ones) and the ids that are gone or retired."""
    ids = ctx.pending("fact", ctx.settings.facts_batch_size)
    if not ids:
        return [], []
    rows = ctx.read("stage_current_facts_by_ids", namespace_id=ctx.namespace_id, ids=ids)
    return rows, sorted(set(ids) - {int(r["id"]) for r in rows})


def fact_batches(ctx: StageContext, limit: int, upper: int | None = None) -> Iterator[tuple[list[dict[str, Any]], int]]:
    """(current facts, cursor to commit) for each batch after the stage's cursor.

    Retired facts are never handed to a stage, but the cursor passes them. The caller
    must commit the yielded cursor (``ctx.batch(cursor=...)``) before asking for more.
    """
    while True:
        rows = ctx.read(
            "stage_facts_after", namespace_id=ctx.namespace_id, cursor=ctx.cursor, limit=limit, upper=upper
        )
        if not rows:
            return
        before = ctx.cursor
        yield [r for r in rows if r["current"]], int(rows[-1]["id"])
        if ctx.cursor <= before:  # defensive: never loop on the same batch
            return


def check_ids(cited: Iterable[int], allowed: set[int], label: str) -> None:
    """Raise ValueError (fed back to the model) when an answer cites ids outside the listing."""
    unknown = sorted({int(i) for i in cited} - allowed)
    if unknown:
        raise ValueError(f"{label} ids {unknown} are not in the listing; use only the listed ids")


def bump(ctx: StageContext, key: str, count: int = 1) -> None:
    ctx.report.details[key] = ctx.report.details.get(key, 0) + count
