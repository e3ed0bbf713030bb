"""The code location: ``dagster dev -w workspace.yaml`` (or ``-m stash_pipeline.defs.definitions``).

Runs use the in-process executor: one run is one namespace's selected stages, executed
in dependency order in the run worker, which saves a subprocess per step; the ``model``
pool still caps model-bound steps across runs. Settings are read when a run or tick
starts (``StashResource``), never when this module is imported.
"""

from __future__ import annotations

import dagster as dg

from stash_pipeline.defs.assets import episodes, stage_assets
from stash_pipeline.defs.resources import StashResource
from stash_pipeline.defs.schedules import consolidation_sweep, decay_daily
from stash_pipeline.defs.sensors import namespace_discovery_sensor, watermark_sensor

defs = dg.Definitions(
    assets=[episodes, *stage_assets],
    sensors=[namespace_discovery_sensor, watermark_sensor],
    schedules=[decay_daily, consolidation_sweep],
    resources={"stash": StashResource()},
    executor=dg.in_process_executor,
)
