"""Benchmark 2 — recall latency at 10k (default) / 100k (``--large``) memories.

    python -m bench.recall_latency            # 10,000 memories (8,000 episodes + 2,000 facts)
    python -m bench.recall_latency --large    # 100,000 memories (80,000 + 20,000)
    python -m bench.recall_latency --size N
    STASH_DATABASE_URL=... nice -n 10 python -m bench.recall_latency --size 1000000 --keep stash_bench_1m
    python -m bench.recall_latency --embedder minilm-int8   # another query embedder
    python -m bench.recall_latency --baseline-rev REV       # then the same run from revision REV

Data: episodes and current facts filled by COPY (then HNSW and GIN built), texts from the
committed dataset with a distinct suffix, vectors = the texts' MiniLM vectors plus small
Gaussian noise (the real embedding geometry, without embedding 100k texts). Queries: the
289 questions of bench/data, asked over all namespaces, limit 10.

Rows, ours (``recall``, hybrid) vs baseline (a vector-only query of the same data, the
reference's read: cosine over facts and episodes, default HNSW settings):

* end to end, embedding computed — the first time each query is seen (MiniLM runs);
  baseline: the raw embedder + the vector-only SQL;
* end to end, embedding cached — the same queries again; ``recall`` has no hook for a
  precomputed vector, so its embedding is a cache hit (one indexed lookup);
* SQL alone — the recall round trip (``recall_search_params`` + ``recall_check`` +
  ``recall`` pipelined) with the precomputed vector given, as ``recall`` runs it, vs the
  vector-only SQL;
* SQL alone, server CPU time — the CPU the server process spent on each of those
  statements (from /proc, local server only): on a machine shared with other work it is
  what the statement costs, without the time spent waiting for a core.

Then EXPLAIN (ANALYZE) excerpts show the HNSW and GIN indexes at work, and a table gives
the fill and index build times, table and index sizes, and the peak memory of the
PostgreSQL server and of this process.

At 1M the vectors are the same perturbations of the ~2,400 real MiniLM vectors of the
dataset texts (about 400 noisy copies around each, cosine ~0.97 to their source), so the
HNSW graph indexes real MiniLM neighbourhoods with many near-duplicates (a hard case for
a graph index) and nothing is embedded during the fill. ``--keep NAME`` fills the
database NAME on STASH_DATABASE_URL's server once and keeps it; later runs with the same
name skip the fill (after migrating it to the current schema) and measure the current code.

Entity leg: one entity per ten memories (the agent-memory facts' subjects first, so the
questions that name a service match one; then "entity <i>"), three aliases each, every
fact about one of them, three relationships each. Measured on the same queries: recall
with the entity leg vs without it (embedding cached, interleaved), and the recall round
trip with and without the query's phrases (the leg is part of the statement).

Recall steps (bench/recall_steps.py): each step's time and share of the current path.

Before vs now: ``--baseline-src DIR`` / ``--baseline-rev REV`` runs this bench again, with
the same arguments, from that older tree (its bench on its code, in a subprocess, on a
fresh database of its own) after this run, so its tables follow these. Revisions: recall
before BM25 ranking ``2e97116^``, the first BM25 statement ``2e97116``, the path before one
round trip ``420b60c^``. The recall statement of an older tree paired with today's
question by question, on the same data, is ``bench.candidate_reads --baseline-rev REV``.

Common-word questions (the rarest query word in more than ``text_scan_limit`` rows, where
the text leg matches the two rarest words together) get their own rows.

``--write-load N``: cached recall and its round trip again, every question twice, in
blocks of ten alternating with and without six threads remembering new turns
(``episodes.remember``, texts with cached vectors) into a namespace under the recalled one
at N/s in all; the achieved rate is reported.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from bench import common, recall_steps
from bench.data import generate

NAMESPACE = "/bench/recall"
#: where --write-load writes: inside the recalled scope, outside the kept fill's count
WRITES = "/bench/recall/writes"
FACT_SHARE = 0.2


def fill(store: Any, size: int, builds: dict[str, float]) -> tuple[list[str], np.ndarray]:
    """Fill ``size`` memories (unless a kept database already holds them); the questions and their vectors."""
    from stash_pipeline.memory import namespaces

    data = generate.load()
    base_texts = [e["content"] for e in data["episodes"]] + [f["content"] for f in data["facts"]]
    base_vectors = common.dataset_vectors(base_texts)
    questions = [q["query"] for q in data["questions"]]
    question_vectors = common.dataset_vectors(questions)
    namespaces.create(store, NAMESPACE)  # like mkdir -p: a kept database has it already
    store.embedder.check_lock()
    with store.db.transaction() as tx:
        namespace_id = namespaces.resolve_id(tx, NAMESPACE)
    rng = np.random.default_rng(11)
    n_facts = int(size * FACT_SHARE)
    n_episodes = size - n_facts
    with store.db.transaction() as tx:
        present = tx.conn.execute(common.sql("bench_memory_count"), {"namespace_id": namespace_id}).fetchone()
    if (present["episodes"], present["facts"]) == (n_episodes, n_facts):
        common.log(f"kept database already holds {n_episodes:,} episodes + {n_facts:,} facts: no fill")
        return questions, question_vectors
    if present["episodes"] or present["facts"]:
        raise SystemExit(f"the kept database holds {present['episodes']} episodes + {present['facts']} facts, "
                         f"not {n_episodes} + {n_facts}: use another --keep name")
    seconds = 0.0
    for table, count in (("episodes", n_episodes), ("facts", n_facts)):
        def chunks(table: str = table, count: int = count) -> Iterator[tuple[list[str], np.ndarray]]:
            for start in range(0, count, 20_000):
                stop = min(count, start + 20_000)
                contents = [f"{base_texts[i % len(base_texts)]} [{table} {i}]" for i in range(start, stop)]
                yield contents, common.noisy_copies(base_vectors, stop - start, rng)

        seconds += common.bulk_fill(store, table, namespace_id, chunks(), builds)
    common.log(f"filled {n_episodes:,} episodes + {n_facts:,} facts in {seconds:.1f}s")
    return questions, question_vectors


def fill_entities(store: Any, size: int) -> int:
    """Entities, aliases, fact links and relationships for the entity leg; returns the entity count."""
    from stash_pipeline.memory import namespaces
    from stash_pipeline.memory.entities import normalise

    subjects = list(dict.fromkeys(f["entity"] for f in generate.load()["facts"]))
    count = max(len(subjects), size // 10)
    names = subjects + [f"entity {i}" for i in range(count - len(subjects))]
    with store.db.transaction() as tx:
        namespace_id = namespaces.resolve_id(tx, NAMESPACE)
        existing = tx.conn.execute(common.sql("bench_entity_count"), {"namespace_id": namespace_id}).fetchone()
        if existing["entities"]:  # a kept database: its entities were filled with it
            return int(existing["entities"])
        tx.conn.execute(common.sql("bench_entity_fill_names"), {
            "namespace_id": namespace_id, "names": names, "normalised": [normalise(n) for n in names]})
        for name in ("bench_entity_fill_aliases", "bench_entity_fill_facts", "bench_entity_fill_relationships"):
            tx.conn.execute(common.sql(name), {"namespace_id": namespace_id})
        tx.conn.execute(common.sql("bench_entity_analyze"))
    return count


def recall_statement_params(store: Any, query: str, **options: Any) -> dict[str, Any]:
    """The exact parameters ``recall`` passes to the ``recall`` statement for this query (a spy).

    Capturing, rather than rebuilding them here, keeps the SQL-alone rows in step with
    whatever recall.py currently sends.
    """
    from stash_pipeline import recall
    from stash_pipeline.db.gateway import Database

    captured: dict[str, Any] = {}
    original = Database.pipelined

    def spy(self: Any, *statements: tuple[str, Any], **options: Any) -> list[list[dict[str, Any]]]:
        captured.update(dict(statements).get("recall", {}))
        return original(self, *statements, **options)

    Database.pipelined = spy  # type: ignore[method-assign]
    try:
        recall.recall(store, query, ["/"], limit=10, **options)
    finally:
        Database.pipelined = original  # type: ignore[method-assign]
    return captured


def common_word(store: Any, params: dict[str, Any]) -> bool:
    """Whether the query's rarest known word is in more than text_scan_limit rows (over all
    namespaces: the benches that ask hold their rows in one)."""
    with store.db.transaction() as tx:
        values = params | {"all_namespaces": True, "namespace_ids": []}
        return int(tx.conn.execute(common.sql("bench_rarest_df"), values).fetchone()["df"]) > params["text_scan_limit"]


def hybrid_params(store: Any, query: str, vector: np.ndarray) -> dict[str, Any]:
    """The ``recall`` statement's parameters for this query, with ``vector`` (and the
    ``namespace_ids`` an older tree's statement takes: ``bench.candidate_reads``' baseline)."""
    return recall_statement_params(store, query) | {"embedding": vector, "namespace_ids": []}


def entity_leg_table(store: Any, questions: list[str], entities: int) -> None:
    """Cached recall with and without the entity leg (in turn), and the statement with and without it."""
    from stash_pipeline import recall
    from stash_pipeline.recall.config import VARIANTS

    with_leg, without, sql_on, sql_off, named = [], [], [], [], 0
    for q in questions:
        params = recall_statement_params(store, q)
        with_leg.append(common.timed(lambda q=q: recall.recall(store, q, ["/"], limit=10))[0])
        without.append(common.timed(
            lambda q=q: recall.recall(store, q, ["/"], limit=10, config=VARIANTS["no_entity_leg"]))[0])
        took, rows = common.timed(lambda p=params: recall_sql(store, p))
        sql_on.append(took)
        sql_off.append(common.timed(lambda p=params: recall_sql(store, p | {"phrases": []}))[0])
        named += any(r["entity_score"] is not None for r in rows)
    a, b = common.summarize(with_leg), common.summarize(without)
    c, d = common.summarize(sql_on), common.summarize(sql_off)
    common.print_table(
        f"Entity leg cost: {entities:,} entities (3 aliases, 3 relationships each), {len(questions)} queries, "
        f"{named} of them reach an entity's fact in the top 10; embedding cached",
        ["measure", "p50 ms", "p95 ms"],
        [["recall, entity leg on", a["p50"], a["p95"]], ["recall, entity leg off", b["p50"], b["p95"]],
         ["difference", a["p50"] - b["p50"], a["p95"] - b["p95"]],
         ["the recall round trip, leg on", c["p50"], c["p95"]],
         ["the recall round trip, leg off (no phrases)", d["p50"], d["p95"]],
         ["difference (the leg inside the statement)", c["p50"] - d["p50"], c["p95"] - d["p95"]]])


def recall_sql(store: Any, params: dict[str, Any], cpu: list[float] | None = None, *,
               statement: str | None = None, ef_search: int | None = None) -> list[dict[str, Any]]:
    """The recall round trip (its three statements pipelined) as recall runs it (or with
    another recall ``statement`` text and beam); ``cpu`` receives the server CPU time it
    took (ms)."""
    from stash_pipeline.db.sql import query
    from stash_pipeline.recall.config import DEFAULT

    # Database.pipelined's round trip, on a connection held for the CPU readings around it
    with store.db.connection() as conn:
        before = common.server_cpu_ms(conn)
        conn.autocommit = True
        try:
            cursors = [conn.cursor() for _ in range(3)]
            with conn.pipeline():
                # prepared at once, as recall does
                cursors[0].execute(query("recall_search_params"), {"ef_search": str(ef_search or DEFAULT.ef_search)},
                                   prepare=True)
                cursors[1].execute(query("recall_check"), params, prepare=True)
                cursors[2].execute(statement or query("recall"), params, prepare=True)
            rows = cursors[2].fetchall()
        finally:
            conn.autocommit = False
        after = common.server_cpu_ms(conn)
    if cpu is not None and before is not None and after is not None:
        cpu.append(after - before)
    return rows


def vector_sql(store: Any, vector: np.ndarray, cpu: list[float] | None = None) -> list[dict[str, Any]]:
    with store.db.transaction() as tx:
        before = common.server_cpu_ms(tx.conn)
        rows = tx.conn.execute(common.sql("bench_vector_only"), {"embedding": vector, "limit": 10}).fetchall()
        after = common.server_cpu_ms(tx.conn)
    if cpu is not None and before is not None and after is not None:
        cpu.append(after - before)
    return rows


def explain(store: Any, params: dict[str, Any]) -> tuple[list[str], list[str]]:
    """EXPLAIN (ANALYZE) lines of the recall statement and of the vector-only baseline."""
    from stash_pipeline.db.sql import query as named
    from stash_pipeline.recall.config import DEFAULT

    with store.db.transaction() as tx:
        tx.one("recall_search_params", ef_search=str(DEFAULT.ef_search))
        ours = tx.conn.execute("EXPLAIN (ANALYZE, COSTS OFF) " + named("recall"), params).fetchall()
    with store.db.transaction() as tx:
        base = tx.conn.execute("EXPLAIN (ANALYZE, COSTS OFF) " + common.sql("bench_vector_only"),
                               {"embedding": params["embedding"], "limit": 10}).fetchall()
    return [next(iter(r.values())) for r in ours], [next(iter(r.values())) for r in base]


def write_load_table(store: Any, questions: list[str], rate: float, block: int = 10) -> None:
    """Cached recall and the recall round trip with and without writers at ``rate``/s, in alternate blocks."""
    from bench.recall_service import Writer
    from stash_pipeline import recall
    from stash_pipeline.memory import namespaces

    base = [e["content"] for e in generate.load()["episodes"]]
    texts = [f"{base[i % len(base)]} [written {i}]" for i in range(max(2_000, int(rate * 120)))]
    common.prime_embedding_cache(store, texts, common.noisy_copies(common.dataset_vectors(base), len(texts),
                                                                   np.random.default_rng(5)))
    namespaces.create(store, WRITES)
    turns = [{"namespace": WRITES, "content": t, "occurred_at": None} for t in texts]
    params = [recall_statement_params(store, q) for q in questions]
    timings: dict[str, list[float]] = {k: [] for k in ("cached off", "cached on", "sql off", "sql on")}
    writer = Writer(store, turns, rate, threads=6)
    began = time.strftime("%H:%M", time.gmtime())
    with writer.running():
        for i in range(2 * len(questions)):  # each question once with the writers, once without
            k = i % len(questions)
            state = "on" if (k // block + i // len(questions)) % 2 else "off"
            writer.switch(state == "on")
            if i % block == 0:
                time.sleep(0.2)  # the writers reach their pace (or stop) before the block
            timings[f"cached {state}"].append(
                common.timed(lambda q=questions[k]: recall.recall(store, q, ["/"], limit=10))[0])
            timings[f"sql {state}"].append(common.timed(lambda p=params[k]: recall_sql(store, p))[0])
        writer.switch(False)
    rows = [[f"{what} (p{p} ms)", common.percentile(timings[f"{key} off"], p),
             common.percentile(timings[f"{key} on"], p),
             common.ratio(common.percentile(timings[f"{key} on"], p), common.percentile(timings[f"{key} off"], p))]
            for key, what in (("cached", "recall end to end, embedding cached"), ("sql", "the recall round trip"))
            for p in (50, 95)]
    common.print_table(
        f"Recall under a write load: {writer.written:,} remembers at {writer.rate:.0f}/s achieved while on "
        f"({rate:.0f}/s asked of 6 threads), {len(questions)} questions each way, blocks of {block} "
        f"({began} UTC, load {' '.join(f'{v:.1f}' for v in os.getloadavg())})",
        ["measure", "writers off", "writers on", "ratio"], rows)


@common.writes_results
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000, help="memories (default 10000)")
    parser.add_argument("--large", action="store_true", help="100,000 memories")
    parser.add_argument("--keep", metavar="NAME", help="fill database NAME on STASH_DATABASE_URL's server once, keep it")
    parser.add_argument("--embedder", choices=("minilm", "minilm-onnx", "minilm-int8", "minilm-static"),
                        default="minilm", help="query embedder (default minilm; the fill keeps MiniLM vectors)")
    parser.add_argument("--write-load", type=float, default=0.0, metavar="N",
                        help="also recall with writers remembering N turns/s (e.g. 200)")
    common.add_baseline_arguments(parser, common.RERUN)
    args = parser.parse_args(argv)
    size = 100_000 if args.large else args.size
    if args.keep and (args.baseline_src or args.baseline_rev):
        raise SystemExit("--keep with a baseline: the older tree would migrate the kept database; "
                         "run the baseline's own checkout with its own --keep name")
    common.measure_then_baseline(args, argv, "bench.recall_latency", lambda: measure(args, size))


def measure(args: argparse.Namespace, size: int) -> None:
    """The run: fill, measure, print the tables, draw the plot."""
    from stash_pipeline import recall

    builds: dict[str, float] = {}
    with common.fresh_store(args.embedder, keep=args.keep) as store, common.ServerMemory(store) as server_memory:
        began = time.perf_counter()
        questions, vectors = fill(store, size, builds)
        fill_seconds = time.perf_counter() - began
        fill_server_pss = server_memory.peak_pss_mb
        fill_bench_rss = common.bench_peak_rss_mb()
        entities = fill_entities(store, size)
        raw = store.embedder.inner
        raw.embed(["warm up"])
        for i, v in enumerate(vectors[:20]):  # warm the buffer cache and the plans
            vector_sql(store, v)
            recall.recall(store, f"warm-up query number {i} about deploys", ["/"], limit=10)

        e2e, e2e_ref, cached, cached_ref, sql_ours, sql_ref = [], [], [], [], [], []
        cpu_ours: list[float] = []
        cpu_ref: list[float] = []
        for q in questions:  # first sight of each query: MiniLM runs inside recall
            e2e.append(common.timed(lambda q=q: recall.recall(store, q, ["/"], limit=10))[0])
            e2e_ref.append(common.timed(lambda q=q: vector_sql(store, raw.embed([q])[0]))[0])
        prepared = [hybrid_params(store, q, v) for q, v in zip(questions, vectors, strict=True)]
        common_words = [common_word(store, p) for p in prepared]
        for q, v, params in zip(questions, vectors, prepared, strict=True):
            cached.append(common.timed(lambda q=q: recall.recall(store, q, ["/"], limit=10))[0])
            sql_ours.append(common.timed(lambda p=params: recall_sql(store, p, cpu_ours))[0])
            sql_ref.append(common.timed(lambda v=v: vector_sql(store, v, cpu_ref))[0])
        # the reference caches query embeddings too: its "cached" read is a lookup + the SQL
        for q in questions:
            cached_ref.append(common.timed(lambda q=q: vector_sql(store, store.embedder.embed_one(q)))[0])
        embed_ms = [common.timed(lambda q=q: raw.embed([q + " (timing)"]))[0] for q in questions[:100]]
        probe = next(i for i, q in enumerate(questions) if q.startswith("What was the root cause of INC-"))
        plan, base_plan = explain(store, prepared[probe])
        entity_leg_table(store, questions, entities)
        recall_steps.steps_table(store, questions, NAMESPACE)
        if args.write_load:
            write_load_table(store, questions, args.write_load)
        sizes = common.relation_sizes(store)
    resources = [["fill + index builds (s)" if builds else "no fill: the kept database was filled earlier (s)",
                  fill_seconds]]
    resources += [[f"{name} (s)", seconds] for name, seconds in builds.items()]
    resources += [[f"{name} (MB)", mb] for name, mb in sizes]
    resources += [
        ["server peak memory during the fill and builds, summed PSS (MB)", fill_server_pss],
        ["server peak memory over the whole run, summed PSS (MB)", server_memory.peak_pss_mb],
        ["server peak RSS of one process (MB)", server_memory.peak_process_rss_mb],
        ["bench process peak RSS after the fill (MB)", fill_bench_rss],
        ["bench process peak RSS (MB)", common.bench_peak_rss_mb()],
    ]

    s = {name: common.summarize(values) for name, values in (
        ("e2e", e2e), ("e2e_ref", e2e_ref), ("cached", cached), ("cached_ref", cached_ref),
        ("sql", sql_ours), ("sql_ref", sql_ref))}
    rows = []
    for label, ours, ref in (("end to end, embedding computed", "e2e", "e2e_ref"),
                             ("end to end, embedding cached", "cached", "cached_ref"),
                             ("SQL alone (precomputed vector)", "sql", "sql_ref")):
        for p in ("p50", "p95"):
            rows.append([f"{label} ({p} ms)", s[ours][p], s[ref][p], common.ratio(s[ours][p], s[ref][p])])
    if cpu_ours and cpu_ref:  # what the SQL costs the server, whatever else loads the machine
        for p in ("p50", "p95"):
            ours_cpu, ref_cpu = common.percentile(cpu_ours, int(p[1:])), common.percentile(cpu_ref, int(p[1:]))
            rows.append([f"SQL alone, server CPU time ({p} ms)", ours_cpu, ref_cpu, common.ratio(ours_cpu, ref_cpu)])
    for group, wanted in (("common-word", True), ("rare-word", False)):
        picked = [i for i, c in enumerate(common_words) if c == wanted]
        for label, ours, ref in (("end to end, embedding cached", cached, cached_ref),
                                 ("SQL alone", sql_ours, sql_ref), ("SQL alone, server CPU time", cpu_ours, cpu_ref)):
            for p in (50, 95):
                if picked and len(ours) == len(questions):
                    a, b = (common.percentile([v[i] for i in picked], p) for v in (ours, ref))
                    rows.append([f"{label}, {len(picked)} {group} questions (p{p} ms)", a, b, common.ratio(a, b)])
    rows.append(["MiniLM embedding of the query alone (p50 ms)", common.percentile(embed_ms, 50),
                 common.percentile(embed_ms, 50), "1.00x"])
    common.print_table(
        f"Recall latency, {size:,} memories ({int(size * (1 - FACT_SHARE)):,} episodes + "
        f"{int(size * FACT_SHARE):,} facts), {len(questions)} queries, limit 10 — ratio = ours / baseline",
        ["measure", "ours (hybrid recall)", "baseline (vector-only)", "ratio"], rows)

    common.print_table(f"Fill, index builds, sizes and memory, {size:,} memories "
                       f"(maintenance_work_mem {common.BUILD_MEMORY}, {common.BUILD_WORKERS} parallel worker)",
                       ["measure", "value"], resources)

    for title, lines in (("recall (ours)", plan), ("vector-only baseline", base_plan)):
        print(f"EXPLAIN (ANALYZE) of {title} for {questions[probe]!r}, scan lines:")
        for line in lines:
            if any(word in line for word in ("hnsw", "_gin", "Seq Scan", "Execution Time", "Planning Time")):
                print("   ", re.sub(r"'\[[^']*\]'::vector", "'[...]'::vector", line.strip()))
        print()

    common.save_paired_bars(
        "recall_latency",
        f"recall latency, {size:,} memories (MiniLM)",
        ["e2e p50", "e2e p95", "cached p50", "cached p95", "SQL p50", "SQL p95"],
        [s["e2e"]["p50"], s["e2e"]["p95"], s["cached"]["p50"], s["cached"]["p95"], s["sql"]["p50"], s["sql"]["p95"]],
        [s["e2e_ref"]["p50"], s["e2e_ref"]["p95"], s["cached_ref"]["p50"], s["cached_ref"]["p95"],
         s["sql_ref"]["p50"], s["sql_ref"]["p95"]],
        ours_label="ours: hybrid recall",
        baseline_label="baseline: vector-only",
    )


if __name__ == "__main__":
    main()
