"""No manual step: episodes in a new namespace → discovery → watermark runs → every stage caught up.

Each tick's results are applied the way the daemon would (partitions first, then one run
per request, with the request's partition and asset selection), until the watermark
sensor has nothing left to request.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from stash_pipeline.defs.assets import episodes
from stash_pipeline.defs.sensors import namespace_discovery_sensor, watermark_sensor
from stash_pipeline.memory import namespaces as ns
from stash_pipeline.memory.episodes import remember
from stash_pipeline.stages import backlog_parameters
from stash_pipeline.store import Store
from tests.dagster.test_assets import ASSETS, TEXTS, fact_rows
from tests.dagster.test_sensors import apply, tick


def execute(instance: dg.DagsterInstance, stash: Any, request: dg.RunRequest) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [episodes, *ASSETS],
        selection=list(request.asset_selection or []),
        partition_key=request.partition_key,
        instance=instance,
        resources={"stash": stash},
        tags=request.tags,
    )


def test_new_namespace_is_discovered_and_consolidated_without_manual_steps(
    store: Store, instance: dg.DagsterInstance, model_stash: Any
) -> None:
    ns.create(store, "/team/alpha")
    for text in TEXTS:
        remember(store, "/team/alpha", text)

    discovery = tick(namespace_discovery_sensor, instance, model_stash, None)
    apply(instance, discovery)
    assert instance.has_dynamic_partition("namespaces", "/team/alpha")

    cursor = None
    executed: list[str] = []
    for _ in range(6):
        result = tick(watermark_sensor, instance, model_stash, cursor)
        cursor = result.cursor
        if not result.run_requests:
            break
        apply(instance, result)
        for request in result.run_requests:
            assert request.partition_key == "/team/alpha"
            assert execute(instance, model_stash, request).success
            executed += [k.to_user_string() for k in request.asset_selection or []]
    else:
        raise AssertionError("the watermark sensor never settled")

    assert executed[0] == "facts" and {"relationships", "causal_links", "patterns"} <= set(executed)
    assert not [r for r in store.db.all("stage_backlog", **backlog_parameters()) if r["has_work"]]
    assert len(fact_rows(store)) == 2
