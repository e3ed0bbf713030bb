"""Sensors against a real Postgres and Dagster's test instance (build_sensor_context).

The daemon applies a tick's dynamic-partition requests; here ``apply`` does it, so the
next tick sees what the daemon would have left behind.
"""

from __future__ import annotations

import json
from typing import Any

import dagster as dg
import pytest
from dagster._core.events import DagsterEvent, DagsterEventType
from dagster._core.remote_origin import InProcessCodeLocationOrigin, RemoteRepositoryOrigin
from dagster._core.test_utils import create_run_for_test
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from stash_pipeline.defs import sensors
from stash_pipeline.defs.resources import StashResource
from stash_pipeline.defs.sensors import namespace_discovery_sensor, watermark_sensor
from stash_pipeline.memory import facts, goals, hypotheses
from stash_pipeline.memory import namespaces as ns
from stash_pipeline.memory.episodes import remember
from stash_pipeline.stages import backlog_parameters
from stash_pipeline.store import Store
from tests.dagster.conftest import resource_for

# -- helpers -----------------------------------------------------------------------------


def apply(instance: dg.DagsterInstance, result: dg.SensorResult) -> None:
    """Do what the daemon does with a tick's partition requests."""
    for request in result.dynamic_partitions_requests or []:
        if isinstance(request, dg.AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        else:
            for key in request.partition_keys:
                instance.delete_dynamic_partition(request.partitions_def_name, key)


def tick(sensor: dg.SensorDefinition, instance: dg.DagsterInstance, stash: StashResource, cursor: str | None):
    result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor, resources={"stash": stash}))
    assert isinstance(result, dg.SensorResult)
    return result


def requested(result: dg.SensorResult) -> set[tuple[str, str]]:
    """(stage, namespace) pairs requested by a tick."""
    return {
        (key.to_user_string(), request.partition_key)
        for request in result.run_requests or []
        for key in request.asset_selection or []
    }


def added(result: dg.SensorResult) -> list[str]:
    return [
        k
        for r in result.dynamic_partitions_requests or []
        if isinstance(r, dg.AddDynamicPartitionsRequest)
        for k in r.partition_keys
    ]


def deleted(result: dg.SensorResult) -> list[str]:
    return [
        k
        for r in result.dynamic_partitions_requests or []
        if isinstance(r, dg.DeleteDynamicPartitionsRequest)
        for k in r.partition_keys
    ]


def catch_up(store: Store) -> None:
    """Move every checkpoint to its head, as finished stage runs would (patterns' head is the
    relationships cursor, so repeat until nothing moves)."""
    while rows := [r for r in store.db.all("stage_backlog", **backlog_parameters()) if r["has_work"]]:
        with store.db.transaction() as tx:
            _set_checkpoints(tx, rows)


def _set_checkpoints(tx: Any, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            tx.conn.execute(
                "INSERT INTO stage_checkpoints (namespace_id, stage, cursor, aux_cursor) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (namespace_id, stage) DO UPDATE SET cursor = EXCLUDED.cursor,"
                " aux_cursor = EXCLUDED.aux_cursor",
                (row["namespace_id"], row["stage"], row["head"], row["aux_head"]),
            )


def add_run(instance: dg.DagsterInstance, partition: str, status: dg.DagsterRunStatus) -> None:
    """A run of a partition in the given status, moved there by the run events the daemon writes."""
    origin = RemoteRepositoryOrigin(
        InProcessCodeLocationOrigin(LoadableTargetOrigin(module_name="stash_pipeline.defs.definitions"), "stash"),
        "__repository__",
    ).get_job_origin("__ASSET_JOB")
    run = create_run_for_test(
        instance, job_name="__ASSET_JOB", tags={"dagster/partition": partition}, remote_job_origin=origin
    )
    event = {
        dg.DagsterRunStatus.QUEUED: DagsterEventType.RUN_ENQUEUED,
        dg.DagsterRunStatus.STARTING: DagsterEventType.RUN_STARTING,
        dg.DagsterRunStatus.STARTED: DagsterEventType.RUN_START,
        dg.DagsterRunStatus.SUCCESS: DagsterEventType.RUN_SUCCESS,
    }.get(status)
    if event is not None:
        instance.run_storage.handle_run_event(run.run_id, DagsterEvent(event.value, job_name=run.job_name))
    stored = instance.get_run_by_id(run.run_id)
    assert stored is not None and stored.status == status


# -- discovery ---------------------------------------------------------------------------


def test_discovery_adds_each_namespace_once(store: Store, instance: dg.DagsterInstance, stash: StashResource) -> None:
    ns.create(store, "/projects/a")
    first = tick(namespace_discovery_sensor, instance, stash, None)
    assert sorted(added(first)) == ["/", "/projects", "/projects/a"]
    assert deleted(first) == []
    apply(instance, first)

    second = tick(namespace_discovery_sensor, instance, stash, first.cursor)
    assert second.dynamic_partitions_requests == [] and second.skip_reason is not None

    ns.create(store, "/projects/b")
    third = tick(namespace_discovery_sensor, instance, stash, second.cursor)
    assert added(third) == ["/projects/b"]
    apply(instance, third)
    assert sorted(instance.get_dynamic_partitions("namespaces")) == ["/", "/projects", "/projects/a", "/projects/b"]
    assert json.loads(third.cursor or "")["count"] == 4


def test_discovery_removes_deleted_namespaces_and_lists_only_then(
    store: Store, instance: dg.DagsterInstance, stash: StashResource
) -> None:
    for slug in ["/keep", "/gone/child"]:
        ns.create(store, slug)
    first = tick(namespace_discovery_sensor, instance, stash, None)
    apply(instance, first)
    # A stray key the counts cannot see: a normal tick must not list partitions to find it.
    instance.add_dynamic_partitions("namespaces", ["/stray"])
    quiet = tick(namespace_discovery_sensor, instance, stash, first.cursor)
    assert quiet.dynamic_partitions_requests == []

    ns.delete(store, "/gone", confirm=True)
    result = tick(namespace_discovery_sensor, instance, stash, quiet.cursor)
    assert sorted(deleted(result)) == ["/gone", "/gone/child", "/stray"]
    assert added(result) == []
    apply(instance, result)
    assert sorted(instance.get_dynamic_partitions("namespaces")) == ["/", "/keep"]
    after = tick(namespace_discovery_sensor, instance, stash, result.cursor)
    assert after.dynamic_partitions_requests == []


def test_discovery_pages_large_batches(
    store: Store, instance: dg.DagsterInstance, stash: StashResource, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sensors, "DISCOVERY_BATCH", 2)
    for i in range(4):
        ns.create(store, f"/n{i}")  # 5 namespaces with the root
    seen: list[str] = []
    cursor = None
    for _ in range(3):
        result = tick(namespace_discovery_sensor, instance, stash, cursor)
        seen += added(result)
        apply(instance, result)
        cursor = result.cursor
    assert sorted(seen) == ["/", "/n0", "/n1", "/n2", "/n3"]
    assert len(seen) == len(set(seen))


# -- watermark ---------------------------------------------------------------------------


@pytest.fixture
def backlog(store: Store) -> Store:
    """/a: new episodes; /b: asserted facts, an active goal, an open hypothesis; /c: nothing."""
    for slug in ["/a", "/b", "/c"]:
        ns.create(store, slug)
    remember(store, "/a", "The deploy runs blue-green on Fridays.")
    remember(store, "/a", "Rollbacks take four minutes.")
    facts.assert_fact(store, "/b", "The API gateway is Envoy.")
    goals.create(store, "/b", "Cut deploy time in half.")
    hypotheses.create(store, "/b", "Envoy adds 5 ms latency.", "Compare p50 with and without Envoy.")
    return store


def test_watermark_requests_exactly_the_pairs_with_backlog(
    backlog: Store, instance: dg.DagsterInstance, stash: StashResource
) -> None:
    result = tick(watermark_sensor, instance, stash, None)
    assert requested(result) == {
        ("facts", "/a"),
        ("relationships", "/b"),
        ("causal_links", "/b"),
        ("goal_progress", "/b"),
        ("hypothesis_evidence", "/b"),
        ("profiles", "/b"),
    }
    by_ns = {r.partition_key: r for r in result.run_requests or []}
    assert set(by_ns) == {"/a", "/b"}  # one run per namespace, stages in graph order
    assert [k.to_user_string() for k in by_ns["/b"].asset_selection or []] == [
        "relationships",
        "causal_links",
        "goal_progress",
        "hypothesis_evidence",
        "profiles",
    ]
    assert by_ns["/a"].tags["stash/trigger"] == "watermark"
    # partitions the discovery sensor has not added yet are added in the same tick
    assert sorted(added(result)) == ["/a", "/b"]


def test_watermark_requests_nothing_when_caught_up(
    backlog: Store, instance: dg.DagsterInstance, stash: StashResource
) -> None:
    catch_up(backlog)
    result = tick(watermark_sensor, instance, stash, None)
    assert result.run_requests == [] and result.skip_reason is not None
    remember(backlog, "/c", "A new observation.")
    assert requested(tick(watermark_sensor, instance, stash, None)) == {("facts", "/c")}


@pytest.mark.parametrize("status", sensors.IN_FLIGHT)
def test_watermark_skips_partitions_with_a_run_in_flight(
    backlog: Store, instance: dg.DagsterInstance, stash: StashResource, status: dg.DagsterRunStatus
) -> None:
    add_run(instance, "/a", status)
    add_run(instance, "/b", dg.DagsterRunStatus.SUCCESS)  # finished runs do not block
    assert {ns for _, ns in requested(tick(watermark_sensor, instance, stash, None))} == {"/b"}


def test_watermark_skips_model_stages_without_a_reasoner(
    backlog: Store, instance: dg.DagsterInstance, settings: object
) -> None:
    from stash_pipeline.consolidation import runner

    # the profiles stage needs no model: it runs; every model stage waits
    result = tick(watermark_sensor, instance, resource_for(settings), None)  # type: ignore[arg-type]
    assert requested(result) == {("profiles", "/b")}
    runner.run_stage(backlog, "/b", "profiles")
    result = tick(watermark_sensor, instance, resource_for(settings), None)  # type: ignore[arg-type]
    assert result.run_requests == []
    # not "caught up": the skip reason names what is blocked and what to set
    reason = result.skip_reason.skip_message if result.skip_reason else ""
    assert "caught up" not in reason
    assert "facts (1 namespace(s): /a)" in reason and "relationships (1 namespace(s): /b)" in reason
    assert "STASH_REASONER_MODEL" in reason and "STASH_OPENAI_BASE_URL" in reason


def test_watermark_says_caught_up_only_when_nothing_waits(
    store: Store, instance: dg.DagsterInstance, settings: object
) -> None:
    ns.create(store, "/quiet")
    result = tick(watermark_sensor, instance, resource_for(settings), None)  # type: ignore[arg-type]
    assert result.skip_reason is not None and result.skip_reason.skip_message == "every stage is caught up"


def test_watermark_caps_requests_and_pages_round_robin(
    store: Store, instance: dg.DagsterInstance, stash: StashResource, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sensors, "MAX_RUNS_PER_TICK", 2)
    slugs = ["/n1", "/n2", "/n3", "/n4", "/n5"]
    for slug in slugs:
        ns.create(store, slug)
        remember(store, slug, f"episode in {slug}")
    cursor = None
    order: list[list[str]] = []
    for _ in range(3):
        result = tick(watermark_sensor, instance, stash, cursor)
        order.append([r.partition_key for r in result.run_requests or []])
        cursor = result.cursor
    assert order == [["/n1", "/n2"], ["/n3", "/n4"], ["/n5", "/n1"]]


def test_watermark_run_key_changes_with_new_data_and_time_bucket(
    backlog: Store, instance: dg.DagsterInstance, stash: StashResource, monkeypatch: pytest.MonkeyPatch
) -> None:
    def key_for_a() -> str:
        result = tick(watermark_sensor, instance, stash, None)
        (request,) = [r for r in result.run_requests or [] if r.partition_key == "/a"]
        assert request.run_key is not None
        return request.run_key

    clock = [1_000_000.0]
    monkeypatch.setattr(sensors.time, "time", lambda: clock[0])
    first = key_for_a()
    assert key_for_a() == first  # same backlog, same bucket: deduplicated by Dagster
    clock[0] += sensors.RUN_KEY_BUCKET_S
    retry = key_for_a()
    assert retry != first  # a failed run is re-requested in the next bucket
    remember(backlog, "/a", "Yet another observation.")
    assert key_for_a() != retry  # new head
