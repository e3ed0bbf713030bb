"""Partitions whose fill state means "caught up": the runless fill of idle partitions.

Dagster shows a partition as filled once it has a materialization, and a stage asset's
fill percentage counts them. A stage partition whose stage has nothing to do in its
namespace — a parent namespace with no records of its own (``/projects``), a namespace
without a goal for ``goal_progress``, input already consumed by ``stash consolidate run
--inline`` — gets no run from the sensor, so it would stay "Missing" for ever, a caught-up
system would show "28% filled", and a "failed and missing" backfill would launch runs
where there is no work.

So each tick the watermark sensor reports one runless ``AssetMaterialization`` for each
partition never materialized whose stage has nothing waiting (``idle_events``), with
metadata ``caught_up`` (why there is nothing to do: no input yet, its gate, every input
consumed), ``cursor`` and ``head``. A partition with input waiting stays Missing until a
run derives it — also while no reasoner is configured; its backlog observation
(``backlog.py``) says what it waits on — and so does a partition with dead letters due.
``decay`` has no watermark: its partition is filled here only while the namespace has no
fact to decay; the daily decay run fills the others. ``episodes`` is filled with its
head as data version, like ``episode_events`` reports a head that a stage is behind.

The fill is reported once: the sensor asks Dagster which partitions are materialized
(one query per asset, ``materialized_partitions``) only when the set of idle partitions
differs from the one it last filled completely (its cursor keeps that set's digest,
``digest``), so a quiet system pays nothing for it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import dagster as dg

from stash_pipeline.defs.episodes import DATA_VERSION_TAG, EPISODE_STAGE
from stash_pipeline.defs.partitions import partition_key
from stash_pipeline.stages import STAGES

#: partitions filled per sensor tick at most; the rest on later ticks
MAX_FILL_EVENTS_PER_TICK = 500

_SPECS = {spec.name: spec for spec in STAGES}
#: the assets a partition can be filled for: the external ``episodes`` and every stage
FILLABLE = ("episodes", *(spec.name for spec in STAGES))

_GATES = {"active_goal": "an active goal", "open_hypothesis": "an open hypothesis", "failure": "a recorded failure"}


def idle_reason(row: Mapping[str, Any], *, has_facts: bool) -> str | None:
    """Why a stage partition has nothing to do ("" never), or None when work waits for it."""
    spec = _SPECS.get(row["stage"])
    if spec is None:
        return None
    if not spec.watermarked:
        return None if has_facts else "no fact to decay in this namespace yet"
    if row["has_work"] or int(row.get("dead_letters_due") or 0):
        return None
    head, aux_head = int(row.get("head") or 0), int(row.get("aux_head") or 0)
    if not row.get("gate_open", True) and spec.gate is not None:
        return f"nothing to do until the namespace has {_GATES[spec.gate]}"
    if head == 0 and aux_head == 0:
        return f"no input yet (no {spec.source} in this namespace)"
    return "every input consumed: the stage's cursor is at its head"


def candidates(rows: Iterable[Mapping[str, Any]], existing: Iterable[str]) -> dict[str, dict[str, str]]:
    """``{asset: {partition: reason}}`` for partitions that would be filled if not materialized."""
    known = set(existing)
    rows = [r for r in rows if partition_key(r["slug"]) in known]
    has_facts: dict[str, bool] = {}
    for row in rows:
        spec = _SPECS.get(row["stage"])
        if spec is not None and spec.source == "facts" and spec.head_stage is None:
            has_facts[row["slug"]] = has_facts.get(row["slug"], False) or int(row.get("head") or 0) > 0
    out: dict[str, dict[str, str]] = {}
    for row in rows:
        key = partition_key(row["slug"])
        reason = idle_reason(row, has_facts=has_facts.get(row["slug"], False))
        if reason is not None:
            out.setdefault(row["stage"], {})[key] = reason
        if row["stage"] == EPISODE_STAGE and int(row.get("head") or 0) <= int(row.get("cursor") or 0):
            # behind: ``episode_events`` reports the head; caught up: report it here once
            out.setdefault("episodes", {})[key] = f"episode head {int(row.get('head') or 0)}"
    return out


def digest(found: Mapping[str, Mapping[str, str]]) -> str:
    """A short digest of the idle partitions (asset and key, not the reasons)."""
    keys = sorted(f"{asset}\x00{key}" for asset, keys in found.items() for key in keys)
    return hashlib.sha1("\x01".join(keys).encode()).hexdigest()[:12]


def materialized_partitions(instance: dg.DagsterInstance, assets: Iterable[str]) -> dict[str, set[str]]:
    """The materialized partitions of each asset (one storage query per asset)."""
    return {asset: instance.get_materialized_partitions(dg.AssetKey(asset)) for asset in assets}


def idle_events(
    rows: Iterable[Mapping[str, Any]], found: Mapping[str, Mapping[str, str]], materialized: Mapping[str, set[str]]
) -> list[dg.AssetObservation | dg.AssetMaterialization]:
    """Runless events filling the ``found`` partitions (``candidates``) not yet materialized, capped."""
    heads = {partition_key(r["slug"]): int(r.get("head") or 0) for r in rows if r["stage"] == EPISODE_STAGE}
    cursors = {(partition_key(r["slug"]), r["stage"]): r for r in rows}
    events: list[dg.AssetObservation | dg.AssetMaterialization] = []
    for asset in FILLABLE:
        for key, reason in sorted(found.get(asset, {}).items()):
            if key in materialized.get(asset, set()):
                continue
            if len(events) >= MAX_FILL_EVENTS_PER_TICK:
                return events
            if asset == "episodes":
                # observation first: the two halves of "behind" (see ``episodes.py``)
                tags = {DATA_VERSION_TAG: str(heads.get(key, 0))}
                metadata: dict[str, Any] = {"episode_head": heads.get(key, 0), "caught_up": "filled by the sensor"}
                events.append(dg.AssetObservation(asset, partition=key, tags=tags, metadata=metadata))
                events.append(dg.AssetMaterialization(asset, partition=key, tags=tags, metadata=metadata))
                continue
            row = cursors.get((key, asset), {})
            events.append(
                dg.AssetMaterialization(
                    asset,
                    partition=key,
                    description=f"Caught up without a run: {reason}.",
                    metadata={
                        "caught_up": reason,
                        "cursor": int(row.get("cursor") or 0),
                        "head": int(row.get("head") or 0),
                    },
                )
            )
    return events
