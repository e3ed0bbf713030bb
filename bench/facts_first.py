"""The facts-first baseline: the reference's recall, for bench.retrieval_quality.

Facts take the slots first (nearest by raw cosine, no validity filter: the reference
ignored ``valid_until``), the remaining slots go to the nearest episodes; no full text,
no fusion. Its two statements are in ``bench/facts_first.sql``. Not part of the product:
``stash_pipeline.recall`` is what ships.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stash_pipeline.db.sql import parse

SQL = parse((Path(__file__).parent / "facts_first.sql").read_text(encoding="utf-8"), "bench/facts_first.sql")


def recall(store: Any, query: str, namespaces: Any = "/", *, limit: int = 10, config: Any = None) -> list[Any]:
    """``limit`` hits, facts first, as ``RecallHit`` records (scores = cosine similarity)."""
    from stash_pipeline.memory import validate
    from stash_pipeline.memory.scope import read_scope
    from stash_pipeline.models import RecallHit
    from stash_pipeline.recall.config import DEFAULT

    config = config or DEFAULT
    text = validate.content(store.settings, query, "query")
    with store.db.transaction() as tx:
        all_ns, ids = read_scope(tx, namespaces)
    embedding = store.embedder.embed_one(text)
    params = {"embedding": embedding, "all_namespaces": all_ns, "namespace_ids": ids}
    with store.db.transaction() as tx:
        tx.one("recall_search_params", ef_search=str(config.ef_search))
        fact_rows = tx.conn.execute(SQL["facts_first_facts"], params | {"limit": limit}).fetchall()
        episode_rows = (
            tx.conn.execute(SQL["facts_first_episodes"], params | {"limit": limit - len(fact_rows)}).fetchall()
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
            score_parts={"vector": float(r["similarity"]), "text": None},
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
