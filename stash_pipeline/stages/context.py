"""What a stage module runs with: ``StageContext``, its ``Batch`` transactions, the ``StageReport``.

The runner (``stash_pipeline.consolidation.runner``) builds one ``StageContext`` per stage run,
holding the stage's lock. A stage module selects a bounded batch after ``ctx.cursor``,
calls the model OUTSIDE any transaction (``ctx.call``), then commits the batch's outputs,
lineage, dead-letter bookkeeping and the new cursor in ONE transaction
(``with ctx.batch(cursor=...) as batch``). Inside a batch, ``batch.item(...)`` puts one
item's writes under a savepoint: an ``ITEM_ERRORS`` failure rolls back that item only and
dead-letters it; anything else fails the run.

A batch of new input whose model requests were all rejected the same way (at least
``SAME_REJECTIONS`` of them, none answered) is a setup fault, not bad items: it raises
``ModelSetupRejected`` instead of committing, so the cursor stays and nothing is
dead-lettered.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from stash_pipeline import errors
from stash_pipeline.db.gateway import translate_errors

if TYPE_CHECKING:
    import numpy as np

    from stash_pipeline.db.gateway import Session
    from stash_pipeline.store import Store

#: item-level failures: counted, dead-lettered, the batch goes on (anything else fails the run)
ITEM_ERRORS: tuple[type[BaseException], ...] = (
    errors.ModelResponseInvalid,
    errors.InvalidInput,
    errors.Conflict,
    errors.RecordNotFound,
)

#: rejected requests of one batch, all alike and none answered, that make a setup fault
SAME_REJECTIONS = 2

#: A (system prompt, answer schema) pair a stage sends to the model.
Prompt = tuple[str, type[BaseModel]]

#: Stable metadata keys shared by every stage (Dagster plots line up on them).
REPORT_KEYS = (
    "rows_in",
    "rows_written",
    "items_failed",
    "dead_lettered",
    "cursor_from",
    "cursor_to",
    "model_calls",
    "tokens_in",
    "tokens_out",
    "duration_s",
)


@dataclass
class StageReport:
    """What one stage run did for one namespace."""

    stage: str
    namespace: str
    status: str = "ok"  # ok | idle | not_configured | busy | failed
    message: str = ""
    rows_in: int = 0
    rows_written: int = 0
    items_failed: int = 0
    dead_lettered: int = 0
    cursor_from: int = 0
    cursor_to: int = 0
    model_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    duration_s: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def metadata(self) -> dict[str, int | float]:
        return {key: getattr(self, key) for key in REPORT_KEYS}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


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
            self.fail(item_kind, ids, error_message(exc))
        else:
            self.done(item_kind, ids)


class Model(Protocol):
    """What a stage needs from the model: ``stash_pipeline.consolidation.reasoner.Reasoner``.

    Stated here, not imported, so the stages depend on this one method and not on the
    consolidation package that runs them (which imports the stages).
    """

    def call(
        self,
        stage: str,
        namespace_id: int | None,
        system: str,
        user: str,
        schema: type[Any],
        *,
        run: Any,
        validate: Callable[[Any], None] | None = None,
        split_on_truncation: bool = False,
    ) -> Any: ...


@dataclass
class StageContext:
    """What a stage module gets: the store, its namespace, cursors, the model, the report."""

    store: Store
    stage: str
    namespace_id: int
    namespace: str
    reasoner: Model | None
    #: calls and tokens of this run (``consolidation.reasoner.RunLedger``), passed to every call
    ledger: Any
    report: StageReport
    #: the prompts the stage's table entry lists; ``call`` sends no other
    prompts: tuple[Prompt, ...] = ()
    cursor: int = 0
    aux_cursor: int = 0
    #: since the last batch: how each rejected request was rejected, and requests answered
    _rejections: list[tuple[str, int, str]] = field(default_factory=list, repr=False)
    _answers: int = field(default=0, repr=False)

    @property
    def settings(self) -> Any:
        return self.store.settings

    def call(
        self,
        system: str,
        user: str,
        schema: type[BaseModel],
        validate: Callable[[Any], None] | None = None,
        split_on_truncation: bool = False,
    ) -> Any:
        """One validated model answer (see ``Reasoner.call``); ``validate`` raises ValueError to retry.

        The prompt must be one of the stage's ``prompts`` (its ``STAGES`` entry): they are
        its code version, and a prompt sent beside them would change its output while Dagster
        still shows its partitions in sync.
        """
        if (system, schema) not in self.prompts:
            raise errors.ConfigurationError(
                f"stage {self.stage!r} sends a prompt ({schema.__name__}) its StageSpec.prompts does not list"
            )
        if self.reasoner is None:
            raise errors.ReasonerNotConfigured()
        try:
            answer = self.reasoner.call(
                self.stage,
                self.namespace_id,
                system,
                user,
                schema,
                run=self.ledger,
                validate=validate,
                split_on_truncation=split_on_truncation,
            )
        except errors.ModelRequestRejected as exc:
            self._rejections.append(_rejection_kind(exc))
            raise
        except errors.ModelResponseInvalid:
            self._answers += 1  # answered, if not well
            raise
        self._answers += 1
        return answer

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
        rejections, self._rejections, answers, self._answers = self._rejections, [], self._answers, 0
        with self.store.db.transaction() as tx:
            batch = Batch(self, tx)
            yield batch
            if (cursor is not None or aux_cursor is not None) and batch.failed and not batch.succeeded:
                _refuse_alike(rejections, answers)
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


def _rejection_kind(exc: errors.ModelRequestRejected) -> tuple[str, int, str]:
    """How a request was rejected, numbers aside; then its status and the server's message."""
    status, message = exc.details.get("status"), str(exc.details.get("server_message", ""))
    return f"{status}: {re.sub(r'[0-9]+', '#', message)}", int(status or 0), message


def _refuse_alike(rejections: list[tuple[str, int, str]], answers: int) -> None:
    """Raise ModelSetupRejected when every request of a batch was rejected the same way."""
    if answers or len(rejections) < SAME_REJECTIONS or len({kind for kind, _, _ in rejections}) != 1:
        return
    _, status, message = rejections[0]
    raise errors.ModelSetupRejected(
        f"the model endpoint rejected all {len(rejections)} requests of a batch the same way ({status}: {message}); "
        "the setup is at fault (e.g. a context window too small for the prompts), not the items",
        status=status,
        server_message=message,
    )


def error_message(exc: BaseException) -> str:
    """How an item or run failure is recorded: the exception's class and message."""
    return f"{type(exc).__name__}: {exc}"
