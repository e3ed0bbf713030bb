"""``episode_embeddings``: vectors of episodes that ``remember`` committed before embedding them.

The MCP service's worker (``stash_pipeline.memory.pending``) normally embeds such an
episode within about a second. This asset is the backlog path for when no service runs
(a CLI or import wrote with STASH_EMBED_ON_WRITE=async) or a burst outran it: a run
embeds every waiting episode, batch by batch, next to any running worker (``FOR NO KEY
UPDATE SKIP LOCKED``: each row is embedded once). Until an episode has its vector the
stage watermark stops before it, so the ``facts`` stage waits for this and then resumes.

``pending_vectors_sensor`` requests a run when an episode has waited longer than
``GRACE_S`` (a live worker would have taken it by then) and no run of the job is queued
or running. Its run key is a time bucket: at most one request per bucket.
"""

from __future__ import annotations

import time

import dagster as dg
from dagster import SensorEvaluationContext

from stash_pipeline.defs.resources import StashResource
from stash_pipeline.memory.pending import backlog, embed_pending

#: seconds an episode may wait for its vector before the sensor asks for a run
GRACE_S = 30
IN_FLIGHT = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


@dg.asset(
    name="episode_embeddings",
    group_name="embeddings",
    kinds={"postgres"},
    description="Vectors of the episodes remember committed before embedding them (STASH_EMBED_ON_WRITE). "
    "Normally the MCP service embeds them within a second; a run embeds whatever still waits.",
)
def episode_embeddings(context, stash: StashResource) -> dg.MaterializeResult:  # type: ignore[no-untyped-def]
    with stash.open_store() as store:
        before = backlog(store)
        embedded = embed_pending(store)
        after = backlog(store)
    context.log.info(f"embedded {embedded} waiting episodes; {after.pending} still wait")
    return dg.MaterializeResult(
        metadata={
            "embedded": embedded,
            "still_pending": after.pending,
            "oldest_wait_s": float(before.oldest_age_s or 0.0),
        }
    )


embed_pending_job = dg.define_asset_job(
    "embed_pending_episodes",
    selection=dg.AssetSelection.assets(episode_embeddings),
    description="Embed every episode still waiting for its vector.",
)


@dg.sensor(
    name="pending_vectors_sensor",
    description=f"Requests an episode_embeddings run when an episode has waited more than {GRACE_S} s for its vector.",
    job=embed_pending_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def pending_vectors_sensor(context: SensorEvaluationContext, stash: StashResource) -> dg.RunRequest | dg.SkipReason:
    with stash.open_store() as store:
        waiting = backlog(store)
    if not waiting.pending:
        return dg.SkipReason("no episode waits for its vector")
    age = waiting.oldest_age_s or 0.0
    if age < GRACE_S:
        return dg.SkipReason(f"{waiting.pending} episodes wait, the oldest {age:.1f} s: a service worker takes them")
    runs = context.instance.get_runs(
        filters=dg.RunsFilter(job_name=embed_pending_job.name, statuses=IN_FLIGHT), limit=1
    )
    if runs:
        return dg.SkipReason("an episode_embeddings run is already queued or running")
    return dg.RunRequest(run_key=f"pending-{int(time.time() // max(GRACE_S, 1))}")
