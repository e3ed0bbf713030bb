"""Decay stage: age stale knowledge (pure SQL, no model, scheduled daily).

Input: current facts of the namespace (not withdrawn, no ``valid_until``) whose
``updated_at`` is older than ``STASH_CONSOLIDATION_WINDOW``.
Output: their confidence × ``STASH_DECAY_FACTOR`` (``updated_at`` refreshed, so a fact
decays at most once per window); then every current fact below
``STASH_EXPIRY_THRESHOLD`` expires (``valid_until = now()``) — it stays in history.
Cursor: none (the stage is driven by the clock, not by new rows; never by backlog).
Idempotency: a second run within the window changes nothing (``updated_at`` is fresh).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stash_pipeline.stages.context import StageContext


def run(ctx: StageContext) -> None:
    settings = ctx.settings
    with ctx.batch() as batch:
        decayed = batch.tx.execute(
            "decay_stale_facts",
            namespace_id=ctx.namespace_id,
            factor=settings.decay_factor,
            window=settings.consolidation_window,
        )
        expired = batch.tx.execute(
            "decay_expire_facts", namespace_id=ctx.namespace_id, threshold=settings.expiry_threshold
        )
        batch.wrote(decayed + expired)
    ctx.report.rows_in += decayed + expired
    ctx.report.details.update({"facts_decayed": decayed, "facts_expired": expired})
