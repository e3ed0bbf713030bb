"""Retrieval quality on the conversational set (bench/data/conversations.py): loading,
baselines and per-kind scores. Used by ``python -m bench.retrieval_quality``.

Loading mirrors an import of a chat history: one episode per turn, content
``"Name: text"``, ``occurred_at`` = the session date, ``metadata.dia_id`` = the turn id,
one namespace per conversation, turns in order (so ids follow the conversation).

Systems, all asked with limit 10 in the question's namespace:

* ``bm25``        — Okapi BM25 (k1 = 1.2, b = 0.75) in Python over the same texts, tokenised
  by Postgres full text (the lexemes the database stores);
* ``minmax_mix``  — 0.5 * min-max(MiniLM cosine) + 0.5 * min-max(BM25) over every turn, in
  Python (the usual "hybrid" recipe);
* ``vector``      — ``recall(mode="vector")``;
* ``recall``      — ``recall()`` as shipped.

An older recall is an older revision's run: ``retrieval_quality --baseline-rev REV``.

recall@k = the share of a question's evidence turns in the top k; MRR uses the first one.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any

import numpy as np

from bench import common

KINDS = ("single_hop", "multi_hop", "temporal", "inferential")
SYSTEMS = ("bm25", "minmax_mix", "vector", "recall")
LIMIT = 10
BM25_K1 = 1.2
BM25_B = 0.75

Key = tuple[str, str]  # (namespace, dia_id)


def load(store: Any, data: dict[str, list[dict[str, Any]]]) -> dict[int, Key]:
    """Import every turn; returns episode id -> (namespace, dia_id)."""
    from stash_pipeline.memory import episodes, namespaces

    texts = [t["content"] for t in data["turns"]] + [q["query"] for q in data["questions"]]
    common.prime_embedding_cache(store, texts, common.dataset_vectors(texts))
    by_namespace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for turn in data["turns"]:
        by_namespace[turn["namespace"]].append(turn)
    keys: dict[int, Key] = {}
    for slug, turns in by_namespace.items():
        namespaces.create(store, slug)
        for start in range(0, len(turns), 500):
            chunk = turns[start : start + 500]
            items = [{"content": t["content"], "occurred_at": t["occurred_at"], "metadata": {"dia_id": t["dia_id"]}}
                     for t in chunk]
            for turn, result in zip(chunk, episodes.remember_batch(store, slug, items), strict=True):
                keys[int(result.id)] = (slug, turn["dia_id"])
    return keys


class PythonBaselines:
    """Okapi BM25 and the min-max cosine + BM25 mix, over every turn of a namespace."""

    def __init__(self, store: Any, data: dict[str, list[dict[str, Any]]], keys: dict[int, Key]) -> None:
        self.store = store
        with store.db.transaction() as tx:
            rows = tx.conn.execute(common.sql("bench_episode_lexemes")).fetchall()
        docs: dict[int, Counter[str]] = defaultdict(Counter)
        for r in rows:
            docs[int(r["id"])][r["lexeme"]] = int(r["n"])
        ids_by_namespace: dict[str, list[int]] = defaultdict(list)
        for episode_id in sorted(keys):
            ids_by_namespace[keys[episode_id][0]].append(episode_id)
        self.keys = keys
        self.ids = ids_by_namespace
        self.docs = docs
        self.df = {ns: Counter(lex for i in ids for lex in docs[i]) for ns, ids in ids_by_namespace.items()}
        self.average = {ns: sum(sum(docs[i].values()) for i in ids) / len(ids) for ns, ids in ids_by_namespace.items()}
        content = {t["namespace"] + t["dia_id"]: t["content"] for t in data["turns"]}
        vectors = common.dataset_vectors([content[ns + dia] for ns, dia in (keys[i] for i in sorted(keys))])
        self.vector = dict(zip(sorted(keys), vectors, strict=True))

    def bm25(self, namespace: str, query: str) -> np.ndarray:
        with self.store.db.transaction() as tx:
            found = tx.conn.execute(common.sql("bench_text_lexemes"), {"text": query}).fetchall()
        terms = [r["lexeme"] for r in found]
        ids, df, n = self.ids[namespace], self.df[namespace], len(self.ids[namespace])
        scores = np.zeros(len(ids))
        for j, episode_id in enumerate(ids):
            doc = self.docs[episode_id]
            length = sum(doc.values())
            for term in terms:
                tf = doc.get(term, 0)
                if tf:
                    idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                    scores[j] += idf * tf * (BM25_K1 + 1) / (
                        tf + BM25_K1 * (1 - BM25_B + BM25_B * length / self.average[namespace]))
        return scores

    def rank(self, system: str, namespace: str, query: str, query_vector: np.ndarray) -> list[int]:
        ids = self.ids[namespace]
        bm25 = self.bm25(namespace, query)
        if system == "bm25":
            order = np.argsort(-bm25, kind="stable")
        else:
            cosine = np.array([float(self.vector[i] @ query_vector) for i in ids])

            def minmax(x: np.ndarray) -> np.ndarray:
                return (x - x.min()) / (x.max() - x.min()) if x.max() > x.min() else np.zeros_like(x)

            order = np.argsort(-(0.5 * minmax(cosine) + 0.5 * minmax(bm25)), kind="stable")
        return [ids[j] for j in order[:LIMIT]]


def assert_facts(store: Any, data: dict[str, list[dict[str, Any]]], keys: dict[int, Key]) -> dict[int, str]:
    """Assert the set's derived facts as a caller would: ``assert_fact`` with
    ``source_episode_ids`` = the cited turns and ``valid_from`` = the session date.

    Returns fact id -> fact key.
    """
    from stash_pipeline.memory import facts, validate

    texts = [f["content"] for f in data["facts"]]
    common.prime_embedding_cache(store, texts, common.dataset_vectors(texts))
    episode_of = {key: episode_id for episode_id, key in keys.items()}
    out: dict[int, str] = {}
    for fact in data["facts"]:
        result = facts.assert_fact(
            store, fact["namespace"], fact["content"], entity=fact["entity"], property=fact["property"],
            value=fact["value"], valid_from=validate.timestamp(fact["valid_from"], "valid_from"),
            source_episode_ids=[episode_of[(fact["namespace"], d)] for d in fact["evidence"]])
        out[int(result.fact.id)] = fact["key"]
    return out


def score(covers: list[set[Key]], evidence: set[Key], facts: list[bool] | None = None,
          cited: set[Key] | None = None) -> dict[str, float]:
    """Scores of one ranked answer; ``covers[i]`` = the evidence turns result i shows (an
    episode hit itself; a fact hit its source turns), ``facts[i]`` = result i is a fact.
    With ``cited`` (the turns some fact cites), the evidence missed in the top 10 split into
    turns a fact cites (``missed_cited``: the fact did not rank) and turns none does."""
    covers = covers[:LIMIT]
    facts = (facts or [False] * len(covers))[:LIMIT]
    out = {}
    for k in (5, 10):
        found = set().union(*covers[:k]) if covers else set()
        out[f"r@{k}"] = len(evidence & found) / len(evidence)
    first = next((i for i, cover in enumerate(covers) if cover & evidence), None)
    out["mrr"] = 0.0 if first is None else 1.0 / (first + 1)
    out["fact_share"] = sum(facts) / len(covers) if covers else 0.0
    through_episodes = set().union(*(c for c, f in zip(covers, facts, strict=True) if not f)) if covers else set()
    out["r@10_episodes"] = len(evidence & through_episodes) / len(evidence)
    if cited is not None:
        missed = evidence - set().union(*covers)
        out["missed_cited"] = len(missed & cited) / len(evidence)
        out["missed_uncited"] = len(missed - cited) / len(evidence)
    return out


def result_covers(result: dict[str, Any], keys: dict[int, Key]) -> set[Key]:
    """The evidence turns a result of the recall tool's answer shows: itself, or a fact's
    source turns (its ``sources``, or ``source_episode_ids`` when they are not all sent)
    and those of the facts folded into it as saying it again (``repeated_in``)."""
    if result["kind"] == "episode":
        return {keys[result["id"]]}
    ids = ([s["id"] for s in (*result.get("sources", ()), *result.get("repeated_in", ()))]
           + result.get("source_episode_ids", []))
    return {keys[i] for i in ids if i in keys}


def aggregate(rows: list[dict[str, float]]) -> dict[str, float]:
    """Means of per-question scores (each over the questions that have it), plus ``n``."""
    if not rows:
        return {}
    keys = {k for r in rows for k in r}
    return {k: sum(r[k] for r in rows if k in r) / sum(1 for r in rows if k in r) for k in keys} | {"n": len(rows)}


def tokens(per_kind: dict[str, list[dict[str, float]]]) -> tuple[float, float]:
    """Mean and p95 of the answers' tokens, every question once (recall systems only)."""
    sent = [r["tokens"] for kind, rows in per_kind.items() if kind != "list" for r in rows if "tokens" in r]
    return (sum(sent) / len(sent), float(np.percentile(sent, 95))) if sent else (math.nan, math.nan)


def overall(per_kind: dict[str, list[dict[str, float]]]) -> dict[str, float]:
    """Every question once (the ``"list"`` bucket repeats questions of other kinds)."""
    return aggregate([r for kind, rows in per_kind.items() if kind != "list" for r in rows])


def evaluate(
    store: Any, questions: list[dict[str, Any]], keys: dict[int, Key], baselines: PythonBaselines, system: str,
    config: Any = None, cited: set[Key] | None = None,
) -> dict[str, list[dict[str, float]]]:
    """Per-kind lists of per-question scores of one system (``config``: a ``RecallConfig``,
    default as shipped; plus ``"list"``: the questions that gather a person's threads, also
    counted in their kind; ``cited``: see ``score``). The recall systems are scored on the
    tool's answer at its defaults (limit 10, one turn of context), and ``tokens`` is that
    answer serialised as sent, in ``max_tokens`` units."""
    from stash_pipeline import recall
    from stash_pipeline.recall.config import DEFAULT
    from stash_pipeline.recall.shape import serialised_tokens

    query_vectors = common.dataset_vectors([q["query"] for q in questions])
    out: dict[str, list[dict[str, float]]] = defaultdict(list)
    for q, vector in zip(questions, query_vectors, strict=True):
        ns = q["namespace"]
        if system in ("bm25", "minmax_mix"):
            covers = [{keys[i]} for i in baselines.rank(system, ns, q["query"], vector)]
            is_fact = None
        else:
            mode = {"vector": "vector", "text": "text"}.get(system, "hybrid")
            answer = recall.recall_results(store, q["query"], [ns], limit=LIMIT, mode=mode, config=config or DEFAULT)
            covers = [result_covers(r, keys) for r in answer["results"]]
            is_fact = [r["kind"] == "fact" for r in answer["results"]]
        scores = score(covers, {(ns, d) for d in q["evidence"]}, is_fact, cited)
        if is_fact is not None:
            scores["tokens"] = float(serialised_tokens(answer))
        out[q["kind"]].append(scores)
        if q.get("shape") == "list":
            out["list"].append(scores)
    return out
