"""The consolidation runner: the one entry point Dagster, the CLI and MCP call.

``run_stage(store, "/projects/x", "facts")`` runs one stage for one namespace;
``run_all`` runs every stage in stage-table order; ``run_tree`` runs each namespace of
a tree separately (facts never cross namespaces). ``status`` reports cursor, head,
backlog, last run and dead letters per (namespace, stage).

What the runner guarantees for every stage (SPEC §1.4, §1.5):

* one writer per (namespace, stage): a session-level Postgres advisory lock held on a
  dedicated connection for the whole run; a second runner waits (``wait=True``) or
  returns status ``busy`` — it never duplicates work;
* a cursor per (namespace, stage) in ``stage_checkpoints``; a stage's module selects a
  bounded batch after it, calls the model OUTSIDE any transaction, then commits the
  batch's outputs, lineage, dead-letter bookkeeping and the new cursor in ONE
  transaction (``StageContext.batch``);
* an item that fails (invalid model answer, grounding, a constraint on that item) is
  counted and dead-lettered (``pending`` → retried first by later runs → ``dead`` after
  ``max_item_attempts``); the cursor moves on, so nothing stalls;
* a model outage (``ModelUnavailable``) fails the run without moving the cursor of the
  batch in flight; a spent token budget stops the run cleanly.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from stash_pipeline import errors
from stash_pipeline.db import Session, query, translate_errors
from stash_pipeline.memory import namespaces as ns_ops
from stash_pipeline.reasoner import Reasoner, RunLedger
from stash_pipeline.stages import STAGES, StageReport, StageSpec, get_stage
from stash_pipeline.stages.common import ITEM_ERRORS

if TYPE_CHECKING:
    import numpy as np

    from stash_pipeline.store import Store

NOT_CONFIGURED = (
    "reasoner not configured: set STASH_REASONER_MODEL and STASH_OPENAI_BASE_URL to enable model stages"
)


class GroundingError(errors.InvalidInput):
    """The model's answer mentions something its sources do not contain."""

    code = "grounding_failed"


# -- locking ------------------------------------------------------------------------------
def stage_lock_key(stage: str) -> int:
    """int32 key of a stage for the two-key advisory lock (7311 is the id-ordering lock)."""
    key = zlib.crc32(f"stash-stage:{stage}".encode()) & 0x7FFFFFFF
    return key + 1 if key == 7311 else key


@contextlib.contextmanager
def _stage_lock(store: Store, stage: str, namespace_id: int, *, wait: bool) -> Iterator[bool]:
    params = {"stage_key": stage_lock_key(stage), "namespace_key": namespace_id % 2147483647}
    with store.db.connection() as conn:
        with translate_errors():
            row = conn.execute(query("consolidation_lock" if wait else "consolidation_try_lock"), params).fetchone()
            conn.commit()  # the lock is session-level; do not sit idle in a transaction
        got = bool(row and row["ok"])
        try:
            yield got
        finally:
            if got:
                with translate_errors():
                    conn.execute(query("consolidation_unlock"), params)
                    conn.commit()


# -- the context a stage module runs with -----------------------------------------------
@dataclass
class Batch:
    """One batch transaction: outputs, lineage, dead letters and the cursor commit together."""

    ctx: StageContext
    tx: Session
    rows_written: int = 0
    failed: list[tuple[str, int, str]] = field(default_factory=list)
    succeeded: list[tuple[str, int]] = field(default_factory=list)

    def wrote(self, count: int = 1) -> None:
        self.rows_written += count

    def fail(self, item_kind: str, item_ids: Iterable[int], error: str) -> None:
        for item_id in item_ids:
            self.failed.append((item_kind, int(item_id), error))

    def done(self, item_kind: str, item_ids: Iterable[int]) -> None:
        for item_id in item_ids:
            self.succeeded.append((item_kind, int(item_id)))

    def settle(self, item_kind: str, item_ids: Iterable[int], failure: str | None) -> bool:
        """Inputs of a one-call batch: all done, or all failed with the call's error. True if done."""
        if failure:
            self.fail(item_kind, item_ids, failure)
            return False
        self.done(item_kind, item_ids)
        return True

    @contextlib.contextmanager
    def item(self, item_kind: str, item_ids: Iterable[int]) -> Iterator[None]:
        """Writes of one item under a savepoint: an item error rolls back only that item."""
        ids = [int(i) for i in item_ids]
        written_before = self.rows_written
        try:
            with translate_errors(), self.tx.conn.transaction():
                yield
        except ITEM_ERRORS as exc:
            self.rows_written = written_before
            self.fail(item_kind, ids, _error_message(exc))
        else:
            self.done(item_kind, ids)


@dataclass
class StageContext:
    """What a stage module gets: the store, its namespace, cursors, the model, the report."""

    store: Store
    spec: StageSpec
    namespace_id: int
    namespace: str
    reasoner: Reasoner | None
    ledger: RunLedger
    report: StageReport
    cursor: int = 0
    aux_cursor: int = 0

    @property
    def settings(self) -> Any:
        return self.store.settings

    @property
    def stage(self) -> str:
        return self.spec.name

    def call(
        self,
        system: str,
        user: str,
        schema: type[BaseModel],
        validate: Callable[[Any], None] | None = None,
        split_on_truncation: bool = False,
    ) -> Any:
        """One validated model answer (see ``Reasoner.call``); ``validate`` raises ValueError to retry."""
        if self.reasoner is None:
            raise errors.ReasonerNotConfigured()
        return self.reasoner.call(
            self.stage, self.namespace_id, system, user, schema, run=self.ledger, validate=validate,
            split_on_truncation=split_on_truncation,
        )

    def read(self, name: str, /, **params: Any) -> list[dict[str, Any]]:
        """A read-only named query in its own short transaction (never held across model calls)."""
        with self.store.db.transaction() as tx:
            return tx.all(name, **params)

    def nearest_fact(self, embedding: Any) -> dict[str, Any] | None:
        """The current fact of this namespace nearest to ``embedding`` (id, confidence, similarity)."""
        with self.store.db.transaction() as tx:
            # Without iterative scans a filtered HNSW search can miss this namespace's rows.
            tx.one("stage_hnsw_iterative_scan")
            return tx.one("stage_facts_nearest_current", namespace_id=self.namespace_id, embedding=embedding)

    def pending(self, item_kind: str, limit: int | None = None) -> list[int]:
        """Ids of this stage's dead-lettered items waiting for a retry."""
        rows = self.read(
            "consolidation_dead_letter_pending",
            namespace_id=self.namespace_id,
            stage=self.stage,
            item_kind=item_kind,
            limit=limit or self.settings.consolidation_batch_size,
        )
        return [int(r["item_id"]) for r in rows]

    def embed(self, texts: list[str]) -> list[np.ndarray]:
        if not texts:
            return []
        return list(self.store.embedder.embed(texts))

    @contextlib.contextmanager
    def batch(self, *, cursor: int | None = None, aux_cursor: int | None = None) -> Iterator[Batch]:
        """One transaction for a batch's writes + dead letters + cursor (cursor only moves forward)."""
        with self.store.db.transaction() as tx:
            batch = Batch(self, tx)
            yield batch
            dead = self._bookkeeping(tx, batch)
            if cursor is not None or aux_cursor is not None:
                tx.execute(
                    "consolidation_advance_checkpoint",
                    namespace_id=self.namespace_id,
                    stage=self.stage,
                    cursor=self.cursor if cursor is None else max(self.cursor, cursor),
                    aux_cursor=self.aux_cursor if aux_cursor is None else max(self.aux_cursor, aux_cursor),
                )
        # committed: only now does the report count it
        if cursor is not None:
            self.cursor = max(self.cursor, cursor)
        if aux_cursor is not None:
            self.aux_cursor = max(self.aux_cursor, aux_cursor)
        self.report.cursor_to = self.cursor
        self.report.rows_written += batch.rows_written
        self.report.items_failed += len(batch.failed)
        self.report.dead_lettered += dead

    def _bookkeeping(self, tx: Session, batch: Batch) -> int:
        dead = 0
        failed_keys = set()
        for item_kind, item_id, error in batch.failed:
            if (item_kind, item_id) in failed_keys:
                continue
            failed_keys.add((item_kind, item_id))
            row = tx.one(
                "consolidation_dead_letter_fail",
                namespace_id=self.namespace_id,
                stage=self.stage,
                item_kind=item_kind,
                item_id=item_id,
                error=error[:2000],
                max_attempts=self.settings.max_item_attempts,
                payload=None,
            )
            if row and row["status"] == "dead":
                dead += 1
        by_kind: dict[str, list[int]] = {}
        for item_kind, item_id in batch.succeeded:
            if (item_kind, item_id) not in failed_keys:
                by_kind.setdefault(item_kind, []).append(item_id)
        for item_kind, ids in by_kind.items():
            tx.execute(
                "consolidation_dead_letter_resolve",
                namespace_id=self.namespace_id,
                stage=self.stage,
                item_kind=item_kind,
                item_ids=ids,
            )
        return dead


def _error_message(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# -- entry points ---------------------------------------------------------------------------
def _stage_module(spec: StageSpec) -> Any:
    return importlib.import_module(f"stash_pipeline.stages.{spec.name}")


def make_reasoner(store: Store) -> Reasoner | None:
    """The configured reasoner, or None when no model endpoint is configured."""
    if not store.settings.reasoner_configured:
        return None
    return Reasoner(store.settings, store.db)


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
        row = ns_ops.get(tx, namespace)
    namespace_id, slug = int(row["id"]), str(row["slug"])
    report = StageReport(stage=spec.name, namespace=slug)
    started = time.monotonic()
    if spec.needs_model and reasoner is None:
        reasoner = make_reasoner(store)
        if reasoner is None:
            report.status = "not_configured"
            report.message = NOT_CONFIGURED
            _finish(store, namespace_id, report)
            return report
    if ledger is None:
        ledger = RunLedger(token_budget=store.settings.reasoner_token_budget)
        if run_id:
            ledger.run_id = run_id
    calls0, in0, out0 = ledger.calls, ledger.tokens_in, ledger.tokens_out
    try:
        with _stage_lock(store, spec.name, namespace_id, wait=wait) as got:
            if not got:
                report.status = "busy"
                report.message = f"another runner is consolidating {slug} / {spec.name}; skipped"
                return report
            with store.db.transaction() as tx:
                checkpoint = tx.one("consolidation_ensure_checkpoint", namespace_id=namespace_id, stage=spec.name)
            assert checkpoint is not None
            ctx = StageContext(
                store=store,
                spec=spec,
                namespace_id=namespace_id,
                namespace=slug,
                reasoner=reasoner,
                ledger=ledger,
                report=report,
                cursor=int(checkpoint["cursor"]),
                aux_cursor=int(checkpoint["aux_cursor"]),
            )
            report.cursor_from = report.cursor_to = ctx.cursor
            try:
                _stage_module(spec).run(ctx)
            except errors.TokenBudgetExceeded as exc:
                report.status = "budget_exceeded"
                report.message = exc.message
            except BaseException as exc:
                report.status = "failed"
                report.message = _error_message(exc)
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

    A model outage or a spent token budget skips the remaining model stages (decay
    still runs); their reports say so. Never raises ModelUnavailable.
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
        except errors.ModelUnavailable as exc:
            report = StageReport(stage=spec.name, namespace=namespace, status="failed", message=exc.message)
            stop_reason = f"skipped: model unavailable during {spec.name}"
        if report.status == "budget_exceeded":
            stop_reason = "skipped: token budget spent"
        reports.append(report)
    return reports


def run_tree(store: Store, path: str = "/", **kwargs: Any) -> list[StageReport]:
    """``run_all`` for each namespace of a tree, separately."""
    with store.db.transaction() as tx:
        tree = ns_ops.resolve_trees(tx, path)
    reports: list[StageReport] = []
    for slug in sorted(tree.values()):
        reports.extend(run_all(store, slug, **kwargs))
    return reports


def status(store: Store, namespaces: Any = "/") -> list[dict[str, Any]]:
    """Per (namespace, stage): cursor, head, backlog, has_work, last run, dead letters."""
    with store.db.transaction() as tx:
        tree = ns_ops.resolve_trees(tx, namespaces)
        ids = sorted(tree)
        rows = tx.all("stage_backlog", namespace_ids=ids)
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
