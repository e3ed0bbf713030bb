"""Recall's plans: a scoped recall under the generic plan, and the first recalls on a fresh connection.

    python -m bench.recall_plans                          # 200 x 500 small namespaces, 20,000 in one
    python -m bench.recall_plans --baseline-rev REV       # and revision REV's recall statement
    python -m bench.recall_plans --size 100000 --namespaces 200 --per 500

Recall forces a generic plan (planning the statement costs about as much as running it),
so its reads must be cheap whatever the values. Server CPU per statement, paired per
question (the statements back to back, order rotating, after a warm-up):

1. **Many small namespaces**: ``--namespaces`` x ``--per`` episodes (the agent-memory
   texts with a distinct suffix, one shared vector), each question in text mode scoped to
   one namespace in turn: the text leg alone (the statement cut after ``text_top``) and
   the whole statement. **One big namespace**: ``bench.recall_latency``'s fill at
   ``--size``, hybrid, scoped to it and over all namespaces. Rows: the statement under
   the generic plan (as recall runs it) and the planner's custom plan for the same
   values (planning included); with ``--baseline-src DIR`` or ``--baseline-rev REV`` (an
   older tree, ``bench/common.py``) its ``recall`` statement under the generic plan too, and whether
   both return the same rows. **Small beside big**: namespaces of ``--beside`` episodes
   next to the big one, hybrid, each question scoped to one of them.
2. **First recalls on a fresh pool** of one connection (the big namespace, every query's
   vector cached), three ways in turn: unprepared (psycopg prepares a statement after five
   runs, each planned anew), prepared at first use (``Database.pipelined(prepare=True)``,
   what recall does), and prepared as the pool opens the connection
   (``recall/statement.py``, what ``stash serve`` does). Median per position.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

from bench import common, recall_latency
from bench.data import generate

GENERIC, CUSTOM = "force_generic_plan", "force_custom_plan"
#: a statement's own settings when they are not the current recall_search_params (an older tree's)
SETTINGS: dict[str, str] = {}


def load_average() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def text_leg(statement: str) -> str:
    """The statement cut after text_top: the text leg alone (its candidates, in order)."""
    return (statement[:statement.index("candidates AS (")].rstrip().rstrip(",")
            + "\nSELECT array_agg(kind || id ORDER BY kind, id) AS ids FROM text_top")


def run(conn: Any, statement: str, params: dict[str, Any], mode: str,
        settings: str | None = None) -> tuple[float, list[dict[str, Any]]]:
    """(server CPU ms, rows) of one prepared run under recall's settings (``settings``, an
    older tree's, else the current ``recall_search_params``) and ``mode``."""
    from stash_pipeline.db.sql import query
    from stash_pipeline.recall.config import DEFAULT

    conn.execute(settings or query("recall_search_params"), {"ef_search": str(DEFAULT.ef_search)})
    conn.execute("SELECT set_config('plan_cache_mode', %s, true)", (mode,))
    before = common.server_cpu_ms(conn)
    rows = conn.execute(statement, params, prepare=True).fetchall()
    after = common.server_cpu_ms(conn)
    conn.commit()
    return (after or 0.0) - (before or 0.0), rows


def answer(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What a statement answered: the ids in order, scores to 9 decimals (two plans may
    sum the same floats in another order)."""
    return [(r.get("kind"), r.get("id"), r.get("ids"),
             None if r.get("score") is None else round(float(r["score"]), 9)) for r in rows]


def paired(store: Any, statements: dict[str, str], params_list: list[dict[str, Any]], title: str,
           *, split: bool = False) -> list[list[Any]]:
    """Each (statement, plan mode) per question, back to back, the order rotating; rows of the
    table, with ``split`` also for the common-word questions (the rarest word in more than
    text_scan_limit rows; one namespace holds them all) and the others apart."""
    keys = [(name, GENERIC) for name in statements] + [("current", CUSTOM)]
    cpu: dict[tuple[str, str], list[float]] = {k: [] for k in keys}
    common_word = [recall_latency.common_word(store, p) for p in params_list] if split else []
    same = 0
    with store.db.connection() as conn:
        for params in params_list[:10]:  # warm-up: caches and the prepared statements
            for name, mode in keys:
                run(conn, statements[name], params, mode, SETTINGS.get(name))
        for i, params in enumerate(params_list):
            rows = {}
            # each in every place in turn: the first run of a question finds colder caches
            for name, mode in keys[i % len(keys):] + keys[:i % len(keys)]:
                took, rows[(name, mode)] = run(conn, statements[name], params, mode, SETTINGS.get(name))
                cpu[(name, mode)].append(took)
            same += len({repr(answer(r)) for r in rows.values()}) == 1
    label = {GENERIC: "generic plan", CUSTOM: "custom plan (planning included)"}
    rows = [[title, f"{name}, {label[mode]}", common.percentile(v, 50), common.percentile(v, 95),
             f"{same} of {len(params_list)}"] for (name, mode), v in cpu.items()]
    for group, wanted in (("common-word", True), ("rare-word", False)) if split else ():
        picked = [i for i, c in enumerate(common_word) if c == wanted]
        rows += [[f"{title}, {len(picked)} {group} questions", f"{name}, {label[mode]}",
                  common.percentile([v[i] for i in picked], 50), common.percentile([v[i] for i in picked], 95), ""]
                 for (name, mode), v in cpu.items() if picked]
    return rows


def fill_namespaces(store: Any, count: int, per: int) -> None:
    """``count`` namespaces of ``per`` episodes each, by COPY, indexes rebuilt after."""
    from stash_pipeline.memory import namespaces

    data = generate.load()
    texts = [e["content"] for e in data["episodes"]] + [f["content"] for f in data["facts"]]
    for i in range(count):
        namespaces.create(store, f"/bench/ns{i:03d}")
    with store.db.transaction() as tx:
        ids = [namespaces.resolve_id(tx, f"/bench/ns{i:03d}") for i in range(count)]
    vector = np.ones(384, dtype=np.float32) / np.sqrt(384)  # the text leg is what is measured
    model = store.settings.embedding_model_name
    with store.db.connection() as conn:
        indexes = conn.execute(common.sql("bench_search_indexes"), {"table": "episodes"}).fetchall()
        for r in indexes:
            conn.execute(f'DROP INDEX "{r["indexname"]}"')  # names read from pg_indexes
        with conn.cursor() as cur, cur.copy("COPY episodes (namespace_id, content, embedding, embedding_model) "
                                            "FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "text", "vector", "text"])
            for j in range(count * per):
                copy.write_row([ids[j % count], f"{texts[(j * 7919) % len(texts)]} [{j}]", vector, model])
        conn.commit()
        for r in indexes:
            conn.execute(r["indexdef"])
            conn.commit()
        conn.execute("ANALYZE episodes")
        conn.commit()


def fill_beside(store: Any, size: int) -> str:
    """A namespace of ``size`` episodes beside the big one (its texts and vector geometry),
    written by plain INSERTs through the live indexes; its path."""
    from stash_pipeline.memory import namespaces

    slug = f"/bench/beside{size}"
    namespaces.create(store, slug)
    with store.db.transaction() as tx:
        namespace_id = namespaces.resolve_id(tx, slug)
    data = generate.load()
    texts = [e["content"] for e in data["episodes"]]
    vectors = common.noisy_copies(common.dataset_vectors(texts), size, np.random.default_rng(size))
    model = store.settings.embedding_model_name
    with store.db.connection() as conn:
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO episodes (namespace_id, content, embedding, embedding_model) "
                            "VALUES (%s, %s, %s, %s)",
                            [(namespace_id, f"{texts[i % len(texts)]} [beside {i}]", vectors[i], model)
                             for i in range(size)])
        conn.commit()
        conn.execute("ANALYZE episodes")
        conn.commit()
    return slug


def statement_params(store: Any, question: str, scope: str, *, hybrid: bool,
                     vector: np.ndarray | None = None) -> dict[str, Any]:
    params = recall_latency.recall_statement_params(store, question)
    return params | {"paths": [scope], "all_namespaces": scope == "/", "use_vector": hybrid,
                     "embedding": vector if hybrid else None, "query": question}


def first_recalls(store: Any, questions: list[str], pools: int, runs: int) -> list[list[Any]]:
    """Server CPU of recall i (context 1) on a fresh pool of one connection, three ways."""
    from stash_pipeline import recall
    from stash_pipeline.db.gateway import Database
    from stash_pipeline.recall import statement as recall_prepare
    from stash_pipeline.store import Store

    original = Database.pipelined

    def unprepared(self: Database, *statements: tuple[str, Any], **options: Any) -> list[list[dict[str, Any]]]:
        return original(self, *statements)

    ways = ("unprepared (before)", "prepared at first use", "prepared as the pool connects")
    cpu: dict[str, list[list[float]]] = {w: [] for w in ways}
    k = 0
    try:
        for p in range(pools):
            for way in ways if p % 2 == 0 else reversed(ways):
                Database.pipelined = unprepared if way == ways[0] else original  # type: ignore[method-assign]
                fresh = Store.open(store.settings, db=Database(store.db.dsn, min_size=1, max_size=1))
                fresh._embedder = store.embedder  # the same model: only the database side differs
                if way == ways[2]:
                    recall_prepare.prepare_on_connect(fresh)
                with fresh.db.connection() as conn:  # the pool opens its connection (and prepares)
                    conn.execute("SELECT 1")
                    conn.commit()
                row = []
                for r in range(runs):
                    with fresh.db.connection() as conn:
                        before = common.server_cpu_ms(conn) or 0.0
                        conn.commit()
                    recall.recall_results(fresh, questions[(k + r) % len(questions)], [recall_latency.NAMESPACE],
                                          limit=10, context=1)
                    with fresh.db.connection() as conn:
                        row.append((common.server_cpu_ms(conn) or 0.0) - before)
                        conn.commit()
                cpu[way].append(row)
                fresh.close()
            k += runs
    finally:
        Database.pipelined = original  # type: ignore[method-assign]
    return [[way, *np.median(np.array(v), axis=0)] for way, v in cpu.items()]


@common.writes_results
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=20_000, help="memories in the one big namespace")
    parser.add_argument("--namespaces", type=int, default=200, help="small namespaces")
    parser.add_argument("--per", type=int, default=500, help="episodes per small namespace")
    parser.add_argument("--questions", type=int, default=120, help="questions per case")
    parser.add_argument("--pools", type=int, default=8, help="fresh pools per way (first recalls)")
    parser.add_argument("--beside", default="80,500,2000", help="sizes of small namespaces beside the big one "
                        "(hybrid recalls scoped to each)")
    common.add_baseline_arguments(parser, "its recall statement too, same questions")
    parser.add_argument("--keep", metavar="NAME", help="fill the big namespace in database NAME on "
                        "STASH_DATABASE_URL's server once, keep it (1M)")
    args = parser.parse_args(argv)

    from stash_pipeline.db import sql

    current = sql.QUERIES["recall"]
    statements = {"current": current}
    with common.baseline_tree(args) as tree:
        if tree is not None:
            baseline = common.recall_statements(tree)
            statements["baseline"] = baseline["recall"]
            SETTINGS["baseline"] = baseline["recall_search_params"]  # as the older tree ran it
    legs = {name: text_leg(s) for name, s in statements.items()}
    questions = [q["query"] for q in generate.load()["questions"]]
    rows: list[list[Any]] = []
    began = time.strftime("%H:%M", time.gmtime())
    load_before = load_average()
    with common.fresh_store("minilm-int8") as store:
        fill_namespaces(store, args.namespaces, args.per)
        small = [statement_params(store, q, f"/bench/ns{k % args.namespaces:03d}", hybrid=False)
                 for k, q in enumerate(questions[:args.questions])]
        case = f"{args.namespaces} x {args.per}, one namespace, text"
        rows += paired(store, legs, small, f"{case}: text leg")
        rows += paired(store, statements, small, f"{case}: whole statement")
    with common.fresh_store("minilm-int8", keep=args.keep) as store:
        asked, vectors = recall_latency.fill(store, args.size, {})
        recall_latency.fill_entities(store, args.size)
        for scope in (recall_latency.NAMESPACE, "/"):
            big = [statement_params(store, q, scope, hybrid=True, vector=v)
                   for q, v in zip(asked[:args.questions], vectors, strict=False)]
            rows += paired(store, statements, big, f"{args.size:,} in one namespace, scope {scope}, hybrid",
                           split=True)
        for size in (int(n) for n in args.beside.split(",") if n):
            slug = fill_beside(store, size)
            beside = [statement_params(store, q, slug, hybrid=True, vector=v)
                      for q, v in zip(asked[:args.questions], vectors, strict=False)]
            rows += paired(store, statements, beside, f"{size:,} beside {args.size:,}, scoped to them, hybrid")
        for q in asked:  # every query's vector cached, as for a question asked before
            store.embedder.embed_one(q)
        first = first_recalls(store, asked, args.pools, 8)
    common.print_table(f"Recall statement, server CPU ms ({began} UTC, load {load_before} -> {load_average()})",
                       ["case", "statement", "p50", "p95", "same rows"], rows)
    common.print_table(f"Recall i on a fresh pool of one connection, server CPU ms, median of {args.pools} pools "
                       f"({args.size:,} memories, vectors cached, context 1; load {load_average()})",
                       ["statements", *(f"#{i + 1}" for i in range(8))], first)


if __name__ == "__main__":
    main()
