"""Episode heads as data versions, rebuild runs and single-run decay, through Dagster against Postgres."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import dagster as dg

from stash_pipeline.defs.episodes import DATA_VERSION_TAG, episodes
from stash_pipeline.defs.resources import StashResource
from stash_pipeline.defs.sensors import watermark_sensor
from stash_pipeline.memory.episodes import remember
from stash_pipeline.stages import backlog_parameters
from stash_pipeline.store import Store
from tests.dagster.test_assets import ASSETS, fact_rows, materialize, seed
from tests.dagster.test_sensors import tick

INPUT_VERSION_TAG = "dagster/input_data_version/episodes"


def reported(result: dg.SensorResult) -> dict[str, str]:
    """Episode heads a tick reported, by partition."""
    return {
        e.partition: e.tags[DATA_VERSION_TAG]
        for e in result.asset_events or []
        if isinstance(e, dg.AssetMaterialization) and e.partition is not None and e.tags
    }


def test_the_sensor_observes_each_new_episode_head_once(
    store: Store, instance: dg.DagsterInstance, stash: StashResource
) -> None:
    ids = seed(store, "/a")
    seed(store, "/not-yet-a-partition")
    instance.add_dynamic_partitions("namespaces", ["/a"])
    first = tick(watermark_sensor, instance, stash, None)
    assert reported(first) == {"/a": str(ids[-1])}  # only partitions Dagster knows
    second = tick(watermark_sensor, instance, stash, first.cursor)
    assert reported(second) == {}  # same head: not reported again
    new = remember(store, "/a", "Carol joined the team on Monday").id
    third = tick(watermark_sensor, instance, stash, second.cursor)
    assert reported(third) == {"/a": str(new)}
    assert json.loads(third.cursor or "{}")["observed"] == {"/a": new}


def test_a_stage_records_the_episode_head_it_consumed_and_new_episodes_make_it_behind(
    store: Store, instance: dg.DagsterInstance, model_stash: StashResource
) -> None:
    ids = seed(store, "/projects/x")
    instance.add_dynamic_partitions("namespaces", ["/projects/x"])
    for event in tick(watermark_sensor, instance, model_stash, None).asset_events or []:
        instance.report_runless_asset_event(event)  # what the daemon does with a tick's events

    result = materialize(instance, model_stash, "/projects/x", "facts")
    assert result.success
    (event,) = result.asset_materializations_for_node("facts")
    # Dagster records a partitioned input's version as the digest of its partitions' versions
    assert event.tags is not None and event.tags[INPUT_VERSION_TAG] == hashlib.sha256(str(ids[-1]).encode()).hexdigest()

    newer = remember(store, "/projects/x", "Carol joined the team on Monday").id
    events = tick(watermark_sensor, instance, model_stash, None).asset_events or []
    seen, head = [e for e in events if e.asset_key == dg.AssetKey("episodes")]
    assert isinstance(seen, dg.AssetObservation) and isinstance(head, dg.AssetMaterialization)
    # the same tick observes the facts partition's backlog; that must not count as new data
    backlog = [e for e in events if e.asset_key == dg.AssetKey("facts")]
    assert [e.metadata["backlog"].value for e in backlog] == [1]
    assert seen.tags == head.tags == {DATA_VERSION_TAG: str(newer)}

    from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
    from dagster._core.loader import LoadingContextForTest

    graph = dg.Definitions(assets=[episodes, *ASSETS], resources={"stash": model_stash}).resolve_asset_graph()

    def status() -> StaleStatus:
        resolver = CachingStaleStatusResolver(instance, graph, LoadingContextForTest(instance))
        return resolver.get_status(dg.AssetKey("facts"), "/projects/x")

    assert status() == StaleStatus.FRESH
    for event in backlog:
        instance.report_runless_asset_event(event)
    assert status() == StaleStatus.FRESH
    instance.report_runless_asset_event(seen)
    instance.report_runless_asset_event(head)
    assert status() == StaleStatus.STALE  # behind its episodes, visible in the UI


def test_a_rebuild_run_replaces_the_facts_and_a_retry_does_not_rebuild_twice(
    store: Store, instance: dg.DagsterInstance, model_stash: StashResource
) -> None:
    seed(store, "/projects/x")
    assert materialize(instance, model_stash, "/projects/x", "facts", "relationships").success
    old = fact_rows_with_ids(store)
    result = dg.materialize(
        [episodes, *ASSETS],
        selection=["facts", "relationships"],
        partition_key="/projects/x",
        instance=instance,
        resources={"stash": model_stash},
        tags={"stash/rebuild": "facts"},
    )
    assert result.success
    new = fact_rows_with_ids(store)
    assert len(new) == len(old) and min(new) > max(old)  # the old facts withdrawn, new ones derived
    assert len(fact_rows(store)) == 2 * len(old)  # the withdrawn ones stay as history
    meta = {k: v.value for k, v in result.asset_materializations_for_node("facts")[0].metadata.items()}
    assert meta["cursor_from"] == 0 and meta["rows_written"] == len(old)


def fact_rows_with_ids(store: Store) -> list[int]:
    with store.db.connection() as conn:
        rows = conn.execute("SELECT id FROM facts WHERE withdrawn_at IS NULL ORDER BY id").fetchall()
        conn.commit()
    return [int(r["id"]) for r in rows]


def test_decay_over_many_namespaces_is_one_run(
    store: Store, instance: dg.DagsterInstance, stash: StashResource
) -> None:
    slugs = ["/d1", "/d2", "/d3"]
    for slug in slugs:
        seed(store, slug)
    instance.add_dynamic_partitions("namespaces", slugs)
    result = dg.materialize(
        [episodes, *ASSETS],
        selection=["decay"],
        instance=instance,
        resources={"stash": stash},
        tags={"dagster/asset_partition_range_start": "/d1", "dagster/asset_partition_range_end": "/d3"},
    )
    assert result.success
    events = result.asset_materializations_for_node("decay")
    assert sorted(e.partition for e in events) == slugs  # one run, every namespace materialized
    meta: dict[str, Any] = {k: v.value for k, v in events[0].metadata.items()}
    assert meta["namespaces"] == 3 and meta["status"] == "ok"
    rows = store.db.all("stage_backlog", **backlog_parameters())
    assert {r["slug"]: r["last_status"] for r in rows if r["stage"] == "decay" and r["slug"] in slugs} == dict.fromkeys(
        slugs, "idle"
    )


def test_a_model_switch_marks_materialized_partitions_unsynced_until_rebuilt(
    store: Store, instance: dg.DagsterInstance, model_stash: StashResource
) -> None:
    """What the UI shows after a change: the partition is stale for "code version", and a rebuild clears it."""
    from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
    from dagster._core.loader import LoadingContextForTest

    from stash_pipeline.defs.definitions import build_definitions

    seed(store, "/projects/x")
    instance.add_dynamic_partitions("namespaces", ["/projects/x"])
    before = build_definitions(model="model-a", stash=model_stash)
    after = build_definitions(model="model-b", stash=model_stash)
    job_a = before.resolve_implicit_global_asset_job_def()
    assert job_a.execute_in_process(
        instance=instance, partition_key="/projects/x", asset_selection=[dg.AssetKey("facts")]
    ).success

    def resolver(defs: dg.Definitions) -> CachingStaleStatusResolver:
        return CachingStaleStatusResolver(instance, defs.resolve_asset_graph(), LoadingContextForTest(instance))

    def status(defs: dg.Definitions) -> StaleStatus:
        return resolver(defs).get_status(dg.AssetKey("facts"), "/projects/x")

    assert status(before) == StaleStatus.FRESH
    assert status(after) == StaleStatus.STALE  # the UI says "unsynced"
    causes = resolver(after).get_stale_causes(dg.AssetKey("facts"), "/projects/x")
    assert [c.reason for c in causes] == ["has a new code version"]

    job_b = after.resolve_job_def("rebuild_facts")
    assert job_b.execute_in_process(instance=instance, partition_key="/projects/x").success
    assert status(after) == StaleStatus.FRESH
