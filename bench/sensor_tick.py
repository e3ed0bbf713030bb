"""One watermark-sensor tick over 100 and 1,000 namespaces (target: < 1 s at 1,000).

For each size, a fresh database gets N namespaces with episodes and facts, every
checkpoint caught up, then new episodes in every 10th namespace (the backlog). Timed:

* **ours** — one full evaluation of ``watermark_sensor`` as the daemon runs it: open the
  store from ``StashResource``, the single ``stage_backlog`` query, one ``get_runs`` for
  in-flight partitions, the partition-existence check, run requests (capped at
  ``MAX_RUNS_PER_TICK``). Dagster's instance is ``instance_for_test`` (SQLite).
* **baseline** — the per-namespace way: list namespaces, then one query per
  (namespace, stage) reading its checkpoint and its source head (7 watermark stages),
  on one open connection.

Median of several evaluations each; prints a Markdown table with the ratio and writes
``bench/out/sensor_tick.png``. Uses ``STASH_DATABASE_URL`` when set (a role that may
create databases), otherwise an embedded server in a temporary STASH_HOME.

    python bench/sensor_tick.py [--sizes 100 1000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import fresh_store, log, print_table, ratio, save_plot, timed, writes_results
from stash_pipeline.db.sql import parse
from stash_pipeline.stages import backlog_parameters

SQL = parse((Path(__file__).parent / "sensor_tick.sql").read_text(encoding="utf-8"), "bench/sensor_tick.sql")
BACKLOG_EVERY = 10
PER_NAMESPACE = 5
TARGET_MS = 1000.0


def build(store: Any, n: int) -> int:
    """N namespaces with caught-up checkpoints, then backlog in every 10th; returns #namespaces with work."""
    vector = np.zeros(store.settings.vector_dim, dtype=np.float32)
    vector[0] = 1.0
    model = store.settings.embedding_model_name
    with store.db.connection() as conn:
        conn.execute(SQL["sensor_bench_namespaces"], {"n": n})
        conn.execute(SQL["sensor_bench_episodes"], {"embedding": vector, "model": model, "per": PER_NAMESPACE})
        conn.execute(SQL["sensor_bench_facts"], {"embedding": vector, "model": model, "per": PER_NAMESPACE})
        conn.commit()
    # Catch every stage up, idle ones included (patterns' head is the relationships cursor,
    # hence the second pass).
    for _ in range(2):
        pending = store.db.all("stage_backlog", **backlog_parameters())
        with store.db.connection() as conn, conn.cursor() as cur:
            cur.executemany(
                SQL["sensor_bench_checkpoint"],
                [
                    {"namespace_id": r["namespace_id"], "stage": r["stage"], "cursor": r["head"],
                     "aux_cursor": r["aux_head"]}
                    for r in pending
                ],
            )
            conn.commit()
    with store.db.connection() as conn:
        cur = conn.execute(SQL["sensor_bench_backlog"], {"embedding": vector, "model": model, "every": BACKLOG_EVERY})
        made = cur.rowcount
        conn.execute("ANALYZE")
        conn.commit()
    return made


def ours(store: Any, instance: Any, repeats: int) -> tuple[list[float], int, int]:
    """Timings (ms) of full sensor evaluations; #namespaces with work; #run requests per tick."""
    import dagster as dg

    from stash_pipeline.defs import sensors
    from stash_pipeline.defs.resources import StashResource

    stash = StashResource(
        database_url=store.settings.database_url,
        home=str(store.settings.home),
        embedder="hash",
        openai_base_url="http://127.0.0.1:9/v1",  # never called: only makes model stages count
        reasoner_model="bench",
    )
    rows, blocker = sensors.read_backlog(stash)
    found = len(sensors.pending_work(rows, stages=sensors.WATERMARK_STAGES, model_ready=not blocker))
    times: list[float] = []
    requests = 0
    for _ in range(repeats + 1):
        ms, result = timed(
            lambda: sensors.watermark_sensor(
                dg.build_sensor_context(instance=instance, cursor=None, resources={"stash": stash})
            )
        )
        times.append(ms)
        requests = len(result.run_requests or [])
    return times[1:], found, requests  # the first tick warms imports and the pool code


def baseline(store: Any, repeats: int) -> tuple[list[float], int]:
    """Timings (ms) of the per-(namespace, stage) way; #namespaces with work."""
    from stash_pipeline.stages import STAGES

    watched = [s for s in STAGES if s.watermarked]
    times: list[float] = []
    found = 0
    with store.db.connection() as conn:
        for _ in range(repeats):

            def tick() -> int:
                with_work = set()
                for ns in conn.execute(SQL["sensor_bench_all_namespaces"]).fetchall():
                    for spec in watched:
                        row = conn.execute(
                            SQL["sensor_bench_stage_state"],
                            {"namespace_id": ns["id"], "stage": spec.name, "source": spec.source},
                        ).fetchone()
                        if row and row["head"] > row["cursor"]:
                            with_work.add(ns["slug"])
                conn.commit()
                return len(with_work)

            ms, found = timed(tick)
            times.append(ms)
    return times, found


@writes_results
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)

    import dagster as dg

    warnings.filterwarnings("ignore", category=dg.PreviewWarning)
    results: list[dict[str, Any]] = []
    for n in args.sizes:
        with fresh_store(embedder="hash") as store:
            log(f"{n} namespaces: building")
            backlog = build(store, n)
            with dg.instance_for_test() as instance:
                log(f"{n} namespaces: timing the sensor ({args.repeats} ticks)")
                our_ms, our_found, requests = ours(store, instance, args.repeats)
            log(f"{n} namespaces: timing the baseline")
            base_ms, base_found = baseline(store, max(3, args.repeats // 2))
        results.append(
            {
                "n": n,
                "backlog": backlog,
                "ours": statistics.median(our_ms),
                "ours_found": our_found,
                "requests": requests,
                "baseline": statistics.median(base_ms),
                "baseline_found": base_found,
            }
        )

    print_table(
        "Watermark sensor: one tick (median ms)",
        ["namespaces", "with backlog", "found (ours / baseline)", "run requests", "ours ms", "baseline ms",
         "ours / baseline", "target < 1 s"],
        [
            [r["n"], r["backlog"], f"{r['ours_found']} / {r['baseline_found']}", r["requests"], r["ours"],
             r["baseline"], ratio(r["ours"], r["baseline"]), "yes" if r["ours"] < TARGET_MS else "NO"]
            for r in results
        ],
    )

    def draw(ax: Any) -> None:
        x = np.arange(len(results))
        ax.bar(x - 0.2, [r["ours"] for r in results], 0.4, label="ours: one stage_backlog query + one get_runs")
        ax.bar(x + 0.2, [r["baseline"] for r in results], 0.4, label="baseline: one query per (namespace, stage)")
        ax.axhline(TARGET_MS, color="red", linestyle="--", linewidth=1, label="target (1 s at 1,000)")
        ax.set_xticks(x, [f"{r['n']:,} namespaces" for r in results])
        ax.set_ylabel("one sensor tick, median ms")
        ax.set_yscale("log")
        ax.set_title("Watermark sensor tick")
        ax.legend(fontsize=8)

    save_plot("sensor_tick", draw)
    return 0 if all(r["ours"] < TARGET_MS for r in results if r["n"] >= 1000) else 1


if __name__ == "__main__":
    sys.exit(main())
