"""Schedules: daily decay for every namespace, and an hourly sweep of all stages.

``decay_daily`` (03:00 UTC) requests ONE ``decay`` run over every namespace partition (the
key range from the first partition to the last); decay is pure SQL over stale current
facts, so it has no watermark to watch and no reason to pay a run's start-up per
namespace. A backfill of ``decay`` is one run too (``BackfillPolicy.single_run``).

``consolidation_sweep`` (hourly) is the safety net behind the watermark sensor: it runs
the same ``stage_backlog`` query and requests a run for *every* namespace with work (no
per-tick cap), skipping namespaces with a run in flight. It keeps the pipeline moving
if the sensor is stopped, and drains a backlog larger than the sensor's cap.
"""

from __future__ import annotations

import time

import dagster as dg
from dagster import ScheduleEvaluationContext

from stash_pipeline.defs.assets import STAGE_KEYS
from stash_pipeline.defs.partitions import NAMESPACES, RANGE_END_TAG, RANGE_START_TAG, partition_key
from stash_pipeline.defs.resources import StashResource
from stash_pipeline.defs.sensors import (
    WATERMARK_STAGES,
    in_flight_partitions,
    pending_work,
    read_backlog,
    run_requests,
)


@dg.schedule(
    name="decay_daily",
    description="Decay stale current facts in every namespace, once a day.",
    cron_schedule="0 3 * * *",
    execution_timezone="UTC",
    target=dg.AssetSelection.assets(STAGE_KEYS["decay"]),
    default_status=dg.DefaultScheduleStatus.RUNNING,
)
def decay_daily(context: ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
    keys = context.instance.get_dynamic_partitions(NAMESPACES)
    if not keys:
        return dg.SkipReason("no namespace partitions yet")
    day = context.scheduled_execution_time.strftime("%Y-%m-%d") if context.scheduled_execution_time else ""
    # one run over the whole key range (first to last partition): decay is one SQL update
    # per namespace, far cheaper than a run's start-up
    return dg.RunRequest(
        asset_selection=[STAGE_KEYS["decay"]],
        run_key=f"decay:{day}",
        tags={
            "stash/trigger": "decay_daily",
            RANGE_START_TAG: keys[0],
            RANGE_END_TAG: keys[-1],
        },
    )


@dg.schedule(
    name="consolidation_sweep",
    description="Hourly: run every stage with a backlog in every namespace not already running.",
    cron_schedule="0 * * * *",
    execution_timezone="UTC",
    target=dg.AssetSelection.assets(*(STAGE_KEYS[name] for name in WATERMARK_STAGES)),
    default_status=dg.DefaultScheduleStatus.RUNNING,
)
def consolidation_sweep(
    context: ScheduleEvaluationContext, stash: StashResource
) -> list[dg.RunRequest] | dg.SkipReason:
    rows, blocker = read_backlog(stash)
    work = pending_work(rows, stages=WATERMARK_STAGES, model_ready=not blocker)
    busy = in_flight_partitions(context.instance, [partition_key(s) for s in work])
    ready = sorted(slug for slug in work if partition_key(slug) not in busy)
    if not ready:
        return dg.SkipReason("no namespace has work that is not already running")
    return run_requests(work, ready, trigger="sweep", now=time.time())
