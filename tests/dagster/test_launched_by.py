"""A run says who launched it: a re-execution by hand is not its parent's sensor."""

from __future__ import annotations

import dagster as dg
import pytest

from stash_pipeline.defs.assets import LAUNCHED_BY_TAG, episodes, launched_by
from stash_pipeline.defs.resources import StashResource
from stash_pipeline.store import Store
from tests.dagster.test_assets import ASSETS, seed

SENSOR = {"dagster/sensor_name": "watermark_sensor", "stash/trigger": "watermark"}


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        (SENSOR, "sensor watermark_sensor"),
        # Dagster copies the parent's tags onto a re-execution, the sensor's name included
        ({**SENSOR, "dagster/parent_run_id": "0f1e2d3c-aaaa", "dagster/root_run_id": "0f1e2d3c-aaaa"},
         "re-execution of run 0f1e2d3c, launched by hand"),
        ({**SENSOR, "dagster/parent_run_id": "0f1e2d3c-aaaa", "dagster/retry_number": "1"},
         "automatic retry 1 of run 0f1e2d3c (its run worker died)"),
        ({"dagster/backfill": "abcdefgh"}, "backfill abcdefgh"),
        ({"dagster/schedule_name": "decay_daily"}, "schedule decay_daily"),
        ({"stash/trigger": "cli"}, "stash consolidate run"),
        ({"stash/trigger": "mcp"}, "the consolidate tool (MCP)"),
        ({}, "by hand (Dagster UI or CLI)"),
    ],
)
def test_launched_by_names_the_hand_before_inherited_tags(tags: dict[str, str], expected: str) -> None:
    assert launched_by(tags) == expected


def test_a_run_is_tagged_with_who_launched_it(
    store: Store, instance: dg.DagsterInstance, stash: StashResource
) -> None:
    seed(store, "/x")
    instance.add_dynamic_partitions("namespaces", ["/x"])
    result = dg.materialize(
        [episodes, *ASSETS],
        selection=["profiles", "decay"],
        partition_key="/x",
        instance=instance,
        resources={"stash": stash},
        tags={**SENSOR, "dagster/parent_run_id": "0f1e2d3c-aaaa", "dagster/root_run_id": "0f1e2d3c-aaaa"},
    )
    assert result.success
    run = instance.get_run_by_id(result.run_id)
    assert run is not None and run.tags[LAUNCHED_BY_TAG] == "re-execution of run 0f1e2d3c, launched by hand"
