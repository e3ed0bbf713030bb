"""``episodes``: the external asset the MCP service writes, with a data version per namespace.

The data version of an ``episodes`` partition is the namespace's episode high-water
mark (the newest live episode id). Every tick, the watermark sensor reports an
event for each namespace whose facts stage is behind and whose head it has not
reported yet (``episode_events``); its cursor remembers the heads reported for
namespaces still behind, so it stays small and no head is reported twice.

Each new head is reported twice, as a runless observation and then as a runless
materialization of the external asset (episodes are written outside Dagster), because
Dagster 1.13 reads the two sides of "behind" from different events: a stage
materialization records the data version of a partitioned input from its latest
*materialization* (``dagster/input_data_version/episodes``,
``dagster._core.execution.context.data_version_cache``), while the stale-status check
of an external dependency looks for *observations* after that one
(``CachingStaleStatusResolver._is_dep_updated``). With both, a stage partition shows as
unsynced as soon as a newer episode head is reported, and in sync after its run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import dagster as dg

from stash_pipeline.defs.partitions import namespaces_partitions, partition_key

GROUP = "consolidation"
#: the stage whose head is the episode head (``stage_backlog``'s ``facts`` row)
EPISODE_STAGE = "facts"
#: the tag Dagster reads an event's data version from (``dagster._core.definitions.data_version``)
DATA_VERSION_TAG = "dagster/data_version"
#: namespaces reported per sensor tick at most (two events each); the rest follow on later ticks
MAX_EVENTS_PER_TICK = 500


episodes = dg.AssetSpec(
    "episodes",
    description="What agents witnessed, written by the MCP service / CLI (`remember`), not by Dagster. "
    "The watermark sensor reports each namespace's new episode head as this asset's data version.",
    partitions_def=namespaces_partitions,
    group_name=GROUP,
    kinds={"postgres"},
)


def episode_events(
    rows: Iterable[Mapping[str, Any]], reported: Mapping[str, int], existing: Iterable[str]
) -> tuple[list[dg.AssetObservation | dg.AssetMaterialization], dict[str, int]]:
    """Events for heads not reported yet, and what to remember for the next tick.

    ``rows`` are ``stage_backlog`` rows; ``reported`` is ``{slug: head}`` from the last
    tick; ``existing`` the partition keys Dagster knows (no event for the others).
    """
    known = set(existing)
    events: list[dg.AssetObservation | dg.AssetMaterialization] = []
    remember: dict[str, int] = {}
    for row in rows:
        if row["stage"] != EPISODE_STAGE or int(row["head"]) <= int(row["cursor"]):
            continue  # caught up: its last event is its head
        slug, head = row["slug"], int(row["head"])
        if reported.get(slug) == head:
            remember[slug] = head  # still behind, already reported
            continue
        if partition_key(slug) not in known or len(events) >= 2 * MAX_EVENTS_PER_TICK:
            continue  # not a partition yet, or over this tick's cap: a later tick reports it
        tags = {DATA_VERSION_TAG: str(head)}
        metadata = {"episode_head": head, "facts_cursor": int(row["cursor"])}
        # both, observation first (see the module docstring)
        events.append(dg.AssetObservation("episodes", partition=partition_key(slug), tags=tags, metadata=metadata))
        events.append(dg.AssetMaterialization("episodes", partition=partition_key(slug), tags=tags, metadata=metadata))
        remember[slug] = head
    return events, remember
