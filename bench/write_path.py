"""Benchmark 1 — the write path: ``remember`` latency and ``remember_batch`` throughput.

    python -m bench.write_path            # 1,000 existing episodes
    python -m bench.write_path --large    # 100,000 existing episodes
    python -m bench.write_path --size N   # N existing episodes
    nice -n 10 python -m bench.write_path --size 1000000   # 1M: about 15 minutes of fill and HNSW build here
    python -m bench.write_path --embedder hash   # the hash embedder: the database path alone
    python -m bench.write_path --embedder minilm-int8   # another local embedder (bench/embedders.py)

Embedder: MiniLM (offline, numpy) by default, for ours and the baseline alike.

Existing episodes are filled by COPY with MiniLM vectors of the committed dataset texts
plus small Gaussian noise (so the HNSW graph has the real embedding geometry), stored
with the configured embedder's model name, so the model lock holds; the HNSW and GIN indexes are rebuilt after the fill. Measured texts are new
(dataset texts with a unique suffix), so every embedding is computed, never cached,
unless a row says otherwise.

* ours: ``episodes.remember`` (validate, embed through the Postgres cache, insert) and
  ``episodes.remember_batch`` (one batched embedding call, one transaction).
* baseline (the reference's path): the raw embedder called per episode (no cache), then a
  plain single-row INSERT in its own transaction.
* model calls on write: rows in ``model_calls`` before and after (must be 0).

Sync vs async (STASH_EMBED_ON_WRITE), same run, same store: the pending-vector worker
(``stash_pipeline.memory.pending.PendingVectorWorker``, the thread the MCP service
runs) embeds in the background on the same 2 cores while ``Store.defer_vectors`` is
toggled per call. A watcher thread polls the rows still without a vector (one
primary-key query every 5 ms) and records when each vector appears: the lag is from
``remember`` returning to the vector being committed (resolution about 5 ms).

* steady: one new text at a time, sync and async interleaved; after an async call the
  next sample waits until its vector is present (an agent writing now and then).
* burst: the async texts back to back, the worker embedding behind them; the lag then
  includes the queue.
* batches: ``remember_batch`` with deferred vectors (commit rate), and the rate until
  every vector is present (the worker's forward passes).
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from bench import common
from bench.data import generate

NAMESPACE = "/bench/write"
LATENCY_SAMPLES = 150
BATCH_SIZE = 250
BATCHES = 2


def fresh_texts(base: list[str], count: int, tag: str) -> list[str]:
    """Unique, realistic texts: dataset memories with a distinct suffix (never in the cache)."""
    return [f"{base[i % len(base)]} (note {tag}-{i})" for i in range(count)]


def fill(store: Any, size: int, base_texts: list[str], base_vectors: np.ndarray,
         builds: dict[str, float] | None = None) -> float:
    from stash_pipeline.memory import namespaces

    namespaces.create(store, NAMESPACE)
    store.embedder.check_lock()  # record the model lock before the raw fill
    with store.db.transaction() as tx:
        namespace_id = namespaces.resolve_id(tx, NAMESPACE)
    rng = np.random.default_rng(7)

    def chunks() -> Iterator[tuple[list[str], np.ndarray]]:
        for start in range(0, size, 20_000):
            stop = min(size, start + 20_000)
            contents = [f"{base_texts[i % len(base_texts)]} [existing {i}]" for i in range(start, stop)]
            yield contents, common.noisy_copies(base_vectors, stop - start, rng)

    seconds = common.bulk_fill(store, "episodes", namespace_id, chunks(), builds)
    return seconds


class VectorWatcher:
    """Polls watched episode ids and records when each one's vector is committed."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.returned: dict[int, float] = {}
        self.present: dict[int, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def watch(self, episode_id: int, returned_at: float) -> None:
        with self._lock:
            self.returned[episode_id] = returned_at

    def _run(self) -> None:
        with self.store.db.connection() as conn:
            conn.autocommit = True
            while not self._stop.is_set():
                with self._lock:
                    waiting = [i for i in self.returned if i not in self.present]
                if waiting:
                    found = conn.execute(common.sql("bench_vectors_present"), {"ids": waiting}).fetchall()
                    now = time.perf_counter()
                    with self._lock:
                        for row in found:
                            self.present[row["id"]] = now
                time.sleep(0.005)

    def wait_for(self, ids: list[int], timeout: float = 600.0) -> None:
        deadline = time.perf_counter() + timeout
        # the watcher's timestamps are the measurement; this only waits, and sleeps long
        # enough not to take the interpreter lock from the worker's forward pass
        while any(i not in self.present for i in ids):
            if time.perf_counter() > deadline:
                raise TimeoutError("vectors did not appear")
            time.sleep(0.02)

    def lags_ms(self, ids: list[int]) -> list[float]:
        return [(self.present[i] - self.returned[i]) * 1000.0 for i in ids]

    def __enter__(self) -> VectorWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def measure_async(store: Any, base_texts: list[str], bare_insert: Any) -> dict[str, Any]:
    """Sync vs async remember of new texts (and a bare INSERT transaction, interleaved),
    the vector lag, and deferred batch throughput."""
    from stash_pipeline.memory import episodes
    from stash_pipeline.memory.pending import PendingVectorWorker, forward_pass_ms

    out: dict[str, Any] = {"forward_pass_ms": forward_pass_ms(store)}
    worker = PendingVectorWorker(store).start()
    try:
        with VectorWatcher(store) as watcher:
            sync_ms, async_ms, insert_ms, steady_ids = [], [], [], []
            for sync_text, async_text in zip(fresh_texts(base_texts, LATENCY_SAMPLES, "sync"),
                                             fresh_texts(base_texts, LATENCY_SAMPLES, "async"), strict=True):
                insert_ms.append(common.timed(lambda t=async_text: bare_insert(t))[0])
                store.defer_vectors = False
                sync_ms.append(common.timed(lambda t=sync_text: episodes.remember(store, NAMESPACE, t))[0])
                store.defer_vectors = True
                elapsed, stored = common.timed(lambda t=async_text: episodes.remember(store, NAMESPACE, t))
                watcher.watch(stored.id, time.perf_counter())
                async_ms.append(elapsed)
                steady_ids.append(stored.id)
                watcher.wait_for([stored.id])
            out["sync"], out["async"] = common.summarize(sync_ms), common.summarize(async_ms)
            out["insert"] = common.summarize(insert_ms)
            out["steady_lag"] = common.summarize(watcher.lags_ms(steady_ids))

            burst_ms, burst_ids = [], []
            for text in fresh_texts(base_texts, LATENCY_SAMPLES, "burst"):
                elapsed, stored = common.timed(lambda t=text: episodes.remember(store, NAMESPACE, t))
                watcher.watch(stored.id, time.perf_counter())
                burst_ms.append(elapsed)
                burst_ids.append(stored.id)
            watcher.wait_for(burst_ids)
            out["burst"], out["burst_lag"] = common.summarize(burst_ms), common.summarize(watcher.lags_ms(burst_ids))

            commit_s, batch_ids = 0.0, []
            started = time.perf_counter()
            for b in range(BATCHES):
                texts = fresh_texts(base_texts, BATCH_SIZE, f"async-batch{b}")
                t0 = time.perf_counter()
                results = episodes.remember_batch(store, NAMESPACE, [{"content": t} for t in texts])
                commit_s += time.perf_counter() - t0
                for r in results:
                    watcher.watch(r.id, time.perf_counter())
                    batch_ids.append(r.id)
            watcher.wait_for(batch_ids)
            total = BATCH_SIZE * BATCHES
            out["batch_commit"] = total / commit_s
            out["batch_embedded"] = total / (max(watcher.present[i] for i in batch_ids) - started)
            out["batch_lag"] = common.summarize(watcher.lags_ms(batch_ids))
    finally:
        worker.stop()
        store.defer_vectors = False
    return out


def async_rows(embedder: str, found: dict[str, Any]) -> list[list[Any]]:
    sync, deferred = found["sync"], found["async"]
    return [
        ["remember, new text (p50 ms)", sync["p50"], deferred["p50"], common.ratio(deferred["p50"], sync["p50"])],
        ["remember, new text (p95 ms)", sync["p95"], deferred["p95"], common.ratio(deferred["p95"], sync["p95"])],
        ["a bare INSERT transaction, interleaved (p50 / p95 ms; ratio = async remember p50 / this p50)", "-",
         f"{found['insert']['p50']:.2f} / {found['insert']['p95']:.2f}",
         common.ratio(deferred["p50"], found["insert"]["p50"])],
        ["steady: remember return → vector committed (p50 / p95 ms)", "-",
         f"{found['steady_lag']['p50']:.1f} / {found['steady_lag']['p95']:.1f}", "-"],
        [f"burst of {LATENCY_SAMPLES}: remember (p50 / p95 ms)", "-",
         f"{found['burst']['p50']:.2f} / {found['burst']['p95']:.2f}", "-"],
        [f"burst of {LATENCY_SAMPLES}: return → vector (p50 / p95 ms)", "-",
         f"{found['burst_lag']['p50']:.1f} / {found['burst_lag']['p95']:.1f}", "-"],
        [f"remember_batch {BATCHES}x{BATCH_SIZE} new texts: committed (episodes/s)", "-",
         found["batch_commit"], "-"],
        [f"remember_batch {BATCHES}x{BATCH_SIZE}: every vector present (episodes/s)", "-",
         found["batch_embedded"], "-"],
        [f"remember_batch {BATCHES}x{BATCH_SIZE}: return → vector (p50 / p95 ms)", "-",
         f"{found['batch_lag']['p50']:.0f} / {found['batch_lag']['p95']:.0f}", "-"],
        [f"{embedder} forward pass of one short text, warm (ms; auto defers above "
         "STASH_EMBED_SYNC_BUDGET_MS = 1)", found["forward_pass_ms"], found["forward_pass_ms"], "-"],
    ]


@common.writes_results
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1_000, help="existing episodes (default 1000)")
    parser.add_argument("--large", action="store_true", help="100,000 existing episodes")
    parser.add_argument("--embedder", choices=("minilm", "minilm-onnx", "minilm-int8", "minilm-static", "hash"),
                        default="minilm",
                        help="embedder for ours and the baseline (default minilm)")
    args = parser.parse_args(argv)
    size = 100_000 if args.large else args.size

    from stash_pipeline.memory import episodes, namespaces

    data = generate.load()
    base_texts = [e["content"] for e in data["episodes"]]
    base_vectors = common.dataset_vectors(base_texts)
    results: dict[str, Any] = {}
    builds: dict[str, float] = {}
    # sync unless measure_async defers a call: the worker must not decide by itself here
    with (common.fresh_store(args.embedder, embed_on_write="sync") as store,
          common.ServerMemory(store) as server_memory):
        seconds = fill(store, size, base_texts, base_vectors, builds)
        common.log(f"filled {size} existing episodes in {seconds:.1f}s")
        with store.db.transaction() as tx:
            namespace_id = namespaces.resolve_id(tx, NAMESPACE)
            calls_before = tx.conn.execute(common.sql("bench_model_calls")).fetchone()["n"]
        raw = store.embedder.inner
        raw.embed(["warm up the model weights"])
        model_name = store.settings.embedding_model_name

        def reference_remember(text: str) -> int:
            vector = raw.embed([text])[0]  # per call, uncached
            with store.db.transaction() as tx:
                return tx.conn.execute(common.sql("bench_reference_insert"), {
                    "namespace_id": namespace_id, "content": text, "embedding": vector,
                    "embedding_model": model_name}).fetchone()["id"]

        # single-episode latency, interleaved so drift on the shared machine hits both alike
        ours_texts = fresh_texts(base_texts, LATENCY_SAMPLES, "ours")
        base_texts_run = fresh_texts(base_texts, LATENCY_SAMPLES, "ref")
        embed_texts = fresh_texts(base_texts, LATENCY_SAMPLES, "embed")
        ours_ms, ref_ms, embed_ms = [], [], []
        for mine, theirs, alone in zip(ours_texts, base_texts_run, embed_texts, strict=True):
            ours_ms.append(common.timed(lambda t=mine: episodes.remember(store, NAMESPACE, t))[0])
            ref_ms.append(common.timed(lambda t=theirs: reference_remember(t))[0])
            embed_ms.append(common.timed(lambda t=alone: raw.embed([t]))[0])
        # the same texts again: ours hits the embedding cache; the reference re-embeds
        cached_ms, ref_repeat_ms = [], []
        for mine, theirs in zip(ours_texts, base_texts_run, strict=True):
            cached_ms.append(common.timed(lambda t=mine: episodes.remember(store, NAMESPACE, t))[0])
            ref_repeat_ms.append(common.timed(lambda t=theirs: reference_remember(t))[0])
        # the DB part alone of the reference: its INSERT with a precomputed vector
        vector = raw.embed(["a precomputed vector"])[0]
        # interleaved with a cached remember (a third time: still cached), so the ratio of
        # the two is taken under the same load
        insert_ms, cached_again_ms = [], []
        for mine, theirs in zip(ours_texts, base_texts_run, strict=True):
            def insert_only(t: str = theirs) -> None:
                with store.db.transaction() as tx:
                    tx.conn.execute(common.sql("bench_reference_insert"), {
                        "namespace_id": namespace_id, "content": t, "embedding": vector,
                        "embedding_model": model_name})
            insert_ms.append(common.timed(insert_only)[0])
            cached_again_ms.append(common.timed(lambda t=mine: episodes.remember(store, NAMESPACE, t))[0])
        results["insert_only"] = common.summarize(insert_ms)
        results["cached_again"] = common.summarize(cached_again_ms)
        results["embed_only"] = common.summarize(embed_ms)
        results["single"] = (common.summarize(ours_ms), common.summarize(ref_ms))
        results["repeat"] = (common.summarize(cached_ms), common.summarize(ref_repeat_ms))
        common.log("latency done; measuring batch throughput")

        # batched throughput: remember_batch vs the reference's one-by-one loop
        ours_s = ref_s = 0.0
        for b in range(BATCHES):
            texts = fresh_texts(base_texts, BATCH_SIZE, f"batch{b}")
            t0 = time.perf_counter()
            episodes.remember_batch(store, NAMESPACE, [{"content": t} for t in texts])
            ours_s += time.perf_counter() - t0
            ref_texts = fresh_texts(base_texts, BATCH_SIZE, f"refbatch{b}")
            t0 = time.perf_counter()
            for t in ref_texts:
                reference_remember(t)
            ref_s += time.perf_counter() - t0
        # DB path alone: the same batches again, embeddings now cached
        t0 = time.perf_counter()
        for b in range(BATCHES):
            texts = fresh_texts(base_texts, BATCH_SIZE, f"batch{b}")
            episodes.remember_batch(store, NAMESPACE, [{"content": t} for t in texts])
        cached_s = time.perf_counter() - t0
        total = BATCH_SIZE * BATCHES
        results["throughput"] = (total / ours_s, total / ref_s, total / cached_s)
        common.log("measuring sync vs async writes")
        precomputed = raw.embed(["a precomputed vector for the bare INSERT"])[0]

        def bare_insert(text: str) -> None:
            with store.db.transaction() as tx:
                tx.conn.execute(common.sql("bench_reference_insert"), {
                    "namespace_id": namespace_id, "content": text + " (bare)", "embedding": precomputed,
                    "embedding_model": model_name})

        results["async"] = measure_async(store, base_texts, bare_insert)
        with store.db.transaction() as tx:
            calls_after = tx.conn.execute(common.sql("bench_model_calls")).fetchone()["n"]
        results["model_calls"] = calls_after - calls_before
        sizes = common.relation_sizes(store)

    single_ours, single_ref = results["single"]
    repeat_ours, repeat_ref = results["repeat"]
    rows = [
        ["remember, new text (p50 ms)", single_ours["p50"], single_ref["p50"],
         common.ratio(single_ours["p50"], single_ref["p50"])],
        ["remember, new text (p95 ms)", single_ours["p95"], single_ref["p95"],
         common.ratio(single_ours["p95"], single_ref["p95"])],
        ["remember, repeated text (p50 ms)", repeat_ours["p50"], repeat_ref["p50"],
         common.ratio(repeat_ours["p50"], repeat_ref["p50"])],
        ["remember, repeated text (p95 ms)", repeat_ours["p95"], repeat_ref["p95"],
         common.ratio(repeat_ours["p95"], repeat_ref["p95"])],
        [f"{args.embedder} embedding of one new text, alone (p50 ms)", results["embed_only"]["p50"],
         results["embed_only"]["p50"], "1.00x"],
        ["remember, cached text vs a bare INSERT transaction, interleaved (p50 ms)",
         results["cached_again"]["p50"], results["insert_only"]["p50"],
         common.ratio(results["cached_again"]["p50"], results["insert_only"]["p50"])],
        ["remember, cached text vs a bare INSERT transaction, interleaved (p95 ms)",
         results["cached_again"]["p95"], results["insert_only"]["p95"],
         common.ratio(results["cached_again"]["p95"], results["insert_only"]["p95"])],
        [f"batch throughput, new texts (episodes/s, {BATCHES}x{BATCH_SIZE})", results["throughput"][0],
         results["throughput"][1], common.ratio(results["throughput"][0], results["throughput"][1])],
        ["batch throughput, embeddings cached (episodes/s)", results["throughput"][2], results["throughput"][1],
         common.ratio(results["throughput"][2], results["throughput"][1])],
        ["model calls during all writes", results["model_calls"], 0, "-"],
    ]
    resources = [["fill + index builds (s)", seconds]]
    resources += [[f"{name} (s)", value] for name, value in builds.items()]
    resources += [[f"{name} (MB)", mb] for name, mb in sizes if name.startswith("episodes")]
    resources += [["server peak memory, summed PSS (MB)", server_memory.peak_pss_mb],
                  ["server peak RSS of one process (MB)", server_memory.peak_process_rss_mb],
                  ["bench process peak RSS (MB)", common.bench_peak_rss_mb()]]
    common.print_table(
        f"Write path, {args.embedder}, {size:,} existing episodes, {LATENCY_SAMPLES} samples per latency row "
        "— ratio = ours / baseline (latency: lower is better; throughput: higher is better)",
        ["measure", "ours", "baseline (reference path)", "ratio"], rows)
    common.print_table(f"Fill, index builds, sizes and memory, {size:,} existing episodes "
                       f"(maintenance_work_mem {common.BUILD_MEMORY}, {common.BUILD_WORKERS} parallel worker)",
                       ["measure", "value"], resources)

    common.print_table(
        f"Write path, sync vs async vectors (STASH_EMBED_ON_WRITE), {args.embedder}, {LATENCY_SAMPLES} samples "
        "per latency row — ratio = async / sync",
        ["measure", "sync", "async", "ratio"], async_rows(args.embedder, results["async"]))

    common.save_paired_bars(
        "write_path",
        f"remember latency, {size:,} existing episodes ({args.embedder})",
        ["new p50", "new p95", "repeat p50", "repeat p95"],
        [single_ours["p50"], single_ours["p95"], repeat_ours["p50"], repeat_ours["p95"]],
        [single_ref["p50"], single_ref["p95"], repeat_ref["p50"], repeat_ref["p95"]],
        ours_label="ours: remember",
        baseline_label="baseline: uncached embed + single INSERT",
    )


if __name__ == "__main__":
    main()
