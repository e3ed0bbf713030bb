"""Each stage partition's backlog, reported to the UI as observations of the stage asset.

Without them a namespace whose episodes wait for the facts stage looks like an empty one
(both are grey "Missing" until a first run), and a partition materialized an hour ago
says nothing about the input that arrived since. Every tick the watermark sensor already
reads ``stage_backlog`` (every namespace × stage: cursor and head); for the stage
partitions whose cursor or head moved since the last report (``changed_rows``), it
counts the items waiting (``consolidation_backlog_counts``, one query, none on a quiet
tick) and reports one runless ``AssetObservation`` each (``backlog_events``) with
metadata ``backlog`` (items waiting after the stage's cursor), ``cursor``, ``head`` and
``waiting_on`` ("" or why the sensor requests no run: no reasoner, a closed gate). A
backlog that drained is reported once as 0 and then forgotten, so the sensor's cursor
remembers only partitions with input waiting.

In the UI: the stage asset's partition (Events, "Latest observation") shows the numbers,
and ``backlog`` plots per partition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import dagster as dg

from stash_pipeline.defs.partitions import partition_key
from stash_pipeline.stages import STAGES

if TYPE_CHECKING:
    from stash_pipeline.store import Store

#: stage partitions reported per sensor tick at most; the rest follow on later ticks
MAX_BACKLOG_EVENTS_PER_TICK = 500

_SPECS = {spec.name: spec for spec in STAGES}


def waiting_on(row: Mapping[str, Any], reasoner_configured: bool) -> str:
    """Why a stage partition with a backlog gets no run from the sensor ("" = it does)."""
    spec = _SPECS.get(row["stage"])
    if spec is None or not spec.watermarked:
        return "its schedule (no watermark)"
    if spec.needs_model and not reasoner_configured:
        return "a reasoner: set STASH_REASONER_MODEL and STASH_OPENAI_BASE_URL"
    if not row["has_work"]:
        return f"its gate ({spec.gate}): nothing to do until the namespace has one" if spec.gate else ""
    return ""


def mark(row: Mapping[str, Any]) -> str:
    """What a report of this row is about: its cursor and head."""
    return f"{int(row.get('cursor') or 0)}:{int(row.get('head') or 0)}"


def changed_rows(
    rows: Iterable[Mapping[str, Any]], reported: Mapping[str, Mapping[str, str]], existing: Iterable[str]
) -> list[Mapping[str, Any]]:
    """Rows of watermarked stages whose cursor or head moved since the last report, capped per tick.

    ``reported`` is ``{slug: {stage: mark}}`` for partitions reported with input waiting;
    a caught-up row is a change only if it was reported waiting (its backlog drained).
    """
    known = set(existing)
    out: list[Mapping[str, Any]] = []
    for row in rows:
        spec = _SPECS.get(row["stage"])
        if spec is None or not spec.watermarked or partition_key(row["slug"]) not in known:
            continue
        before = reported.get(row["slug"], {}).get(row["stage"])
        waiting = int(row.get("head") or 0) > int(row.get("cursor") or 0)
        if (waiting and before != mark(row)) or (not waiting and before is not None):
            out.append(row)
            if len(out) >= MAX_BACKLOG_EVENTS_PER_TICK:
                break
    return out


def count_backlog(store: Store, rows: Sequence[Mapping[str, Any]]) -> dict[tuple[int, str], int]:
    """Exact items waiting per (namespace id, stage) of ``rows`` (one query; none for no rows)."""
    if not rows:
        return {}
    found = store.db.all(
        "consolidation_backlog_counts",
        namespace_ids=[int(r["namespace_id"]) for r in rows],
        stages=[r["stage"] for r in rows],
        sources=[_SPECS[r["stage"]].source for r in rows],
        cursors=[int(r["cursor"] or 0) for r in rows],
        heads=[int(r["head"] or 0) for r in rows],
    )
    return {(int(r["namespace_id"]), r["stage"]): int(r["backlog"]) for r in found}


def backlog_events(
    rows: Iterable[Mapping[str, Any]],
    changed: Sequence[Mapping[str, Any]],
    counts: Mapping[tuple[int, str], int],
    reported: Mapping[str, Mapping[str, str]],
    *,
    reasoner_configured: bool,
) -> tuple[list[dg.AssetObservation], dict[str, dict[str, str]]]:
    """Observations for the ``changed`` rows, and the marks to remember for the next tick."""
    events: list[dg.AssetObservation] = []
    remember: dict[str, dict[str, str]] = {}
    reported_now = {(r["slug"], r["stage"]) for r in changed}
    for row in rows:
        slug, stage = row["slug"], row["stage"]
        key = (slug, stage)
        if key not in reported_now:
            before = reported.get(slug, {}).get(stage)
            if before is not None:
                remember.setdefault(slug, {})[stage] = before  # unchanged, or its report is due later
            continue
        waiting = int(row.get("head") or 0) > int(row.get("cursor") or 0)
        backlog = counts.get((int(row["namespace_id"]), stage), 0) if waiting else 0
        events.append(
            dg.AssetObservation(
                stage,
                partition=partition_key(slug),
                metadata={
                    "backlog": backlog,
                    "cursor": int(row.get("cursor") or 0),
                    "head": int(row.get("head") or 0),
                    "waiting_on": waiting_on(row, reasoner_configured) if backlog else "",
                },
            )
        )
        if waiting:
            remember.setdefault(slug, {})[stage] = mark(row)
    return events, remember
