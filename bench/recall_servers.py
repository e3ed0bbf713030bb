"""Recall latency on the embedded server and on a PostgreSQL server with stock settings, side by side.

    python -m bench.recall_servers --server postgresql://stash:stash@127.0.0.1:55432/postgres
    python -m bench.recall_servers --server URL --size 100000

``--server`` is a role that may create databases on a server as its package or image
ships it (``pgvector/pgvector:pg17``: JIT on, 128 MB of shared buffers). Both servers get
``bench.recall_latency``'s fill (10,000 memories by default) and the same questions, asked
in turn on one and the other, the embedding cached: recall end to end and its round trip
alone. Then, on each, what a new pooled connection costs before it serves (connect,
session settings, the recall statements prepared), and as the baseline the server with
its own JIT setting left on (what Stash did before it set JIT off per session): the
first connection and a few recalls.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator
from typing import Any

import psycopg

from bench import common, recall_latency

#: recalls measured with the server's JIT on: each takes seconds
JIT_RECALLS = 3
#: new connections opened per server to time the first-connection cost
CONNECTIONS = 5


@contextlib.contextmanager
def server_jit_left_on() -> Iterator[None]:
    """Stash's session settings with JIT as the server has it (on, on a stock server)."""
    from stash_pipeline.db import gateway

    named = gateway.query
    gateway.query = lambda name: "SELECT 'jit' AS jit" if name == "session_settings" else named(name)
    try:
        yield
    finally:
        gateway.query = named


def first_connection_ms(store: Any) -> float:
    """Connect, session settings and the recall statements prepared, on a new pool's first connection."""
    from stash_pipeline.recall.statement import prepare_on_connect
    from stash_pipeline.store import Store

    fresh = Store.open(store.settings, pool_max=1)
    prepare_on_connect(fresh)
    try:
        return common.timed(fresh.db.ping)[0]
    finally:
        fresh.close()


def jit_baseline(store: Any, questions: list[str]) -> tuple[float, list[float]]:
    """The first connection and ``JIT_RECALLS`` cached recalls with the server's JIT on."""
    from stash_pipeline import recall
    from stash_pipeline.recall.statement import prepare_on_connect
    from stash_pipeline.store import Store

    with server_jit_left_on():
        fresh = Store.open(store.settings, pool_max=1, timeout=300)  # compiling takes many seconds
        prepare_on_connect(fresh)
        try:
            first = common.timed(fresh.db.ping)[0]
            with fresh.db.connection() as conn:
                assert conn.execute("SHOW jit").fetchone()["jit"] == "on", "the server has JIT off: no baseline"
                conn.commit()
            return first, [common.timed(lambda q=q: recall.recall(fresh, q, ["/"], limit=10))[0]
                           for q in questions[:JIT_RECALLS]]
        finally:
            fresh.close()


@common.writes_results
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", required=True, metavar="URL",
                        help="a PostgreSQL server with pgvector (a role that may create databases)")
    parser.add_argument("--size", type=int, default=10_000, help="memories on each server (default 10000)")
    parser.add_argument("--embedder", default="minilm-int8", help="query embedder (default minilm-int8)")
    args = parser.parse_args(argv)

    from stash_pipeline import recall

    with (common.fresh_store(args.embedder, server_url="") as embedded,
          common.fresh_store(args.embedder, server_url=args.server) as server):
        stores = {"embedded": embedded, "server": server}
        versions = {}
        questions: list[str] = []
        for name, store in stores.items():
            questions, vectors = recall_latency.fill(store, args.size, {})
            with psycopg.connect(store.db.dsn) as plain:  # the server's defaults, not Stash's session
                v, sb, jit = plain.execute("SELECT current_setting('server_version'), current_setting('shared_buffers'),"
                                           " CASE WHEN pg_jit_available() THEN 'JIT on' ELSE 'no JIT' END").fetchone()
            versions[name] = f"PostgreSQL {v}, shared_buffers {sb}, {jit} by default"
            for q in questions:  # each query embedded once and cached, plans and buffers warm
                recall.recall(store, q, ["/"], limit=10)
        params = {name: [recall_latency.hybrid_params(store, q, v) for q, v in zip(questions, vectors, strict=True)]
                  for name, store in stores.items()}
        cached: dict[str, list[float]] = {name: [] for name in stores}
        sql: dict[str, list[float]] = {name: [] for name in stores}
        began = time.strftime("%H:%M", time.gmtime())
        for i, q in enumerate(questions):  # in turn, so both see the same machine load
            for name, store in stores.items():
                cached[name].append(common.timed(lambda q=q, s=store: recall.recall(s, q, ["/"], limit=10))[0])
                sql[name].append(common.timed(lambda p=params[name][i], s=store: recall_latency.recall_sql(s, p))[0])
        connect = {name: [first_connection_ms(store) for _ in range(CONNECTIONS)] for name, store in stores.items()}
        jit_first, jit_recalls = jit_baseline(server, questions)

    rows = []
    for label, values in (("recall end to end, embedding cached", cached), ("the recall round trip (SQL)", sql)):
        for p in (50, 95):
            a, b = common.percentile(values["embedded"], p), common.percentile(values["server"], p)
            rows.append([f"{label} (p{p} ms)", a, b, common.ratio(b, a)])
    a, b = common.percentile(connect["embedded"], 50), common.percentile(connect["server"], 50)
    rows.append([f"a new connection until it serves, p50 of {CONNECTIONS} (ms)", a, b, common.ratio(b, a)])
    rows.append(["baseline, the server's JIT left on: a new connection (ms)", "", jit_first, common.ratio(jit_first, b)])
    rows.append([f"baseline, the server's JIT left on: {JIT_RECALLS} recalls, median (ms)", "",
                 common.percentile(jit_recalls, 50),
                 common.ratio(common.percentile(jit_recalls, 50), common.percentile(cached["server"], 50))])
    common.print_table(
        f"Recall on two servers, {args.size:,} memories, {len(questions)} questions asked in turn "
        f"({began} UTC): embedded = {versions['embedded']}; server = {versions['server']}",
        ["measure", "embedded", "server", "server / embedded"], rows)


if __name__ == "__main__":
    main()
