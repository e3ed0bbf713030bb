"""A filled partition means a caught-up one: idle partitions are filled, waiting ones stay Missing.

Each tick's results are applied the way the daemon does (partitions first, then the
runless asset events, then one run per request) on Dagster's test instance.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest

from stash_pipeline.defs import caught_up
from stash_pipeline.defs.assets import episodes
from stash_pipeline.defs.resources import StashResource
from stash_pipeline.defs.sensors import namespace_discovery_sensor, watermark_sensor
from stash_pipeline.memory import namespaces as ns
from stash_pipeline.memory.episodes import remember
from stash_pipeline.store import Store
from tests.dagster.conftest import resource_for
from tests.dagster.test_assets import ASSETS, TEXTS
from tests.dagster.test_pipeline_flow import execute
from tests.dagster.test_sensors import apply, catch_up, tick

NAMESPACES = ["/", "/team", "/team/alpha", "/team/empty"]


def daemon_tick(instance: dg.DagsterInstance, stash: Any, cursor: str | None) -> dg.SensorResult:
    """One watermark tick with its partitions and asset events applied, as the daemon does."""
    result = tick(watermark_sensor, instance, stash, cursor)
    apply(instance, result)
    for event in result.asset_events or []:
        instance.report_runless_asset_event(event)
    return result


def unfilled(instance: dg.DagsterInstance) -> dict[str, list[str]]:
    """Per asset, the partitions Dagster would show as Missing."""
    keys = set(instance.get_dynamic_partitions("namespaces"))
    out = {}
    for asset in caught_up.FILLABLE:
        missing = sorted(keys - instance.get_materialized_partitions(dg.AssetKey(asset)))
        if missing:
            out[asset] = missing
    return out


def caught_up_reasons(instance: dg.DagsterInstance, asset: str, partition: str) -> str | None:
    """The ``caught_up`` metadata of a partition's latest materialization (None: a run's)."""
    record = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition]), limit=1
    ).records[0]
    materialization = record.asset_materialization
    assert materialization is not None
    value = materialization.metadata.get("caught_up")
    return None if value is None else str(value.value)


def seed_team(store: Store) -> None:
    ns.create(store, "/team/alpha")
    ns.create(store, "/team/empty")
    for text in TEXTS:
        remember(store, "/team/alpha", text)


def test_a_caught_up_system_shows_every_partition_filled(
    store: Store, instance: dg.DagsterInstance, model_stash: StashResource
) -> None:
    seed_team(store)
    apply(instance, tick(namespace_discovery_sensor, instance, model_stash, None))
    assert sorted(instance.get_dynamic_partitions("namespaces")) == NAMESPACES

    cursor, ran = None, set()
    for _ in range(8):
        result = daemon_tick(instance, model_stash, cursor)
        cursor = result.cursor
        if not result.run_requests:
            break
        for request in result.run_requests:
            assert execute(instance, model_stash, request).success
            ran.add(request.partition_key)
    else:
        raise AssertionError("the watermark sensor never settled")
    assert ran == {"/team/alpha"}  # no run where there is no work

    # the daily decay, one run over every partition (what `decay_daily` requests)
    decay = dg.RunRequest(
        asset_selection=[dg.AssetKey("decay")],
        tags={"dagster/asset_partition_range_start": "/", "dagster/asset_partition_range_end": "/team/empty"},
    )
    assert dg.materialize(
        [episodes, *ASSETS], selection=["decay"], instance=instance, resources={"stash": model_stash}, tags=decay.tags
    ).success
    daemon_tick(instance, model_stash, cursor)
    assert unfilled(instance) == {}  # 100% filled

    # the namespaces without records were filled by the sensor, saying why; alpha's by its runs
    assert caught_up_reasons(instance, "facts", "/team/empty") == "no input yet (no episodes in this namespace)"
    assert caught_up_reasons(instance, "goal_progress", "/team/alpha") == (
        "nothing to do until the namespace has an active goal"
    )
    assert caught_up_reasons(instance, "facts", "/team/alpha") is None
    assert caught_up_reasons(instance, "relationships", "/team/alpha") is None


def test_without_a_reasoner_only_waiting_partitions_stay_missing(
    store: Store, instance: dg.DagsterInstance, settings: object
) -> None:
    stash = resource_for(settings)  # type: ignore[arg-type]  (no reasoner configured)
    seed_team(store)
    apply(instance, tick(namespace_discovery_sensor, instance, stash, None))
    daemon_tick(instance, stash, None)
    # Missing is exactly "work waits": the facts stage of the namespace with episodes has no facts yet to gather, decay none to decay)
    # (failure_patterns waits for a failure; profiles has no fact to gather, decay none to decay),
    # so a "failed and missing" backfill selects only where there is work
    assert unfilled(instance) == {"facts": ["/team/alpha"]}


def test_a_partition_is_filled_once_and_a_quiet_tick_asks_dagster_nothing(
    store: Store, instance: dg.DagsterInstance, stash: StashResource, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed_team(store)
    catch_up(store)  # consumed outside Dagster, as `stash consolidate run --inline` does
    apply(instance, tick(namespace_discovery_sensor, instance, stash, None))
    asked: list[str] = []
    real = caught_up.materialized_partitions

    def counting(inst: dg.DagsterInstance, assets: Any) -> dict[str, set[str]]:
        asked.append("x")
        return real(inst, assets)

    monkeypatch.setattr(caught_up, "materialized_partitions", counting)
    first = daemon_tick(instance, stash, None)
    filled = [e for e in first.asset_events or [] if isinstance(e, dg.AssetMaterialization)]
    assert len(filled) == len(NAMESPACES) * len(caught_up.FILLABLE)  # no fact anywhere: decay too
    assert caught_up_reasons(instance, "facts", "/team/alpha") == "every input consumed: the stage's cursor is at its head"
    assert len(asked) == 1

    second = daemon_tick(instance, stash, first.cursor)
    assert not [e for e in second.asset_events or [] if isinstance(e, dg.AssetMaterialization)]
    assert len(asked) == 1  # the idle set did not change: Dagster is not asked again

    remember(store, "/team/alpha", "A new observation about the deploy.")
    third = daemon_tick(instance, stash, second.cursor)
    assert len(asked) == 2  # the set changed (alpha's facts wait now); nothing new to fill
    assert not [e for e in third.asset_events or [] if isinstance(e, dg.AssetMaterialization) and e.asset_key.path[0] != "episodes"]
