"""Schedules: decay once a day in one run over every namespace partition; the hourly sweep of every stage with work."""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg
import pytest

from stash_pipeline.defs.resources import StashResource
from stash_pipeline.defs.schedules import consolidation_sweep, decay_daily
from stash_pipeline.memory import facts
from stash_pipeline.memory import namespaces as ns
from stash_pipeline.memory.episodes import remember
from stash_pipeline.store import Store
from tests.dagster.test_sensors import add_run


def test_decay_daily_requests_one_decay_run_over_every_namespace(instance: dg.DagsterInstance) -> None:
    at = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
    context = dg.build_schedule_context(instance=instance, scheduled_execution_time=at)
    assert isinstance(decay_daily(context), dg.SkipReason)

    instance.add_dynamic_partitions("namespaces", ["/", "/a", "/b/c"])
    request = decay_daily(dg.build_schedule_context(instance=instance, scheduled_execution_time=at))
    assert isinstance(request, dg.RunRequest)
    assert [k.to_user_string() for k in request.asset_selection or []] == ["decay"]
    assert request.partition_key is None
    assert request.tags["dagster/asset_partition_range_start"] == "/"
    assert request.tags["dagster/asset_partition_range_end"] == "/b/c"
    assert request.run_key == "decay:2026-11-30"
    assert decay_daily.cron_schedule == "0 3 * * *"


def test_sweep_requests_every_namespace_with_work_uncapped(
    store: Store, instance: dg.DagsterInstance, stash: StashResource, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stash_pipeline.defs import sensors

    monkeypatch.setattr(sensors, "MAX_RUNS_PER_TICK", 1)
    for slug in ["/a", "/b", "/c", "/idle"]:
        ns.create(store, slug)
    remember(store, "/a", "The deploy runs blue-green on Fridays.")
    remember(store, "/b", "Rollbacks take four minutes.")
    facts.assert_fact(store, "/c", "The API gateway is Envoy.")
    add_run(instance, "/b", dg.DagsterRunStatus.STARTED)

    result = consolidation_sweep(dg.build_schedule_context(instance=instance, resources={"stash": stash}))
    assert isinstance(result, list)
    pairs = {(k.to_user_string(), r.partition_key) for r in result for k in r.asset_selection or []}
    assert pairs == {("facts", "/a"), ("relationships", "/c"), ("causal_links", "/c"), ("profiles", "/c")}
    assert {r.tags["stash/trigger"] for r in result} == {"sweep"}
    assert consolidation_sweep.cron_schedule == "0 * * * *"
