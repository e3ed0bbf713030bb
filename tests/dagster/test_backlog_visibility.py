"""In the UI, a stage partition with input waiting no longer looks like an empty one.

The watermark sensor reports each stage partition's backlog as an observation of the
stage asset when it changes (and once more when it drains), and its skip reasons name
the namespaces that wait instead of only counting them.
"""

from __future__ import annotations

import json
from typing import Any

import dagster as dg

from stash_pipeline.defs.resources import StashResource
from stash_pipeline.defs.sensors import watermark_sensor
from stash_pipeline.memory import namespaces as ns
from stash_pipeline.memory.episodes import remember
from stash_pipeline.store import Store
from tests.dagster.conftest import resource_for
from tests.dagster.test_sensors import add_run, catch_up, tick


def observed(result: dg.SensorResult) -> dict[tuple[str, str], dict[str, Any]]:
    """(stage, partition) → metadata of the stage observations a tick reported."""
    out = {}
    for event in result.asset_events or []:
        if isinstance(event, dg.AssetObservation) and event.asset_key.to_user_string() != "episodes":
            out[(event.asset_key.to_user_string(), event.partition)] = {
                k: v.value for k, v in event.metadata.items()
            }
    return out


def test_each_stage_partition_reports_its_backlog_when_it_changes(
    store: Store, instance: dg.DagsterInstance, stash: StashResource
) -> None:
    for slug in ("/a", "/empty"):
        ns.create(store, slug)
    instance.add_dynamic_partitions("namespaces", ["/a", "/empty"])
    for i in range(3):
        remember(store, "/a", f"Observation number {i} about the deploy.")

    first = tick(watermark_sensor, instance, stash, None)
    seen = observed(first)
    assert seen[("facts", "/a")]["backlog"] == 3 and seen[("facts", "/a")]["waiting_on"] == ""
    assert seen[("failure_patterns", "/a")]["backlog"] == 3  # gated: waits for a failure
    assert "gate" in seen[("failure_patterns", "/a")]["waiting_on"]
    assert not any(partition == "/empty" for _, partition in seen)  # nothing waits there

    # nothing changed: nothing reported again
    second = tick(watermark_sensor, instance, stash, first.cursor)
    assert observed(second) == {}

    remember(store, "/a", "One more observation.")
    third = tick(watermark_sensor, instance, stash, second.cursor)
    assert observed(third)[("facts", "/a")]["backlog"] == 4

    # the stages with work caught up: they say 0 once; the gated one still shows its backlog
    catch_up(store)
    fourth = tick(watermark_sensor, instance, stash, third.cursor)
    drained = observed(fourth)
    assert drained[("facts", "/a")]["backlog"] == 0 and drained[("relationships", "/a")]["backlog"] == 0
    assert drained[("failure_patterns", "/a")]["backlog"] == 4
    assert observed(tick(watermark_sensor, instance, stash, fourth.cursor)) == {}
    # the sensor's cursor keeps one short mark per namespace with input waiting
    assert json.loads(fourth.cursor or "{}")["backlog"].keys() == {"/a"}


def test_without_a_reasoner_the_backlog_says_what_it_waits_on(
    store: Store, instance: dg.DagsterInstance, settings: object
) -> None:
    ns.create(store, "/a")
    instance.add_dynamic_partitions("namespaces", ["/a"])
    remember(store, "/a", "The deploy runs blue-green on Fridays.")
    result = tick(watermark_sensor, instance, resource_for(settings), None)  # type: ignore[arg-type]
    facts = observed(result)[("facts", "/a")]
    assert facts["backlog"] == 1 and "STASH_REASONER_MODEL" in facts["waiting_on"]


def test_skip_reasons_name_the_first_namespaces(
    store: Store, instance: dg.DagsterInstance, stash: StashResource, settings: object
) -> None:
    slugs = [f"/n{i}" for i in range(7)]
    for slug in slugs:
        ns.create(store, slug)
        remember(store, slug, f"An episode in {slug}.")
    # no reasoner: the blocked stage names its first namespaces and how many more wait
    blocked = tick(watermark_sensor, instance, resource_for(settings), None)  # type: ignore[arg-type]
    reason = blocked.skip_reason.skip_message if blocked.skip_reason else ""
    assert "facts (7 namespace(s): /n0, /n1, /n2, /n3, /n4 and 2 more)" in reason

    # every namespace with work already has a run: the reason names them
    for slug in slugs[:2]:
        add_run(instance, slug, dg.DagsterRunStatus.STARTED)
    catch_up(store)
    for slug in slugs[:2]:
        remember(store, slug, "Another episode.")
    busy = tick(watermark_sensor, instance, stash, None)
    assert busy.run_requests == []
    assert busy.skip_reason is not None
    assert busy.skip_reason.skip_message == "2 namespace(s) with work already have a run: /n0, /n1"
