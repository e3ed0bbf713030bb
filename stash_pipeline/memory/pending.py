"""Episodes committed before their vector: the batch that embeds them and the service's worker.

When the store defers vectors (``Store.defer_vectors``), ``remember`` and
``remember_batch`` commit a new text's row with ``embedding`` NULL and set
``Store.vectors_pending``. Something must then fill the vector in:

* ``embed_pending_batch(store)`` claims the oldest waiting rows with ``FOR NO KEY UPDATE
  SKIP LOCKED`` (two workers, in one process or several, never take the same row),
  computes their vectors in ONE forward pass (cached texts come from the cache), writes
  them and the new cache rows, and commits. The row locks are held during the forward
  pass: only a forget, purge or namespace deletion of one of those fresh rows waits for it.
* ``embed_pending(store)`` repeats batches until none is left (``stash embed-pending``,
  the Dagster ``episode_embeddings`` asset).
* ``embed_pending_in(store, paths, limit=...)`` is a recall's: the waiting rows of the
  trees it reads, waiting for those a worker holds, so a recall sees the writes it follows.
* ``PendingVectorWorker`` is the thread the MCP service runs (``stash serve mcp``, so
  also ``stash up``): woken by a write in the same process, and every
  STASH_EMBED_PENDING_INTERVAL_S by its own sweep, which picks up rows written by other
  processes or left by one that died between its commit and the embedding. A row is
  committed before it is announced, so nothing is lost when a process dies: the row
  waits in the database until any worker's next sweep.

Deciding (``decide_deferral``): STASH_EMBED_ON_WRITE=async defers, sync never does.
``auto`` defers only in a process that runs the worker, and only when the embedder's
warm forward pass of one short text takes longer than STASH_EMBED_SYNC_BUDGET_MS: a
fast embedder keeps the vector in the write's own statement (nothing waits, nothing is
written twice), a slow one (MiniLM on a small CPU, any network embedder) leaves the
write path. The worker decides when it starts; with the database unreachable then (the
stored model names the embedder), it decides at each sweep until the database answers.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from stash_pipeline import errors
from stash_pipeline.db.gateway import Row, Session
from stash_pipeline.embedding.cache import query_key
from stash_pipeline.models import VectorBacklog

if TYPE_CHECKING:
    from stash_pipeline.store import Store

log = logging.getLogger(__name__)

#: texts timed by ``decide_deferral`` (short, distinct: a typical agent observation)
PROBE_TEXTS = (
    "The deploy pipeline runs the integration tests before every release.",
    "Alice prefers short status updates in the morning stand-up.",
    "The staging database was migrated to the new region last week.",
)


def embed_pending_batch(store: Store, limit: int | None = None) -> int:
    """Embed up to ``limit`` waiting episodes (default STASH_EMBEDDING_BATCH_SIZE) in one
    forward pass and one transaction; returns how many got their vector (0 = none left
    that another worker does not hold)."""
    size = store.settings.embedding_batch_size if limit is None else limit
    store.embedder.ensure_lock()
    with store.db.transaction() as tx:
        return _embed_rows(store, tx, tx.all("pending_vectors_claim", limit=size))


def embed_pending_in(store: Store, paths: list[str], *, limit: int, wait_ms: int = 2000) -> bool:
    """Embed the episodes still waiting for a vector in the trees ``paths`` ("/" = all), at most
    ``limit``, waiting up to ``wait_ms`` for rows a worker is embedding right now (they are
    then done). True when every episode waiting there as it began now has its vector: fewer
    than ``limit`` waited, and no wait ran out (one that does embeds nothing)."""
    store.embedder.ensure_lock()
    try:
        with store.db.transaction() as tx:
            tx.one("pending_vectors_lock_timeout", ms=str(int(wait_ms)))
            rows = tx.all("pending_vectors_claim_in", paths=paths, all_namespaces="/" in paths, limit=limit)
            return _embed_rows(store, tx, rows) < limit
    except errors.StageBusy:  # the lock wait ran out (LockNotAvailable)
        log.info("a recall stopped waiting for a worker's vectors after %d ms", wait_ms)
        return False


def _embed_rows(store: Store, tx: Session, rows: list[Row]) -> int:
    """Compute the claimed rows' vectors in one forward pass (cached texts from the cache) and write them."""
    if not rows:
        return 0
    embedder = store.embedder
    hashes = [query_key(row["content"], [row["namespace"]]) for row in rows]
    vectors = embedder.lookup_in(tx, sorted(set(hashes)))
    fresh = embedder.compute({h: row["content"] for h, row in zip(hashes, rows, strict=True) if h not in vectors})
    vectors.update(fresh)
    embedder.store_in(tx, fresh)
    tx.execute(
        "pending_vectors_set",
        model=embedder.name,
        ids=[int(row["id"]) for row in rows],
        embeddings=[vectors[h] for h in hashes],
    )
    return len(rows)


def embed_pending(store: Store, *, batch_size: int | None = None, max_rows: int | None = None) -> int:
    """Embed waiting episodes batch by batch until none is left (or ``max_rows`` are done)."""
    done = 0
    while max_rows is None or done < max_rows:
        size = store.settings.embedding_batch_size if batch_size is None else batch_size
        if max_rows is not None:
            size = min(size, max_rows - done)
        count = embed_pending_batch(store, size)
        if count == 0:
            break
        done += count
    return done


def backlog(store: Store) -> VectorBacklog:
    """How many rows wait for a vector, and how long the oldest has waited (None: none waits)."""
    row = store.db.one("pending_vectors_backlog")
    assert row is not None
    age = row["oldest_age_s"]
    return VectorBacklog(pending=int(row["pending"]), oldest_age_s=None if age is None else round(float(age), 3))


def forward_pass_ms(store: Store) -> float:
    """The fastest of a few warm forward passes of one short text, in milliseconds."""
    inner = store.embedder.inner
    inner.embed([PROBE_TEXTS[0]])  # loads the model, warms caches
    best = float("inf")
    for text in PROBE_TEXTS:
        started = time.perf_counter()
        inner.embed([text])
        best = min(best, (time.perf_counter() - started) * 1000)
    return best


def decide_deferral(store: Store) -> bool:
    """Whether writes in a process running the worker should defer vectors (see the module doc)."""
    mode = store.settings.embed_on_write
    if mode != "auto":
        return mode == "async"
    try:
        elapsed = forward_pass_ms(store)
    except errors.DatabaseUnavailable:
        raise  # says nothing of the embedder: the caller decides again later
    except Exception as exc:  # an unreachable embedding endpoint is slow by definition
        log.warning("could not time the embedder (%s); remember will not wait for vectors", exc)
        return True
    defer = elapsed > store.settings.embed_sync_budget_ms
    log.info(
        "embedder %s: %.2f ms per short text (budget %.2f ms): remember %s",
        store.embedder.name,
        elapsed,
        store.settings.embed_sync_budget_ms,
        "commits first and embeds after" if defer else "embeds before it commits",
    )
    return defer


class PendingVectorWorker:
    """A daemon thread that embeds waiting episodes: on a write's wake-up and on a periodic sweep."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.interval_s = store.settings.embed_pending_interval_s
        self.delay_s = store.settings.embed_pending_delay_s
        self.embedded = 0
        #: whether ``auto`` has timed the embedder (other settings need no decision)
        self.decided = store.settings.embed_on_write != "auto"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stash-pending-vectors", daemon=True)

    def start(self) -> PendingVectorWorker:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the thread to finish its current batch and end; wait up to ``timeout`` seconds."""
        self._stop.set()
        self.store.vectors_pending.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        store = self.store
        woken = False
        while not self._stop.is_set():
            if not self.decided:
                self._decide()
            if woken and self.delay_s:
                self._stop.wait(self.delay_s)  # let a burst of writes gather into one batch
            try:
                while not self._stop.is_set():
                    count = embed_pending_batch(store)
                    if count == 0:
                        break
                    self.embedded += count
            except errors.DatabaseUnavailable as exc:  # starting or restarting: a line, not a traceback
                log.warning("embedding waiting episodes: %s; retrying in %.1f s", exc.message, self.interval_s)
            except Exception:  # the embedder is down, or worse: try again at the next sweep
                log.exception("embedding waiting episodes failed; retrying in %.1f s", self.interval_s)
            woken = store.vectors_pending.wait(self.interval_s)
            # cleared before the next drain: a write after this point sets it again
            store.vectors_pending.clear()

    def _decide(self) -> None:
        """``decide_deferral``; with the database down, writes keep the setting they have
        (and fail until it is back) and the next sweep tries again."""
        try:
            self.store.defer_vectors = decide_deferral(self.store)
            self.decided = True
        except errors.DatabaseUnavailable as exc:
            log.warning("timing the embedder: %s; trying again in %.1f s", exc.message, self.interval_s)


def start_worker(store: Store) -> PendingVectorWorker:
    """Start the service's pending-vector worker (it runs for every setting: with sync
    writes it still picks up rows other processes left waiting)."""
    return PendingVectorWorker(store).start()
