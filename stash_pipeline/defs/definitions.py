"""The code location: ``dagster dev -w workspace.yaml`` (or ``-m stash_pipeline.defs.definitions``).

The definitions are built by a function (``defs``, decorated ``@dg.definitions``) that
Dagster calls when it loads the code location, not when this module is imported. It
reads one setting, the reasoning model's name (``STASH_REASONER_MODEL``), because each
stage's code version includes it (``stash_pipeline.stages.versions``): switching models
marks every materialized partition of the model stages unsynced. Reload the code
location (or restart ``dagster dev``) after changing it. Every other setting is read
when a run or tick starts (``StashResource``).

Runs use the in-process executor: one run is one namespace's selected stages, executed
in dependency order in the run worker, which saves a subprocess per step; the ``model``
pool still caps model-bound steps across runs.
"""

from __future__ import annotations

import warnings

import dagster as dg

from stash_pipeline import errors
from stash_pipeline.config import load_settings
from stash_pipeline.defs.assets import build_stage_assets, episodes
from stash_pipeline.defs.embeddings import embed_pending_job, episode_embeddings, pending_vectors_sensor
from stash_pipeline.defs.jobs import rebuild_jobs
from stash_pipeline.defs.resources import StashResource
from stash_pipeline.defs.schedules import consolidation_sweep, decay_daily
from stash_pipeline.defs.sensors import namespace_discovery_sensor, watermark_sensor


def reasoner_model() -> str | None:
    """The configured model name, or None when settings cannot be read (runs will then say why)."""
    try:
        return load_settings().reasoner_model
    except errors.ConfigurationError as exc:
        # The code location still loads so the UI can show the failing runs' descriptions.
        warnings.warn(f"stage code versions computed without a model name: {exc.message}", stacklevel=2)
        return None


def build_definitions(*, model: str | None, stash: StashResource | None = None) -> dg.Definitions:
    """Every asset, sensor, schedule, job and the resource, with code versions for ``model``.

    ``stash`` replaces the default resource (which reads ``STASH_*`` when a run starts).
    """
    return dg.Definitions(
        assets=[episodes, *build_stage_assets(model=model), episode_embeddings],
        sensors=[namespace_discovery_sensor, watermark_sensor, pending_vectors_sensor],
        schedules=[decay_daily, consolidation_sweep],
        jobs=[*rebuild_jobs, embed_pending_job],
        resources={"stash": stash or StashResource()},
        executor=dg.in_process_executor,
    )


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions(model=reasoner_model())
