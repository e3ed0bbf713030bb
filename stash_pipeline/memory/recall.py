"""Recall: hybrid retrieval over current facts and episodes, ranked together.

Four candidate lists come back from ONE SQL statement (``recall_hybrid``): pgvector HNSW
cosine over facts and over episodes (ranked together by distance) and Postgres full text
over facts and over episodes (ranked together by ``ts_rank_cd``). The two rankings are
fused by weighted reciprocal rank fusion::

    rrf = W_VECTOR / (RRF_K + vector_rank) + W_TEXT / (RRF_K + text_rank)

so an exact identifier ("ERR-4521") found only by full text competes with a paraphrase
found only by the embedding, and neither facts nor episodes take every slot by kind (the
reference's "facts first" — kept as ``facts_first_recall`` for the benchmark baseline).

Retired facts are excluded unless asked (``include_history``, ``as_of``). HNSW is
searched with ``hnsw.ef_search`` = EF_SEARCH and iterative scans in relaxed order, so
namespace and validity filters applied during the scan still yield enough candidates.
Results never carry vectors.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from stash_pipeline import errors
from stash_pipeline.memory import validate
from stash_pipeline.memory.scope import read_scope
from stash_pipeline.models import RecallHit
from stash_pipeline.store import Store

# Fusion constants (module level so bench/ can tune them; see bench/ for the measurement).
# Chosen on the dev split of bench/data (325 questions, 2,300 episodes) and confirmed on
# the held-out test split: recall@10 0.954 vs 0.877 for k=60/w=1/"all" (bench/README.md §5).
RRF_K = 5
W_VECTOR = 1.0
W_TEXT = 1.5
#: share of W_TEXT a full-text hit gets when it matches only some of the query's terms
#: and none of its identifiers (one shared common word must not outvote the vector
#: ranking); chosen on the DEV split with the real query (bench/retrieval_quality.py)
W_TEXT_PARTIAL = 0.5
#: candidates per list = max(MIN_CANDIDATES, CANDIDATE_FACTOR * limit)
CANDIDATE_FACTOR = 3
MIN_CANDIDATES = 30
#: "all": a text candidate needs every query term (websearch_to_tsquery semantics);
#: "any": any stemmed query term (OR), ranked by cover density. On the 325-question
#: bench set, text-only recall@10 is 0.93 with "any" and 0.20 with "all" (natural
#: questions rarely share every word with the answer); every top dev setting used "any".
#: (On the 26-question tests/data/recall_small.jsonl, "all" was slightly better.)
TEXT_MATCH = "any"
#: ts_rank_cd normalisation bits (0 = none, 1 = divide by 1 + log(document length), ...)
TEXT_RANK_NORMALIZATION = 1
EF_SEARCH = 100
#: full-text matches ranked per kind at most (newest first), so latency stays flat when
#: thousands of rows share every query term (bench/recall_latency.py --large)
TEXT_SCAN_LIMIT = 400
LIMIT_DEFAULT = 10
LIMIT_MAX = 100
MODES = ("hybrid", "vector", "text")


def _limit(limit: Any) -> int:
    if limit is None:
        return LIMIT_DEFAULT
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= LIMIT_MAX:
        raise errors.InvalidInput(f"limit must be an integer between 1 and {LIMIT_MAX}")
    return limit


def _max_tokens(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise errors.InvalidInput("max_tokens must be a positive integer")
    return value


def estimate_tokens(text: str) -> int:
    """Rough token count (≈ 4 characters per token), used for the max_tokens budget."""
    return max(1, (len(text) + 3) // 4)


def _within_budget(hits: list[RecallHit], max_tokens: int | None) -> list[RecallHit]:
    if max_tokens is None:
        return hits
    out: list[RecallHit] = []
    spent = 0
    for hit in hits:
        cost = estimate_tokens(hit.content)
        if spent + cost > max_tokens:
            break  # keep rank order: never let a shorter, lower-ranked hit jump the queue
        spent += cost
        out.append(hit)
    return out


def recall(
    store: Store,
    query: str,
    namespaces: Any = "/",
    *,
    limit: int = LIMIT_DEFAULT,
    as_of: datetime | str | None = None,
    include_history: bool = False,
    max_tokens: int | None = None,
    mode: str = "hybrid",
) -> list[RecallHit]:
    """Facts and episodes most relevant to ``query``, best first (hybrid vector + full text)."""
    text = validate.content(store.settings, query, "query")
    limit = _limit(limit)
    budget = _max_tokens(max_tokens)
    when = validate.timestamp(as_of, "as_of")
    if mode not in MODES:
        raise errors.InvalidInput(f"mode must be one of {', '.join(MODES)}")
    use_vector = mode in ("hybrid", "vector")
    use_text = mode in ("hybrid", "text")
    with store.db.transaction() as tx:
        all_ns, ids = read_scope(tx, namespaces)
    embedding = store.embedder.embed_one(text) if use_vector else None
    with store.db.transaction() as tx:
        with tx.conn.pipeline():  # the settings and the search share one round trip
            tx.one("recall_search_params", ef_search=str(EF_SEARCH))
            rows = tx.all(
                "recall_hybrid",
                query=text,
                embedding=embedding,
                use_vector=use_vector,
                use_text=use_text,
                text_any=TEXT_MATCH == "any",
                identifiers=identifier_tokens(text),
                # the text-only baseline ranks every any-term match (LIMIT NULL = no limit)
                text_scan_limit=TEXT_SCAN_LIMIT if use_vector else None,
                rank_normalization=TEXT_RANK_NORMALIZATION,
                all_namespaces=all_ns,
                namespace_ids=ids,
                as_of=when,
                include_history=bool(include_history),
                candidates=max(MIN_CANDIDATES, CANDIDATE_FACTOR * limit),
                limit=limit,
                w_vector=W_VECTOR,
                w_text=W_TEXT,
                w_text_partial=W_TEXT * W_TEXT_PARTIAL,
                rrf_k=RRF_K,
            )
    return _within_budget([_hit(r) for r in rows], budget)


_IDENTIFIER = re.compile(r"[A-Za-z0-9][\w.-]*(?:\d[\w.-]*|[-_][\w.-]+)")


def identifier_tokens(text: str) -> list[str]:
    """The query's identifier-like tokens: "INC-8870", "ERR_CONN_RESET", "v7.4.2", "5432"."""
    tokens = [t.rstrip(".-_") for t in _IDENTIFIER.findall(text)]
    return [t for t in tokens if any(ch.isdigit() for ch in t) or "-" in t or "_" in t]


def _hit(row: dict[str, Any]) -> RecallHit:
    is_fact = row["kind"] == "fact"
    similarity = row["similarity"]
    return RecallHit(
        kind=row["kind"],
        id=int(row["id"]),
        namespace=row["namespace"],
        content=row["content"],
        score=float(row["rrf"]),
        score_parts={
            "vector": None if similarity is None else float(similarity),
            "text": None if row["text_rank"] is None else float(row["text_rank"]),
            "rrf": float(row["rrf"]),
        },
        confidence=float(row["confidence"]) if is_fact else None,
        occurred_at=None if is_fact else row["occurred_at"],
        valid_from=row["valid_from"] if is_fact else None,
        valid_until=row["valid_until"] if is_fact else None,
        source_episode_ids=[int(i) for i in row["source_episode_ids"]] if is_fact else None,
        metadata=None if is_fact else row["metadata"],
        current=bool(row["current"]) if is_fact else None,
    )


def facts_first_recall(store: Store, query: str, namespaces: Any = "/", *, limit: int = LIMIT_DEFAULT) -> list[RecallHit]:
    """The reference's recall (benchmark baseline): facts take slots first, raw cosine, no full text."""
    text = validate.content(store.settings, query, "query")
    limit = _limit(limit)
    with store.db.transaction() as tx:
        all_ns, ids = read_scope(tx, namespaces)
    embedding = store.embedder.embed_one(text)
    with store.db.transaction() as tx:
        tx.one("recall_search_params", ef_search=str(EF_SEARCH))
        params = {"embedding": embedding, "all_namespaces": all_ns, "namespace_ids": ids}
        fact_rows = tx.all("recall_facts_first_facts", limit=limit, **params)
        episode_rows = (
            tx.all("recall_facts_first_episodes", limit=limit - len(fact_rows), **params)
            if len(fact_rows) < limit
            else []
        )
    hits = [
        RecallHit(
            kind=r["kind"],
            id=int(r["id"]),
            namespace=r["namespace"],
            content=r["content"],
            score=float(r["similarity"]),
            score_parts={"vector": float(r["similarity"]), "text": None, "rrf": None},
            confidence=float(r["confidence"]) if r["kind"] == "fact" else None,
            occurred_at=r.get("occurred_at"),
            valid_from=r.get("valid_from"),
            valid_until=r.get("valid_until"),
            metadata=r.get("metadata"),
        )
        for r in fact_rows + episode_rows
    ]
    hits.sort(key=lambda h: h.score, reverse=True)
    return hits[:limit]
