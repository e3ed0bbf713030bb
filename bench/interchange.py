"""Benchmark 11 — export then import of a namespace tree: the import writer's speed.

    python -m bench.interchange                 # 10,000 episodes (+1,000 facts with lineage)
    python -m bench.interchange --size 100000   # 100,000 episodes
    python -m bench.interchange --baseline-rev REV   # then the same run from revision REV

A fresh database gets N episodes (~200 characters, metadata, a 384-dimension vector) and
N/10 facts in ``/bench``, each fact with a lineage edge to an episode; the vector and
full-text indexes are dropped first (neither the fill nor the import maintains them: the
writer is what is measured). ``/bench`` is exported as Parquet with its vectors, then
imported through ``readers.import_export`` with vectors reused (rows validated, ids
remapped, references checked) by the writer as shipped: one ``INSERT … SELECT`` per chunk
and table (``interchange_insert_set``, migration 0014), under ``/after``.

Before vs now: ``--baseline-src DIR`` / ``--baseline-rev REV`` runs this bench again from
that older tree, same arguments, after this run (its bench on its code, in a subprocess).
The per-row writer (``interchange_insert`` once per row, dynamic SQL, migration 0004) is
the "before" step of revision ``78f2b16``'s run, the last whose bench timed it beside the
shipped one (44 minutes for 100,000 episodes on a loaded 2-core machine).

Printed per step: seconds, rows written per second, and memory: the process's resident
size sampled every 20 ms during the step, its peak and its growth over the step's start
(steps run in one process one after the other, so a later step's peak includes what the
allocator kept from an earlier one: read the growth).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import common


def _fill(store: Any, episodes: int) -> None:
    model = store.settings.embedding_model_name
    with store.db.connection() as conn:
        for row in conn.execute(common.sql("bench_interchange_indexes")).fetchall():
            conn.execute(f'DROP INDEX "{row["indexname"]}"')  # names read from pg_indexes
        conn.execute("INSERT INTO namespaces (slug) VALUES ('/bench')")
        conn.execute(common.sql("bench_interchange_fill_episodes"), {"episodes": episodes, "model": model})
        conn.execute(common.sql("bench_interchange_fill_facts"),
                     {"episodes": episodes, "facts": max(1, episodes // 10), "model": model})
        conn.commit()


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as handle:
        return next(int(line.split()[1]) / 1024 for line in handle if line.startswith("VmRSS:"))


def _step(name: str, run: Callable[[], int]) -> list[Any]:
    """Time one step; its memory is the resident size sampled every 20 ms (no tracing
    overhead on the time), given as the peak and as the growth over the step's start."""
    common.log(f"{name} …")
    start, peak, done = _rss_mb(), [0.0], threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            peak[0] = max(peak[0], _rss_mb())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    try:
        rows = run()
    finally:
        seconds = time.perf_counter() - started
        done.set()
        sampler.join()
    top = max(peak[0], _rss_mb())
    return [name, f"{rows:,}", f"{seconds:.1f}", f"{rows / seconds:,.0f}", f"{top:.0f} MB", f"+{top - start:.0f} MB"]


@common.writes_results
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000, help="episodes (facts: a tenth)")
    common.add_baseline_arguments(parser, common.RERUN)
    args = parser.parse_args(argv)
    common.measure_then_baseline(args, argv, "bench.interchange", lambda: measure(args))


def measure(args: argparse.Namespace) -> None:
    """The run: fill, export, import, the table."""

    from stash_pipeline.interchange import export, readers

    load = os.getloadavg()[0]
    results: list[list[Any]] = []
    with common.fresh_store("hash") as store, tempfile.TemporaryDirectory(prefix="stash-bench-") as tmp:
        common.log(f"fill: {args.size:,} episodes, {max(1, args.size // 10):,} facts")
        _fill(store, args.size)
        out = Path(tmp) / "export"

        def exported() -> int:
            manifest = export.export_tables(store, "/bench", out, with_vectors=True)
            return sum(int(t["rows"]) for t in manifest["tables"].values())

        def imported(into: str) -> Callable[[], int]:
            def run() -> int:
                result = readers.import_export(store, out, into=into, with_vectors=True)
                assert not result["problems"], result["problems"][:3]
                return sum(result["rows"].values())
            return run

        results.append(_step("export (Parquet, with vectors)", exported))
        results.append(_step("import, one INSERT per chunk", imported("/after")))
    print(f"\n{args.size:,} episodes, load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end\n")
    common.print_table("Export and import", ["step", "rows", "seconds", "rows/s", "RSS peak", "RSS growth"], results)


if __name__ == "__main__":
    main()
