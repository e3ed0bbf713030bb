"""Rebuild jobs: one partitioned job per rebuildable stage, launchable as a backfill.

One job per stage whose ``STAGES`` entry has a ``rebuild_query``: ``rebuild_facts``
(likewise ``rebuild_relationships``, ``rebuild_causal_links``, ``rebuild_patterns``) selects the stage and every model stage downstream of it, and
carries the run tag ``stash/rebuild=<stage>``. In each namespace partition the stage's
asset first withdraws what it derived there (and, through lineage, what later stages
derived from that) and rewinds its cursor (``stash_pipeline.consolidation.rebuild``), then runs; the
downstream stages of the same run consume the re-derived rows. Launch it from the UI
(Jobs → ``rebuild_facts`` → Materialize… / Launchpad, or its Partitions tab → Launch
backfill over many namespaces) or with ``stash consolidate rebuild`` outside Dagster.

The same tag works on an ordinary materialization: add ``stash/rebuild=facts`` to the
launchpad's tags when materializing ``facts``.
"""

from __future__ import annotations

import dagster as dg

from stash_pipeline.consolidation.rebuild import REBUILDABLE
from stash_pipeline.defs.assets import REBUILD_TAG, STAGE_KEYS
from stash_pipeline.defs.partitions import namespaces_partitions
from stash_pipeline.stages import STAGES

#: stages a rebuild run re-derives after the rebuilt one (decay is left to its schedule)
_MODEL_STAGES = [STAGE_KEYS[spec.name] for spec in STAGES if spec.needs_model]


def rebuild_job(stage: str) -> dg.UnresolvedAssetJobDefinition:
    """The partitioned job that rebuilds ``stage`` and re-derives what follows from it."""
    selection = dg.AssetSelection.assets(STAGE_KEYS[stage]).downstream() & dg.AssetSelection.assets(*_MODEL_STAGES)
    return dg.define_asset_job(
        name=f"rebuild_{stage}",
        description=f"Withdraw what {stage} derived in the namespace (and what followed from it), "
        f"rewind its cursor and re-derive: {stage} and the stages downstream of it.",
        selection=selection,
        partitions_def=namespaces_partitions,
        tags={REBUILD_TAG: stage},
    )


rebuild_jobs = [rebuild_job(stage) for stage in REBUILDABLE]
