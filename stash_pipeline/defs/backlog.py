"""Each stage partition's backlog, reported to the UI as observations of the stage asset.

Without them a namespace whose episodes wait for the facts stage looks like an empty one
(both are grey "Missing" until a first run), and a partition materialized an hour ago
says nothing about the input that arrived since. Every tick the watermark sensor already
reads ``stage_backlog`` (every namespace × stage: cursor and head); in the namespaces
where a waiting stage's cursor or head moved since the last report (``changed_rows``),
it counts the items waiting (``consolidation_backlog_counts``, one query, none on a quiet
tick) and reports one runless ``AssetObservation`` per stage partition (``backlog_events``) with
metadata ``backlog`` (items waiting after the stage's cursor), ``cursor``, ``head`` and
``waiting_on`` ("" or why the sensor requests no run: no reasoner, its endpoint down, a
closed gate). A
backlog that drained is reported once as 0 and then forgotten, so the sensor's cursor
remembers only namespaces with input waiting, one short mark each (``slug_marks``).

In the UI: the stage asset's partition (Events, "Latest observation") shows the numbers,
and ``backlog`` plots per partition.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import dagster as dg

from stash_pipeline.defs.partitions import partition_key
from stash_pipeline.stages import STAGES

if TYPE_CHECKING:
    from stash_pipeline.store import Store

#: stage partitions reported per sensor tick at most; the rest follow on later ticks
MAX_BACKLOG_EVENTS_PER_TICK = 500
#: hex digits of a namespace's mark in the sensor's cursor
MARK_CHARS = 10

_SPECS = {spec.name: spec for spec in STAGES}


#: what model stages wait on while no reasoner is configured
NO_REASONER = "no reasoner is configured; set STASH_REASONER_MODEL and STASH_OPENAI_BASE_URL"


def waiting_on(row: Mapping[str, Any], blocker: str) -> str:
    """Why a stage partition with a backlog gets no run from the sensor ("" = it does).

    ``blocker`` is why model stages cannot run now ("" = they can; ``sensors.model_blocker``).
    """
    spec = _SPECS.get(row["stage"])
    if spec is None or not spec.watermarked:
        return "its schedule (no watermark)"
    if spec.needs_model and blocker:
        return blocker
    if not row["has_work"]:
        return f"its gate ({spec.gate}): nothing to do until the namespace has one" if spec.gate else ""
    return ""


def _waiting(row: Mapping[str, Any]) -> bool:
    return int(row.get("head") or 0) > int(row.get("cursor") or 0)


def slug_marks(rows: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Per namespace with input waiting: a short digest of its waiting stages' cursors and heads.

    The sensor's cursor keeps one per namespace (about 30 bytes), not one per stage: when
    it changes, every stage of that namespace is reported again.
    """
    parts: dict[str, list[str]] = {}
    for row in rows:
        spec = _SPECS.get(row["stage"])
        if spec is not None and spec.watermarked and _waiting(row):
            parts.setdefault(row["slug"], []).append(f"{row['stage']}:{int(row['cursor'] or 0)}:{int(row['head'] or 0)}")
    return {slug: hashlib.sha1(",".join(p).encode()).hexdigest()[:MARK_CHARS] for slug, p in parts.items()}


def changed_rows(
    rows: Iterable[Mapping[str, Any]], reported: Mapping[str, str], existing: Iterable[str]
) -> list[Mapping[str, Any]]:
    """Rows to report this tick: the watermarked stages of namespaces whose mark changed, capped.

    ``reported`` is ``{slug: mark}`` for namespaces reported with input waiting. A
    namespace seen waiting for the first time reports its waiting stages; one reported
    before reports all its stages (a stage that drained says 0).
    """
    rows = list(rows)
    current = slug_marks(rows)
    known = set(existing)
    by_slug: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        spec = _SPECS.get(row["stage"])
        if spec is not None and spec.watermarked:
            by_slug.setdefault(row["slug"], []).append(row)
    out: list[Mapping[str, Any]] = []
    for slug, slug_rows in by_slug.items():
        before, now = reported.get(slug), current.get(slug)
        if before == now or partition_key(slug) not in known:
            continue
        picked = [r for r in slug_rows if _waiting(r) or before is not None]
        if len(out) + len(picked) > MAX_BACKLOG_EVENTS_PER_TICK:
            break  # the rest on a later tick (their marks are not remembered yet)
        out.extend(picked)
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
        count_limit=None,
    )
    return {(int(r["namespace_id"]), r["stage"]): int(r["backlog"]) for r in found}


def backlog_events(
    rows: Iterable[Mapping[str, Any]],
    changed: Sequence[Mapping[str, Any]],
    counts: Mapping[tuple[int, str], int],
    reported: Mapping[str, str],
    *,
    blocker: str,
) -> tuple[list[dg.AssetObservation], dict[str, str]]:
    """Observations for the ``changed`` rows, and the marks to remember for the next tick."""
    current = slug_marks(rows)
    done = {row["slug"] for row in changed}
    remember: dict[str, str] = {}
    for slug in set(current) | set(reported):
        mark = current.get(slug) if slug in done else reported.get(slug)
        if mark is not None:
            remember[slug] = mark  # reported now, or its change is reported on a later tick
    events: list[dg.AssetObservation] = []
    for row in changed:
        backlog = counts.get((int(row["namespace_id"]), row["stage"]), 0) if _waiting(row) else 0
        events.append(
            dg.AssetObservation(
                row["stage"],
                partition=partition_key(row["slug"]),
                metadata={
                    "backlog": backlog,
                    "cursor": int(row.get("cursor") or 0),
                    "head": int(row.get("head") or 0),
                    "waiting_on": waiting_on(row, blocker) if backlog else "",
                },
            )
        )
    return events, remember
