"""Benchmark — recall's candidate reads: variants of the recall statement, question by question.

    STASH_DATABASE_URL=... python -m bench.candidate_reads --size 100000 --keep stash_bench_100k
    STASH_DATABASE_URL=... nice -n 10 python -m bench.candidate_reads --size 1000000 --keep stash_bench_1m

The database is the one ``bench.recall_latency --keep NAME`` fills (filled here too when
missing; ``--no-migrate`` measures it as it is). Each question runs the recall round trip
(``recall_search_params`` + ``recall_check`` + ``recall`` pipelined, as recall runs it)
once per variant, variants in rotating order, so load and cache state fall on every
variant alike; wall time and the server's CPU time are reported, p50 / p95, for all
questions and the common-word ones (the rarest query word in more than
``text_scan_limit`` rows) apart. Agreement = the share of the first variant's first ten
hits the variant also returns in its first ten (on the bench data, many near-duplicate
vectors: a measure of change, not of quality; bench.retrieval_quality is that).

Variants: ``baseline`` is an older tree's statement (``--baseline-src DIR`` or
``--baseline-rev REV``, ``bench/common.py``); ``full`` the
shipped statement reading the HNSW graphs of the full-precision vectors (as before
migration 0019; those indexes are built when missing and dropped afterwards unless
``--keep-full``); ``shipped`` as shipped; then the shipped statement with a narrower beam
or fewer candidates.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench import common, recall_latency

_FULL_INDEXES = {
    "facts_embedding_hnsw": "CREATE INDEX IF NOT EXISTS facts_embedding_hnsw ON facts "
                            "USING hnsw (embedding vector_cosine_ops)",
    "episodes_embedding_hnsw": "CREATE INDEX IF NOT EXISTS episodes_embedding_hnsw ON episodes "
                               "USING hnsw (embedding vector_cosine_ops)",
}


def full_precision(statement: str) -> str:
    """The recall statement ordering its HNSW reads by the full-precision vector (before 0019)."""
    out = statement
    for alias in ("f", "e"):
        key = f"embedding_key({alias}.embedding) <=> embedding_key((SELECT v FROM query_vector))"
        if key not in out:
            raise SystemExit(f"the recall statement no longer reads {key!r}: update bench/candidate_reads.py")
        out = out.replace(key, f"{alias}.embedding <=> (SELECT v FROM query_vector)")
    return out


def shipped(statement: str) -> str:
    return statement


#: name -> (statement transform, parameter changes, hnsw.ef_search or None for the shipped one)
VARIANTS: dict[str, tuple[Callable[[str], str], dict[str, Any], int | None]] = {
    "baseline": (shipped, {}, None),  # --baseline-src's statement
    "full": (full_precision, {}, None),
    "shipped": (shipped, {}, None),
    "ef_search=60": (shipped, {}, 60),
    "ef_search=40": (shipped, {}, 40),
    "candidates=20": (shipped, {"candidates": 20}, None),
    "text_candidates=40": (shipped, {"text_candidates": 40}, None),
}


def round_trip(store: Any, statement: str, params: dict[str, Any], ef_search: int,
               cpu: list[float]) -> list[dict[str, Any]]:
    """The recall round trip with another statement text and beam."""
    return recall_latency.recall_sql(store, params, cpu, statement=statement, ef_search=ef_search)


@contextlib.contextmanager
def kept_store(name: str) -> Iterator[Any]:
    """A Store on STASH_DATABASE_URL's database ``name``, not migrated."""
    from stash_pipeline.config import load_settings
    from stash_pipeline.store import Store

    home = Path(tempfile.mkdtemp(prefix="stash-bench-"))
    dsn = common._with_db(os.environ["STASH_DATABASE_URL"], name)
    store = Store.open(load_settings(database_url=dsn, home=home, embedder="minilm", vector_dim=384))
    try:
        yield store
    finally:
        store.close()
        shutil.rmtree(home, ignore_errors=True)


def top_ids(rows: list[dict[str, Any]], n: int = 10) -> list[tuple[str, int]]:
    seen: list[tuple[str, int]] = []
    for r in rows:
        key = (r["kind"], r["id"])
        if key not in seen:
            seen.append(key)
    return seen[:n]


@common.writes_results
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--keep", metavar="NAME", required=True, help="the kept database (bench.recall_latency's)")
    parser.add_argument("--variants", default=",".join(list(VARIANTS)[1:]),
                        help="comma-separated, the first is the one agreement is measured against "
                             "(with a baseline tree, 'baseline' goes first unless named)")
    common.add_baseline_arguments(parser, "its recall statement as the 'baseline' variant")
    parser.add_argument("--rounds", type=int, default=1, help="passes over the questions")
    parser.add_argument("--keep-full", action="store_true", help="keep the full-precision indexes built here")
    parser.add_argument("--no-migrate", action="store_true",
                        help="measure the kept database as it is (a 1M store still holding both kinds of index)")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.variants.split(",")]

    from stash_pipeline.db.sql import query
    from stash_pipeline.recall.config import DEFAULT

    if "baseline" in names and not (args.baseline_src or args.baseline_rev):
        raise SystemExit("the baseline variant needs --baseline-src or --baseline-rev")
    if (args.baseline_src or args.baseline_rev) and "baseline" not in names:
        names.insert(0, "baseline")  # a tree given: its statement, and agreement measured against it
    with common.baseline_tree(args) as tree:
        baseline = common.recall_statements(tree)["recall"] if tree is not None else None
    with (kept_store(args.keep) if args.no_migrate else common.fresh_store(keep=args.keep)) as store:
        questions, vectors = recall_latency.fill(store, args.size, {})
        recall_latency.fill_entities(store, args.size)
        built = []
        if {"full", "baseline"} & set(names):
            with store.db.connection() as conn:
                conn.autocommit = True
                for name, ddl in _FULL_INDEXES.items():
                    if conn.execute("SELECT to_regclass(%s) IS NULL AS missing", (name,)).fetchone()["missing"]:
                        common.log(f"building {name} for the full-precision variant")
                        conn.execute(f"SET maintenance_work_mem = '{common.BUILD_MEMORY}'")
                        conn.execute(ddl)
                        built.append(name)
        try:
            prepared = [recall_latency.hybrid_params(store, q, v) for q, v in zip(questions, vectors, strict=True)]
            common_words = [recall_latency.common_word(store, p) for p in prepared]
            statements = {n: query("recall") for n in names}
            if "baseline" in names:
                statements["baseline"] = baseline
            runs = {n: (VARIANTS[n][0](statements[n]), VARIANTS[n][1], VARIANTS[n][2] or DEFAULT.ef_search)
                    for n in names}
            for params in prepared[:20]:  # warm the pages and the plans of every variant
                for statement, changes, ef in runs.values():
                    round_trip(store, statement, params | changes, ef, [])
            wall: dict[str, list[float]] = {n: [] for n in names}
            cpu: dict[str, list[float]] = {n: [] for n in names}
            agree: dict[str, list[float]] = {n: [] for n in names}
            order = itertools.cycle(range(len(names)))
            for _ in range(args.rounds):
                for params in prepared:
                    start = next(order)
                    tops = {}
                    for n in names[start:] + names[:start]:
                        statement, changes, ef = runs[n]
                        took, rows = common.timed(
                            lambda s=statement, p=params | changes, e=ef, c=cpu[n]: round_trip(store, s, p, e, c))
                        wall[n].append(took)
                        tops[n] = top_ids(rows)
                    for n in names:
                        baseline = tops[names[0]]
                        agree[n].append(len(set(tops[n]) & set(baseline)) / max(len(baseline), 1))
        finally:
            with store.db.connection() as conn:
                conn.autocommit = True
                for name in [] if args.keep_full else built:
                    conn.execute(f"DROP INDEX IF EXISTS {name}")
        sizes = common.relation_sizes(store)

    picked = [c for _ in range(args.rounds) for c in common_words]
    rows = []
    for n in names:
        row: list[Any] = [n]
        for values in (wall[n], cpu[n]):
            for subset in (None, True, False):
                chosen = [v for v, c in zip(values, picked, strict=True) if subset is None or c == subset]
                row += [common.percentile(chosen, 50), common.percentile(chosen, 95)] if chosen else ["", ""]
        row.append(sum(agree[n]) / len(agree[n]))
        rows.append(row)
    common.print_table(
        f"Recall round trip by variant, {args.size:,} memories, {len(questions)} questions x {args.rounds} "
        f"({sum(common_words)} common-word), interleaved; ms",
        ["variant", "wall p50", "wall p95", "common p50", "common p95", "rare p50", "rare p95",
         "CPU p50", "CPU p95", "CPU common p50", "CPU common p95", "CPU rare p50", "CPU rare p95",
         f"top-10 agreement with {names[0]}"], rows)
    common.print_table("Sizes (MB)", ["relation", "MB"], sizes)


if __name__ == "__main__":
    main()
