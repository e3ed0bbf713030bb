"""Where a recall's time goes, step by step: the path before one round trip vs the current one.

Used by ``python -m bench.recall_latency`` (the "Recall steps" table). Both paths answer
the same ``recall_results`` call (limit 10, one context turn each side, a namespace scope,
so the scope lookup is real), query by query in turn, on the same data and connection pool.

* **before** — the statements as they ran before recall became one round trip, kept
  verbatim in bench/queries.sql (``bench_before_*``) and sent in the old order: the scope
  lookup (its own transaction), the query embedding, then in one transaction the entity
  names, the entity facts (when a name matched) and the settings + hybrid statement
  (pipelined), then the neighbours (a third transaction), then fusion and shaping in
  Python.
* **after** — what ``recall.recall_results`` does now: one pipelined round trip
  (``recall_search_params`` + ``recall_check`` + ``recall``: the cached query vector,
  scope, entity leg, hybrid, fusion, neighbours), grouping (``recall_grouping.group``:
  the ``limit + overfetch`` candidates folded into ``limit`` results) and shaping once.

"Same results" compares the two answers' ids in order with grouping off (the path before
had no grouping, and the grouped answer folds sources into facts); the count with grouping
on is given beside it.

Every query was seen before, so its vector is in the embedding cache: before, the
embedder's own lookup (a transaction of its own); after, a primary-key probe inside the
recall statement.
"""

from __future__ import annotations

from typing import Any

from bench import common

BEFORE_STEPS = ("scope", "embedding", "entity names", "entity facts", "settings + hybrid", "neighbours", "shaping")
AFTER_STEPS = ("one round trip", "grouping", "shaping")


def _fuse(rows: list[dict[str, Any]], entity_rows: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The fusion recall did in Python before (hybrid rows + entity rows, best ``limit``)."""
    if not entity_rows:
        return rows
    by_key: dict[tuple[str, int], dict[str, Any]] = {(r["kind"], int(r["id"])): dict(r) for r in rows}
    for entity_row in entity_rows:
        key = ("fact", int(entity_row["id"]))
        found = by_key.get(key)
        if found is None:
            by_key[key] = {**entity_row, "entity_score": entity_row["score"]}
        else:
            found["entity_score"] = entity_row["score"]
            found["score"] = max(float(found["score"]), float(entity_row["score"]))
    ranked = sorted(by_key.values(), key=lambda r: (-float(r["score"]), r["kind"], -int(r["id"])))
    return ranked[:limit]


def before(store: Any, query: str, namespace: str, *, limit: int = 10, context: int = 1) -> tuple[dict[str, float], Any]:
    """The old path's steps (ms each) and its answer."""
    from stash_pipeline.memory import recall
    from stash_pipeline.memory.recall_config import DEFAULT
    from stash_pipeline.memory.scope import read_scope

    ms: dict[str, float] = {}
    ms["scope"], (all_ns, ids) = common.timed(lambda: _in_transaction(store, lambda tx: read_scope(tx, namespace)))
    ms["embedding"], vector = common.timed(lambda: store.embedder.embed_one(query))
    params = recall.recall_parameters(query, [namespace], vector, limit=limit, as_of=None, known_at=None,
                                      include_history=False, use_vector=True, use_text=True, context=0,
                                      config=DEFAULT) | {"all_namespaces": all_ns, "namespace_ids": ids}
    with store.db.transaction() as tx:
        conn = tx.conn
        ms["entity names"], named = common.timed(
            lambda: conn.execute(common.sql("bench_before_recall_entity_names"), params).fetchall()
            if params["phrases"] else [])
        ms["entity facts"], found = common.timed(
            lambda: conn.execute(common.sql("bench_before_recall_entity_facts"), params | {
                "entity_ids": [int(r["entity_id"]) for r in named], "aliases": [r["aliases"] for r in named],
            }).fetchall() if named else [])

        def hybrid() -> list[dict[str, Any]]:
            with conn.pipeline():
                conn.execute(common.sql("bench_before_recall_search_params"), {"ef_search": str(DEFAULT.ef_search)})
                return conn.execute(common.sql("bench_before_recall_hybrid"), params).fetchall()

        ms["settings + hybrid"], rows = common.timed(hybrid)
    # (the commit belongs to the hybrid step: it is the same transaction's last wait)

    def neighbours() -> dict[int, list[dict[str, Any]]]:
        episode_ids = [int(r["id"]) for r in _fuse(rows, found, limit) if r["kind"] == "episode"]
        around: dict[int, list[dict[str, Any]]] = {}
        if episode_ids:
            with store.db.transaction() as tx:
                for row in tx.conn.execute(common.sql("bench_before_recall_neighbours"),
                                           {"ids": episode_ids, "window": context}).fetchall():
                    if int(row["id"]) not in episode_ids:
                        around.setdefault(int(row["hit_id"]), []).append({"id": int(row["id"]),
                                                                          "content": row["content"]})
        return around

    ms["neighbours"], around = common.timed(neighbours)
    ms["shaping"], answer = common.timed(lambda: recall.shape_results(
        [(h, around.get(h.id, []) if h.kind == "episode" else []) for h in map(recall.to_hit, _fuse(rows, found, limit))],
        budget=None, score_parts=False))
    return ms, answer


def after(store: Any, query: str, namespace: str, *, limit: int = 10, context: int = 1,
          config: Any = None) -> tuple[dict[str, float], Any]:
    """The current path's steps (ms each) and its answer, as ``recall.recall_results`` runs them."""
    from stash_pipeline.embedding.cache import query_key
    from stash_pipeline.memory import recall, recall_grouping
    from stash_pipeline.memory.recall_config import DEFAULT

    config = config or DEFAULT
    ms: dict[str, float] = {}
    embedder = store.embedder
    params = recall.recall_parameters(query, [namespace], None, limit=limit, as_of=None, known_at=None,
                                      include_history=False, use_vector=True, use_text=True, context=context,
                                      config=config) | {
        "text_hash": query_key(query, [namespace]), "embedding_model": embedder.name, "embedding_endpoint": embedder.endpoint}
    ms["one round trip"], (needs_vector, rows) = common.timed(lambda: recall.round_trip(store, params, config))
    assert not needs_vector, "the bench's queries are in the embedding cache"
    ms["grouping"], ranked = common.timed(lambda: recall_grouping.group(
        [(recall.to_hit(r), r["context"] or []) for r in rows], limit, recall_grouping.source_rows(rows), config))
    ms["shaping"], answer = common.timed(lambda: recall.shape_results(ranked, budget=None, score_parts=False))
    return ms, answer


def _ids(answer: dict[str, Any]) -> list[tuple[str, int]]:
    return [(r["kind"], r["id"]) for r in answer["results"]]


def _in_transaction(store: Any, fn: Any) -> Any:
    with store.db.transaction() as tx:
        return fn(tx)


def steps_table(store: Any, questions: list[str], namespace: str) -> dict[str, dict[str, float]]:
    """Both paths on every question, in turn; prints each step's p50, p95 and share of the mean total."""
    old: dict[str, list[float]] = {s: [] for s in (*BEFORE_STEPS, "total")}
    new: dict[str, list[float]] = {s: [] for s in (*AFTER_STEPS, "total")}
    from stash_pipeline.memory.recall_config import VARIANTS

    same = same_grouped = 0
    for q in questions:
        answers = []
        for steps, path in ((old, before), (new, after)):
            ms, answer = path(store, q, namespace)
            answers.append(answer)
            for name, value in ms.items():
                steps[name].append(value)
            steps["total"].append(sum(ms.values()))
        ungrouped = after(store, q, namespace, config=VARIANTS["no_grouping"])[1]  # (untimed)
        first, grouped = answers
        same += _ids(ungrouped) == _ids(first)
        same_grouped += _ids(grouped) == _ids(first)
    rows = []
    for label, steps in (("before", old), ("after", new)):
        total = sum(steps["total"])
        for name, values in steps.items():
            s = common.summarize(values)
            rows.append([label, name, s["p50"], s["p95"], f"{100 * sum(values) / total:.0f}%"])
    common.print_table(
        f"Recall steps, recall_results over {namespace!r} (limit 10, context 1, embedding cached), "
        f"{len(questions)} queries, both paths in turn; same results on {same} of {len(questions)} with grouping off "
        f"({same_grouped} with it)",
        ["path", "step", "p50 ms", "p95 ms", "share of time"], rows)
    return {"before": common.summarize(old["total"]), "after": common.summarize(new["total"])}
