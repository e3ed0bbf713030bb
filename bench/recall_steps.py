"""Where a recall's time goes, step by step, on the current path.

Used by ``python -m bench.recall_latency`` (the "Recall steps" table): what
``recall.recall_results`` does (limit 10, one context turn each side, a namespace scope,
so the scope lookup is real), each step timed: one pipelined round trip
(``recall_search_params`` + ``recall_check`` + ``recall``: the cached query vector, scope,
entity leg, hybrid, fusion, neighbours), grouping (``recall_grouping.group``: the
``limit + overfetch`` candidates folded into ``limit`` results) and shaping once.

Every query is asked once in the scope first (untimed), so its vector is in the embedding
cache (a primary-key probe inside the recall statement). The table also counts the questions whose answer grouping
changed (their ids in order, grouping on vs off).

The path before recall became one round trip is not kept here: it is revision
``420b60c^`` (``python -m bench.recall_latency --baseline-rev 420b60c^``).
"""

from __future__ import annotations

from typing import Any

from bench import common

AFTER_STEPS = ("one round trip", "grouping", "shaping")


def after(store: Any, query: str, namespace: str, *, limit: int = 10, context: int = 1,
          config: Any = None) -> tuple[dict[str, float], Any]:
    """The current path's steps (ms each) and its answer, as ``recall.recall_results`` runs them."""
    from stash_pipeline import recall
    from stash_pipeline.recall import grouping as recall_grouping
    from stash_pipeline.recall.config import DEFAULT

    config = config or DEFAULT
    ms: dict[str, float] = {}
    request = recall.RecallRequest.of(store.settings, query, [namespace], limit=limit, context=context,
                                      config=config)
    params, _ = recall.prepared(store, request)
    ms["one round trip"], found = common.timed(lambda: recall.round_trip(store, params, config))
    assert not found.needs_vector, "the bench's queries are in the embedding cache"
    rows = found.rows
    ms["grouping"], ranked = common.timed(lambda: recall_grouping.group(
        [(recall.to_hit(r), r["context"] or []) for r in rows], limit, recall_grouping.source_rows(rows), config))
    ms["shaping"], answer = common.timed(lambda: recall.shape_results(ranked, budget=None, score_parts=False))
    return ms, answer


def _ids(answer: dict[str, Any]) -> list[tuple[str, int]]:
    return [(r["kind"], r["id"]) for r in answer["results"]]


def steps_table(store: Any, questions: list[str], namespace: str) -> dict[str, float]:
    """The current path on every question; prints each step's p50, p95 and share of the total."""
    from stash_pipeline import recall
    from stash_pipeline.recall.config import VARIANTS

    for q in questions:  # (untimed) each query's vector cached for this scope, as after a first recall
        recall.recall(store, q, [namespace])
    steps: dict[str, list[float]] = {s: [] for s in (*AFTER_STEPS, "total")}
    changed = 0
    for q in questions:
        ms, grouped = after(store, q, namespace)
        for name, value in ms.items():
            steps[name].append(value)
        steps["total"].append(sum(ms.values()))
        ungrouped = after(store, q, namespace, config=VARIANTS["no_grouping"])[1]  # (untimed)
        changed += _ids(grouped) != _ids(ungrouped)
    total = sum(steps["total"])
    rows = []
    for name, values in steps.items():
        s = common.summarize(values)
        rows.append([name, s["p50"], s["p95"], f"{100 * sum(values) / total:.0f}%"])
    common.print_table(
        f"Recall steps, recall_results over {namespace!r} (limit 10, context 1, embedding cached), "
        f"{len(questions)} queries; grouping changed the answer of {changed} of {len(questions)}",
        ["step", "p50 ms", "p95 ms", "share of time"], rows)
    return common.summarize(steps["total"])
