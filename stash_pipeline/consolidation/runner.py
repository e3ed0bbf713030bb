"""The consolidation runner: the one entry point Dagster, the CLI and MCP call.

``run_stage(store, "/projects/x", "facts")`` runs one stage for one namespace;
``run_all`` runs every stage in stage-table order; ``run_tree`` runs each namespace of
a tree separately (facts never cross namespaces). ``status`` reports cursor, head,
backlog, last run and dead letters per (namespace, stage).

What the runner guarantees for every stage:

* one writer per (namespace, stage): a session-level Postgres advisory lock
  (``db/locks.py``) held on a dedicated connection for the whole run; a second runner
  waits (``wait=True``) or returns status ``busy`` — it never duplicates work;
* a cursor per (namespace, stage) in ``stage_checkpoints``; a stage's module selects a
  bounded batch after it, calls the model OUTSIDE any transaction, then commits the
  batch's outputs, lineage, dead-letter bookkeeping and the new cursor in ONE
  transaction (``StageContext.batch``, in ``stages/context.py``);
* an item that fails (invalid model answer, grounding, a constraint on that item) is
  counted and dead-lettered (``pending`` → retried first by later runs → ``dead`` after
  ``max_item_attempts``); the cursor moves on, so nothing stalls;
* a model outage (``ModelUnavailable``) or a setup the endpoint refuses
  (``ModelSetupRejected``: model name, key, route) fails the run without moving the
  cursor of the batch in flight and dead-letters nothing; a spent token budget stops the
  run cleanly. The exception carries the stage's report as ``stage_report`` (requests
  made, cursor), so callers can say what the failed run did.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stash_pipeline import errors
from stash_pipeline.consolidation.reasoner import Reasoner, RunLedger
from stash_pipeline.db.locks import session_lock, stage_lock
from stash_pipeline.memory.namespaces import get as get_namespace
from stash_pipeline.memory.namespaces import resolve_trees
from stash_pipeline.stages import STAGES, StageReport, backlog_parameters, get_stage
from stash_pipeline.stages.context import StageContext, error_message

if TYPE_CHECKING:
    from stash_pipeline.config import Settings
    from stash_pipeline.store import Store

__all__ = ["StageChoice", "choose_stages", "make_reasoner", "run_all", "run_stage", "run_tree", "status"]


# -- entry points ---------------------------------------------------------------------------
def make_reasoner(store: Store) -> Reasoner | None:
    """The configured reasoner, or None when no model endpoint is configured."""
    if not store.settings.reasoner_configured:
        return None
    return Reasoner(store.settings, store.db)


#: where a model is configured, for the messages that say a model stage cannot run
_CONFIGURE = (
    "set STASH_REASONER_MODEL and STASH_OPENAI_BASE_URL (in the environment of this process, and of the "
    "Dagster daemon and code server when Dagster runs)"
)


@dataclass(frozen=True)
class StageChoice:
    """The stages a consolidate call runs (None: all of them) and the model stages it leaves
    out, with why (``skipped_because``), when no model is configured."""

    stages: list[str] | None
    skipped: list[str] = field(default_factory=list)

    @property
    def skipped_because(self) -> str | None:
        if not self.skipped:
            return None
        return (
            f"no reasoning model is configured, so the model stages were skipped: {', '.join(self.skipped)}; "
            f"to run them, {_CONFIGURE}, and consolidate again"
        )


def choose_stages(settings: Settings, stage: str | None) -> StageChoice:
    """What a consolidate call for ``stage`` (None: all) runs, checked before anything starts.

    With a reasoner configured, what was asked for. Without one, all stages means the stages
    that need no model (``needs_model=False`` in ``STAGES``), the others listed as skipped;
    a model stage asked for by name raises ReasonerNotConfigured, so a run id, a job handle
    or a run in the terminal is only ever started for work that can run.
    """
    if settings.reasoner_configured:
        return StageChoice([stage] if stage else None)
    free = [spec.name for spec in STAGES if not spec.needs_model]
    if stage is None:
        return StageChoice(free, [spec.name for spec in STAGES if spec.needs_model])
    if get_stage(stage).needs_model:
        raise errors.ReasonerNotConfigured(
            f"stage {stage} needs a reasoning model and none is configured: {_CONFIGURE}, and consolidate "
            f"again; nothing was started. Only {_and(free)} run without a model."
        )
    return StageChoice([stage])


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def run_stage(
    store: Store,
    namespace: str,
    stage: str,
    *,
    reasoner: Reasoner | None = None,
    run_id: str | None = None,
    wait: bool = False,
    ledger: RunLedger | None = None,
) -> StageReport:
    """Run one stage for one exact namespace; returns its report.

    Raises ``ModelUnavailable`` (and unexpected errors) after recording the failed run;
    the cursor of the batch in flight is not moved.
    """
    spec = get_stage(stage)
    with store.db.transaction() as tx:
        row = get_namespace(tx, namespace)
    namespace_id, slug = int(row["id"]), str(row["slug"])
    report = StageReport(stage=spec.name, namespace=slug)
    started = time.monotonic()
    if spec.needs_model and reasoner is None:
        reasoner = make_reasoner(store)
        if reasoner is None:
            report.status = "not_configured"
            report.message = errors.ReasonerNotConfigured().message
            _finish(store, namespace_id, report)
            return report
    if ledger is None:
        ledger = RunLedger(token_budget=store.settings.reasoner_token_budget)
        if run_id:
            ledger.run_id = run_id
    calls0, in0, out0 = ledger.calls, ledger.tokens_in, ledger.tokens_out
    try:
        with (
            store.db.connection() as lock_conn,
            session_lock(lock_conn, stage_lock(spec.name, namespace_id), wait=wait) as held,
        ):
            if not held:
                report.status = "busy"
                report.message = f"another runner is consolidating {slug} / {spec.name}; skipped"
                return report
            with store.db.transaction() as tx:
                checkpoint = tx.one("consolidation_ensure_checkpoint", namespace_id=namespace_id, stage=spec.name)
            assert checkpoint is not None
            ctx = StageContext(
                store=store,
                stage=spec.name,
                namespace_id=namespace_id,
                namespace=slug,
                reasoner=reasoner,
                ledger=ledger,
                report=report,
                prompts=spec.prompts,
                cursor=int(checkpoint["cursor"]),
                aux_cursor=int(checkpoint["aux_cursor"]),
            )
            report.cursor_from = report.cursor_to = ctx.cursor
            try:
                spec.run(ctx)
            except errors.TokenBudgetExceeded as exc:
                report.status = "budget_exceeded"
                report.message = exc.message
            except BaseException as exc:
                report.status = "failed"
                report.message = error_message(exc)
                exc.stage_report = report  # type: ignore[attr-defined]
                raise
            else:
                if report.rows_in == 0 and report.rows_written == 0 and report.items_failed == 0:
                    report.status = "idle"
            finally:
                report.model_calls = ledger.calls - calls0
                report.tokens_in = ledger.tokens_in - in0
                report.tokens_out = ledger.tokens_out - out0
                report.duration_s = round(time.monotonic() - started, 3)
                with contextlib.suppress(errors.StashError):
                    _finish(store, namespace_id, report)
    finally:
        report.duration_s = round(time.monotonic() - started, 3)
    return report


def _finish(store: Store, namespace_id: int, report: StageReport) -> None:
    store.db.execute(
        "consolidation_finish_run",
        namespace_id=namespace_id,
        stage=report.stage,
        status=report.status,
        report=json.dumps(report.to_json(), default=str),
    )


def run_all(
    store: Store,
    namespace: str,
    *,
    stages: Iterable[str] | None = None,
    reasoner: Reasoner | None = None,
    run_id: str | None = None,
    wait: bool = False,
) -> list[StageReport]:
    """Run the chosen stages (default all) for one exact namespace, in stage-table order.

    A model outage, a setup the endpoint refuses or a spent token budget skips the
    remaining model stages (those without a model still run); their reports say so.
    Never raises ModelUnavailable or ModelSetupRejected.
    """
    wanted = set(stages) if stages is not None else None
    if wanted is not None:
        for name in wanted:
            get_stage(name)
    reasoner = reasoner or make_reasoner(store)
    ledger = RunLedger(token_budget=store.settings.reasoner_token_budget)
    if run_id:
        ledger.run_id = run_id
    reports: list[StageReport] = []
    stop_reason: str | None = None
    for spec in STAGES:
        if wanted is not None and spec.name not in wanted:
            continue
        if stop_reason and spec.needs_model:
            reports.append(StageReport(stage=spec.name, namespace=namespace, status="skipped", message=stop_reason))
            continue
        try:
            report = run_stage(store, namespace, spec.name, reasoner=reasoner, wait=wait, ledger=ledger)
        except (errors.ModelUnavailable, errors.ModelSetupRejected) as exc:
            report = getattr(exc, "stage_report", None) or StageReport(stage=spec.name, namespace=namespace)
            report.status, report.message = "failed", exc.message
            stop_reason = (
                f"skipped: model unavailable during {spec.name}"
                if isinstance(exc, errors.ModelUnavailable)
                else f"skipped: the model endpoint refused the setup during {spec.name}"
            )
        if report.status == "budget_exceeded":
            stop_reason = "skipped: token budget spent"
        reports.append(report)
    return reports


def run_tree(store: Store, path: str = "/", **kwargs: Any) -> list[StageReport]:
    """``run_all`` for each namespace of a tree, separately."""
    with store.db.transaction() as tx:
        tree = resolve_trees(tx, path)
    reports: list[StageReport] = []
    for slug in sorted(tree.values()):
        reports.extend(run_all(store, slug, **kwargs))
    return reports


def status(store: Store, namespaces: Any = "/", *, count_limit: int | None = None) -> list[dict[str, Any]]:
    """Per (namespace, stage): cursor, head, backlog, has_work, last run, dead letters; each
    backlog counted up to ``count_limit`` (None: exactly)."""
    with store.db.transaction() as tx:
        tree = resolve_trees(tx, namespaces)
        ids = sorted(tree)
        rows = tx.all("stage_backlog", **backlog_parameters(ids))
        counts = {
            (r["namespace_id"], r["stage"]): r for r in tx.all("consolidation_dead_letter_counts", namespace_ids=ids)
        }
        sources = {spec.name: spec.source for spec in STAGES}
        backlog = {
            (r["namespace_id"], r["stage"]): int(r["backlog"])
            for r in tx.all(
                "consolidation_backlog_counts",
                namespace_ids=[r["namespace_id"] for r in rows],
                stages=[r["stage"] for r in rows],
                sources=[sources.get(r["stage"], "none") for r in rows],
                cursors=[int(r["cursor"]) for r in rows],
                heads=[int(r["head"]) for r in rows],
                count_limit=count_limit,
            )
        }
    out = []
    for r in rows:
        c = counts.get((r["namespace_id"], r["stage"]), {})
        out.append(
            {
                "namespace": r["slug"],
                "stage": r["stage"],
                "cursor": int(r["cursor"]),
                "head": int(r["head"]),
                "backlog": backlog.get((r["namespace_id"], r["stage"]), 0),
                "has_work": bool(r["has_work"]),
                "last_run_at": r["last_run_at"],
                "last_status": r["last_status"],
                "dead_letters_pending": int(c.get("pending", 0)),
                "dead_letters_dead": int(c.get("dead", 0)),
            }
        )
    return out
