"""Benchmark 1 — the write path: ``remember`` latency and ``remember_batch`` throughput.

    python -m bench.write_path            # 1,000 existing episodes
    python -m bench.write_path --large    # 100,000 existing episodes
    python -m bench.write_path --size N   # N existing episodes
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
"""

from __future__ import annotations

import argparse
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


def fill(store: Any, size: int, base_texts: list[str], base_vectors: np.ndarray) -> float:
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

    seconds = common.bulk_fill(store, "episodes", namespace_id, chunks())
    return seconds


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
    with common.fresh_store(args.embedder) as store:
        seconds = fill(store, size, base_texts, base_vectors)
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
        with store.db.transaction() as tx:
            calls_after = tx.conn.execute(common.sql("bench_model_calls")).fetchone()["n"]
        results["model_calls"] = calls_after - calls_before

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
    common.print_table(
        f"Write path, {args.embedder}, {size:,} existing episodes, {LATENCY_SAMPLES} samples per latency row "
        "— ratio = ours / baseline (latency: lower is better; throughput: higher is better)",
        ["measure", "ours", "baseline (reference path)", "ratio"], rows)

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
