"""Sensors: partition discovery and level-triggered watermark runs.

``namespace_discovery_sensor``
    Cursor: ``{"max_id": highest namespace id seen, "count": partitions we believe exist}``.
    Each tick runs one query (namespaces with ``id > max_id`` plus the total count, one
    snapshot) and adds a partition per new namespace. Deletions are noticed cheaply: when
    the total is lower than the count we expect, it lists slugs and partitions once and
    deletes the partitions whose namespace is gone. It never lists every key on a normal
    tick.

``watermark_sensor``
    Level-triggered: each tick runs the one ``stage_backlog`` query (every namespace ×
    stage: checkpoint vs. source head), so work missed by one tick is seen by the next.
    It requests one run per namespace with work, selecting exactly the stages that have
    a backlog; skips namespaces that already have a queued or running run (one
    ``get_runs`` call per tick); caps requests per tick and pages round-robin with its
    cursor (the last namespace handled) so busy namespaces cannot starve the rest. The
    run key holds each selected stage's head id and a time bucket: the same backlog is
    not requested twice within a bucket, yet a failed run is retried by a later bucket
    instead of being blocked by its run key forever. Model-bound stages are skipped while
    no reasoner is configured or its endpoint is marked down (``consolidation/breaker.py``:
    their runs would fail; the first request after the cool-down tries again); the skip
    reason then names the blocked stages, how many namespaces wait on each and the first
    of them by name, and the cause with the endpoint's last error, never "caught up"; likewise a tick whose namespaces all have a run in flight names them. It
    also reports each new episode head as the data version of ``episodes``
    (``episodes.py``), each stage partition's changed backlog as an observation of the
    stage asset (``backlog.py``), so a namespace with input waiting does not look empty,
    and fills the partitions that have nothing to do (``caught_up.py``), so a filled
    partition means a caught-up one and a namespace with no records is not "Missing".

    Pending dead letters are work too once their next try is due (``DEAD_LETTER_BACKOFF_S``
    after an item's first failure, doubling per failure; at once after an operator's
    ``retry``): the stage retries them first when it runs, so an item that failed while the
    model was down comes back by itself. Such a run is tagged ``stash/dead-letter-retry``
    (``stage:items due``) and its run key names ``dead-letter-retry``. A stage whose gate is
    closed (no active goal …) is not requested for its dead letters: it would not look at
    them.

Which stages are watched, their heads and gates all come from the stage table
(``stash_pipeline.stages.STAGES``, passed to ``stage_backlog`` by ``backlog_parameters``).

The planning helpers are plain functions so the schedule sweep shares them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
from dagster import SensorEvaluationContext

from stash_pipeline.consolidation.breaker import Breaker
from stash_pipeline.defs import caught_up
from stash_pipeline.defs.assets import STAGE_KEYS
from stash_pipeline.defs.backlog import NO_REASONER, backlog_events, changed_rows, count_backlog
from stash_pipeline.defs.episodes import episode_events
from stash_pipeline.defs.partitions import NAMESPACES, PARTITION_TAG, namespaces_partitions, partition_key
from stash_pipeline.defs.resources import StashResource
from stash_pipeline.stages import STAGES, backlog_parameters
from stash_pipeline.store import Store

#: At most this many runs (namespaces) per watermark tick; the cursor pages through the rest.
MAX_RUNS_PER_TICK = 50
#: Run keys repeat within this window: a failed run is re-requested at most once per bucket.
RUN_KEY_BUCKET_S = 900
#: Namespaces a skip reason names before "and N more".
NAMED_IN_SKIP_REASON = 5
#: New namespaces added per discovery tick.
DISCOVERY_BATCH = 1000
#: A pending dead letter is due this long after its item's last failure, doubled per earlier failure ...
DEAD_LETTER_BACKOFF_S = 300.0
#: ... and never later than this.
DEAD_LETTER_MAX_BACKOFF_S = 6 * 3600.0
#: Run tag of a run that retries dead letters: ``facts:2,relationships:1`` (stage: items due).
DEAD_LETTER_TAG = "stash/dead-letter-retry"

IN_FLIGHT = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]

_SPECS = {spec.name: spec for spec in STAGES}
#: Stages the watermark drives: those with a source to watch (decay has none, its schedule runs it).
WATERMARK_STAGES = tuple(spec.name for spec in STAGES if spec.watermarked)


@dataclass(frozen=True)
class Backlog:
    """One stage of one namespace with unconsumed source rows."""

    slug: str
    stage: str
    cursor: int
    #: the head the sensor saw ("head/aux_head" for a stage with a second source)
    head: str
    #: pending dead letters due for a retry
    dead_letters: int = 0
    #: whether new source rows wait (False: only dead letters do)
    new_input: bool = True


def pending_work(
    rows: Iterable[Mapping[str, Any]], *, stages: Sequence[str], model_ready: bool
) -> dict[str, list[Backlog]]:
    """``{slug: [Backlog, ...]}`` for rows with work, in stage-table order per namespace.

    ``model_ready``: whether model stages can run now (``model_blocker`` says "").
    """
    order = {name: i for i, name in enumerate(stages)}
    work: dict[str, list[Backlog]] = {}
    for row in rows:
        stage = row["stage"]
        # dead letters of a stage whose gate is closed would not be looked at
        retry = int(row.get("dead_letters_due") or 0) if row.get("gate_open", True) else 0
        if not (row["has_work"] or retry) or stage not in order:
            continue
        spec = _SPECS[stage]
        if spec.needs_model and not model_ready:
            continue
        head = str(row["head"] or 0)
        if spec.aux_source is not None:
            # new rows of the second source alone are work too; without this they would wait a bucket
            head = f"{head}/{row.get('aux_head') or 0}"
        if retry:
            # a new key once a retry changed the dead letters (tried, failed again, resolved)
            head = f"{head}+dead-letter-retry.{retry}.{str(row.get('dead_letter_mark') or '')[:8]}"
        work.setdefault(row["slug"], []).append(
            Backlog(row["slug"], stage, int(row["cursor"] or 0), head, retry, bool(row["has_work"]))
        )
    for items in work.values():
        items.sort(key=lambda b: order[b.stage])
    return work


def model_blocker(store: Store) -> str:
    """Why model stages cannot run now ("" = they can): no reasoner, or its endpoint is down."""
    if not store.settings.reasoner_configured:
        return NO_REASONER
    return Breaker(store.db, str(store.settings.openai_base_url)).down_reason()


def blocked_backlog(rows: Iterable[Mapping[str, Any]], *, blocker: str) -> str:
    """Model-stage work waiting on ``blocker``, as a sentence for a skip reason ("" if none)."""
    if not blocker:
        return ""
    blocked: dict[str, set[str]] = {}
    for row in rows:
        spec = _SPECS.get(row["stage"])
        if spec is not None and spec.needs_model and spec.watermarked and row["has_work"]:
            blocked.setdefault(spec.name, set()).add(row["slug"])
    if not blocked:
        return ""
    stages = ", ".join(f"{stage} ({len(slugs)} namespace(s): {name_some(sorted(slugs))})" for stage, slugs in blocked.items())
    return f"blocked: {stages} have new input but {blocker}"


def name_some(slugs: Sequence[str], limit: int = NAMED_IN_SKIP_REASON) -> str:
    """The first ``limit`` namespaces by name, and how many more: "/a, /b and 3 more"."""
    shown = ", ".join(slugs[:limit])
    return f"{shown} and {len(slugs) - limit} more" if len(slugs) > limit else shown


def round_robin(slugs: Sequence[str], after: str, limit: int) -> list[str]:
    """Up to ``limit`` slugs in order, starting after ``after`` and wrapping around."""
    ordered = sorted(slugs)
    later = [s for s in ordered if s > after]
    earlier = [s for s in ordered if s <= after]
    return (later + earlier)[:limit]


def run_key(trigger: str, slug: str, items: Sequence[Backlog], now: float) -> str:
    """Same key for the same backlog within one time bucket; new data or a new bucket → new key."""
    heads = ",".join(f"{b.stage}@{b.head}" for b in items)
    return f"{trigger}:{slug}:{heads}:{int(now // RUN_KEY_BUCKET_S)}"


def in_flight_partitions(instance: dg.DagsterInstance, keys: Sequence[str]) -> set[str]:
    """Partitions among ``keys`` with a queued or running run (one storage query)."""
    if not keys:
        return set()
    runs = instance.get_runs(filters=dg.RunsFilter(statuses=IN_FLIGHT, tags={PARTITION_TAG: list(keys)}))
    return {run.tags[PARTITION_TAG] for run in runs if PARTITION_TAG in run.tags}


def run_requests(
    work: Mapping[str, Sequence[Backlog]], slugs: Sequence[str], *, trigger: str, now: float
) -> list[dg.RunRequest]:
    """One run per namespace selecting exactly its stages with backlog or dead letters due."""
    requests = []
    for slug in slugs:
        items = work[slug]
        tags = {"stash/trigger": trigger, "stash/stages": ",".join(b.stage for b in items)}
        retries = ",".join(f"{b.stage}:{b.dead_letters}" for b in items if b.dead_letters)
        if retries:
            tags[DEAD_LETTER_TAG] = retries
        requests.append(
            dg.RunRequest(
                partition_key=partition_key(slug),
                asset_selection=[STAGE_KEYS[b.stage] for b in items],
                run_key=run_key(trigger, slug, items, now),
                tags=tags,
            )
        )
    return requests


def with_due_dead_letters(store: Store, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``stage_backlog`` rows with ``dead_letters_due`` (and a ``dead_letter_mark``) where some are due."""
    due = {
        (int(r["namespace_id"]), r["stage"]): r
        for r in store.db.all(
            "consolidation_dead_letters_due",
            namespace_ids=None,
            backoff_s=DEAD_LETTER_BACKOFF_S,
            max_backoff_s=DEAD_LETTER_MAX_BACKOFF_S,
        )
    }
    out = []
    for row in rows:
        found = due.get((int(row["namespace_id"]), row["stage"]))
        out.append({**row, "dead_letters_due": int(found["due"]), "dead_letter_mark": found["mark"]} if found else dict(row))
    return out


def missing_partitions_request(instance: dg.DagsterInstance, keys: Sequence[str]) -> list[Any]:
    """An add request for keys not yet partitions (the daemon applies it before the runs)."""
    known = instance.get_existing_dynamic_partitions(NAMESPACES, list(keys))
    missing = [k for k in keys if k not in known]
    return [namespaces_partitions.build_add_request(missing)] if missing else []


def read_backlog(stash: StashResource) -> tuple[list[dict[str, Any]], str]:
    """The ``stage_backlog`` rows (with dead letters due) and what model stages wait on ("": nothing)."""
    with stash.open_store() as store:
        rows = with_due_dead_letters(store, store.db.all("stage_backlog", **backlog_parameters()))
        return rows, model_blocker(store)


def skipped(context: SensorEvaluationContext, reason: str, cursor: str, events: list[Any]) -> dg.SensorResult:
    """A tick without runs: its reason is the tick's skip reason and a line of the tick's log.

    The UI shows a skipped tick as "0 runs requested"; the reason is that tag's tooltip,
    the "Skip reason" of the tick's dialog and, through this line, its logs.
    """
    context.log.info(reason)
    return dg.SensorResult(skip_reason=reason, cursor=cursor, asset_events=events)


@dg.sensor(
    name="watermark_sensor",
    description="Requests stage runs for namespaces whose stage checkpoints are behind their source heads.",
    target=dg.AssetSelection.assets(*(STAGE_KEYS[name] for name in WATERMARK_STAGES)),
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def watermark_sensor(context: SensorEvaluationContext, stash: StashResource) -> dg.SensorResult:
    state = json.loads(context.cursor) if context.cursor else {}
    reported_backlog = state.get("backlog", {})
    with stash.open_store() as store:
        rows = with_due_dead_letters(store, store.db.all("stage_backlog", **backlog_parameters()))
        blocker = model_blocker(store)
        # one partition listing for every key this tick may report on
        existing = set(context.instance.get_dynamic_partitions(NAMESPACES))
        changed = changed_rows(rows, reported_backlog, existing)
        counts = count_backlog(store, changed)
    # new episode heads become `episodes` data versions, so the UI shows partitions behind
    episode_evts, reported = episode_events(rows, state.get("observed", {}), existing)
    # each stage partition's backlog, so one with input waiting does not look empty
    backlog_evts, backlog_state = backlog_events(
        rows, changed, counts, reported_backlog, blocker=blocker
    )
    # partitions with nothing to do are filled, so "filled" means caught up
    idle = caught_up.candidates(rows, existing)
    filled = state.get("filled", "")
    fill_evts: list[Any] = []
    if caught_up.digest(idle) != filled:
        fill_evts = caught_up.idle_events(rows, idle, caught_up.materialized_partitions(context.instance, idle))
        if len(fill_evts) < caught_up.MAX_FILL_EVENTS_PER_TICK:
            filled = caught_up.digest(idle)  # all filled: no need to look again until the set changes
    events = [*episode_evts, *backlog_evts, *fill_evts]
    work = pending_work(rows, stages=WATERMARK_STAGES, model_ready=not blocker)
    blocked = blocked_backlog(rows, blocker=blocker)

    def cursor(after: str) -> str:
        return json.dumps({"after": after, "observed": reported, "backlog": backlog_state, "filled": filled})

    if not work:
        return skipped(context, blocked or "every stage is caught up", cursor(state.get("after", "")), events)
    busy = in_flight_partitions(context.instance, [partition_key(s) for s in work])
    ready = [slug for slug in work if partition_key(slug) not in busy]
    chosen = round_robin(ready, state.get("after", ""), MAX_RUNS_PER_TICK)
    if not chosen:
        waiting = sorted(slug for slug in work if partition_key(slug) in busy)
        reason = f"{len(waiting)} namespace(s) with work already have a run: {name_some(waiting)}"
        return skipped(context, reason, cursor(state.get("after", "")), events)
    return dg.SensorResult(
        run_requests=run_requests(work, chosen, trigger="watermark", now=time.time()),
        dynamic_partitions_requests=missing_partitions_request(context.instance, [partition_key(s) for s in chosen]),
        cursor=cursor(chosen[-1]),
        asset_events=events,
    )


@dg.sensor(
    name="namespace_discovery_sensor",
    description="Adds a partition for every new namespace and removes partitions of deleted ones.",
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def namespace_discovery_sensor(context: SensorEvaluationContext, stash: StashResource) -> dg.SensorResult:
    state = json.loads(context.cursor) if context.cursor else {"max_id": 0, "count": None}
    with stash.open_store() as store:
        row = store.db.one("dagster_namespaces_after", after_id=state["max_id"], limit=DISCOVERY_BATCH) or {}
        new = row.get("new") or []
        total = int(row.get("total") or 0)
        add = [partition_key(n["slug"]) for n in new]
        max_id = max([state["max_id"], *(int(n["id"]) for n in new)])
        count = None if state["count"] is None else state["count"] + len(add)
        delete: list[str] = []
        caught_up = len(new) < DISCOVERY_BATCH
        if caught_up and count != total:
            # A namespace disappeared (or this is the first tick): reconcile once by listing.
            slugs = {partition_key(r["slug"]) for r in store.db.all("dagster_namespace_slugs")}
            partitions = set(context.instance.get_dynamic_partitions(NAMESPACES))
            delete = sorted(partitions - slugs)
            add = sorted((slugs - partitions) | set(add))
            count = len(slugs)
    requests: list[Any] = []
    if add:
        requests.append(namespaces_partitions.build_add_request(add))
    if delete:
        requests.append(namespaces_partitions.build_delete_request(delete))
    cursor = json.dumps({"max_id": max_id, "count": count})
    if not requests:
        return dg.SensorResult(skip_reason="no namespace added or deleted", cursor=cursor)
    return dg.SensorResult(dynamic_partitions_requests=requests, cursor=cursor)
