"""bench/rerank_cost.py's stand-in endpoint: recall sends it its candidates and takes its order."""

from __future__ import annotations

from bench.rerank_cost import StandIn
from stash_pipeline import recall
from stash_pipeline.store import Store
from testkit.recall_sets import CHAT_NS as NS
from testkit.recall_sets import chat as _chat


def test_recall_reranks_through_the_stand_in(store: Store) -> None:
    _chat(store)
    stand_in = StandIn(store.embedder.inner)
    other = Store.open(store.settings.model_copy(update={"rerank_url": stand_in.url, "rerank_candidates": 5}))
    try:
        hits = recall.recall(other, "What class did Melanie start?", [NS], limit=5)
    finally:
        other.close()
        stand_in.close()
    assert len(stand_in.times_ms) == 1  # one request per recall
    reranked = [h for h in hits if "rerank" in h.score_parts]
    assert reranked and all(isinstance(h.score_parts["rerank"], float) for h in reranked)
