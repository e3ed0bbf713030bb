"""Recall latency with and without grouping (recall/grouping.py), same run.

    python -m bench.grouping_latency            # 10,000 memories
    python -m bench.grouping_latency --large    # 100,000 memories

The fill of ``bench/recall_latency.py`` (episodes and facts by COPY, entities), plus
lineage: every fact rests on two episodes (``bench_lineage_fill``), so fact hits carry
source turns and grouping reads them. Queries: the agent-memory set's questions over all
namespaces, limit 10, embedding cached (each asked once to warm up). Each question is
asked through ``recall`` with grouping off (every hit its own slot, the query's ``limit``
= 10) and with the shipped grouping (``limit`` + overfetch candidates and the entity
leg's facts, ranked with the facts' weights, each fact's source turns in the same
statement, then folding and diversity), interleaved with alternating order, so machine load hits
both alike. Reports p50 / p95 / mean in ms and the ratio.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench import common, recall_latency


@common.writes_results
def main(argv: list[str] | None = None) -> None:
    from stash_pipeline import recall
    from stash_pipeline.memory import namespaces
    from stash_pipeline.recall.config import DEFAULT, VARIANTS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--large", action="store_true", help="100,000 memories")
    parser.add_argument("--rounds", type=int, default=2, help="passes over the questions")
    args = parser.parse_args(argv)
    size = 100_000 if args.large else args.size
    configs = {"grouping off": VARIANTS["no_grouping"], "grouping (shipped)": DEFAULT}
    with common.fresh_store("minilm") as store:
        questions, _ = recall_latency.fill(store, size, {})
        recall_latency.fill_entities(store, size)
        with store.db.transaction() as tx:
            namespace_id = namespaces.resolve_id(tx, recall_latency.NAMESPACE)
            tx.conn.execute(common.sql("bench_lineage_fill"), {"namespace_id": namespace_id})
            tx.conn.execute(common.sql("bench_entity_analyze"))
        common.log(f"filled {size:,} memories with lineage; warming up")
        for q in questions:
            recall.recall(store, q, ["/"], limit=10)
        times: dict[str, list[float]] = {name: [] for name in configs}
        with_sources = 0
        for round_ in range(args.rounds):
            for i, q in enumerate(questions):
                order = list(configs) if (i + round_) % 2 == 0 else list(reversed(configs))
                for name in order:
                    began = time.perf_counter()
                    hits: Any = recall.recall(store, q, ["/"], limit=10, config=configs[name])
                    times[name].append((time.perf_counter() - began) * 1000)
                    if configs[name].grouping:
                        with_sources += any(h.sources for h in hits)
        load = open("/proc/loadavg").read().split()[:3]
    base = times["grouping off"]
    rows = [[name, len(t), common.percentile(t, 50), common.percentile(t, 95), sum(t) / len(t),
             common.ratio(common.percentile(t, 95), common.percentile(base, 95))] for name, t in times.items()]
    common.print_table(f"Recall at {size:,} memories, embedding cached, limit 10, interleaved "
                       f"(load average {' '.join(load)} at the end)",
                       ["system", "calls", "p50 ms", "p95 ms", "mean ms", "p95 ratio"], rows)
    print(f"grouped answers carrying source turns: {with_sources} of {len(times['grouping (shipped)'])}")


if __name__ == "__main__":
    main()
