"""Peak memory of a table export (or, with ``--restore``, of importing it back), measured in
a process of its own.

    python -m tests.support.export_rss DSN OUT_DIR [--fill N] [--with-vectors] [--format parquet] [--chunk ROWS]
    python -m tests.support.export_rss DSN OUT_DIR --restore [--with-vectors]

``--restore`` imports ``OUT_DIR/export`` (written by a first run) under ``/restored``
through the import writer and reports the same figures for the import.

``--fill N`` first loads N episodes into ``/bench`` of the (throwaway, migrated) database
at DSN with one server-side INSERT … SELECT over generate_series, after dropping the
vector and full-text indexes (an export never uses them and maintaining them would make
the fill take minutes). Each episode has ~200 characters of text, metadata and a
384-dimension vector. Then the export runs and one JSON line is printed: rows, seconds,
the resident set size before the export (after imports and a warm-up) and the process's
peak, and ``python_peak_mb``: the peak of memory allocated through Python (tracemalloc)
during the export alone. The last is the figure to hold a bound against: the RSS peak
also counts the warm-up and whatever the allocator keeps, and varies with both.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
import tracemalloc
from pathlib import Path

import psycopg


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def fill(dsn: str, episodes: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP INDEX IF EXISTS episodes_embedding_key_hnsw")
        conn.execute("DROP INDEX IF EXISTS episodes_search_gin")
        conn.execute("INSERT INTO namespaces (slug) VALUES ('/bench') ON CONFLICT DO NOTHING")
        conn.execute(
            "INSERT INTO episodes (namespace_id, content, metadata, embedding, embedding_model, occurred_at) "
            "SELECT n.id, 'episode ' || g || ': ' || repeat(md5(g::text), 6), jsonb_build_object('n', g), "
            "array_fill((g %% 97) / 97.0, ARRAY[384])::vector, 'hash-384', now() - g * interval '1 second' "
            "FROM namespaces n, generate_series(1, %s) g WHERE n.slug = '/bench'",
            (episodes,),
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dsn")
    parser.add_argument("out", type=Path)
    parser.add_argument("--fill", type=int, default=0)
    parser.add_argument("--with-vectors", action="store_true")
    parser.add_argument("--format", default="parquet")
    parser.add_argument("--chunk", type=int, default=0, help="rows per chunk (default: the library's)")
    parser.add_argument("--restore", action="store_true", help="import OUT_DIR/export instead of exporting")
    args = parser.parse_args()
    if args.fill:
        fill(args.dsn, args.fill)

    from stash_pipeline.config import load_settings
    from stash_pipeline.interchange import export, readers
    from stash_pipeline.store import Store

    store = Store.open(load_settings(database_url=args.dsn, embedder="hash", vector_dim=384))
    try:
        if not args.restore:
            export.export_tables(store, "/", args.out / "warm-up", format=args.format)  # imports, pool, caches
        baseline = _rss_mb()
        tracemalloc.start()
        started = time.monotonic()
        if args.restore:
            result = readers.import_export(store, args.out / "export", into="/restored",
                                           with_vectors=args.with_vectors)
            manifest = {"tables": {"episodes": {"rows": result["rows"].get("episodes", 0)}}}
        else:
            manifest = export.export_tables(store, "/bench", args.out / "export", format=args.format,
                                            with_vectors=args.with_vectors,
                                            chunk_rows=args.chunk or export.CHUNK_ROWS)
        seconds = time.monotonic() - started
        python_peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    finally:
        store.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"rows": manifest["tables"]["episodes"]["rows"], "seconds": round(seconds, 1),
                      "baseline_rss_mb": round(baseline, 1), "peak_rss_mb": round(peak, 1),
                      "python_peak_mb": round(python_peak, 1)}))


if __name__ == "__main__":
    main()
