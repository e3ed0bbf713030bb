"""bench/facts_first.py: the reference's recall that bench.retrieval_quality compares against.

Facts take every slot they can fill, by raw cosine; recall as shipped ranks the episode
that answers first, and beats the baseline on the small labelled set.
"""

from __future__ import annotations

from bench import facts_first
from stash_pipeline import recall
from stash_pipeline.memory import episodes, facts, namespaces
from testkit.recall_sets import LABELLED_NS as NS
from testkit.recall_sets import load_labelled, ranks, summarise


def test_facts_first_gives_facts_every_slot(store):
    namespaces.create(store, NS)
    eid = episodes.remember(store, NS, "The deploy uses blue-green on Fridays").id
    fact_ids = [facts.assert_fact(store, NS, f"unrelated fact number {i}").fact.id for i in range(3)]
    hits = facts_first.recall(store, "how do we deploy", NS, limit=3)
    assert sorted(h.id for h in hits) == sorted(fact_ids) and all(h.kind == "fact" for h in hits)
    hybrid = recall.recall(store, "how do we deploy", [NS], limit=3)
    assert (hybrid[0].kind, hybrid[0].id) == ("episode", eid)


def test_facts_first_fills_the_rest_with_episodes(store):
    namespaces.create(store, NS)
    episode_ids = [episodes.remember(store, NS, f"turn {i} about the deploy").id for i in range(3)]
    fact_id = facts.assert_fact(store, NS, "the deploy runs on fridays").fact.id
    hits = facts_first.recall(store, "deploy", NS, limit=3)
    assert [(h.kind, h.id) for h in hits if h.kind == "fact"] == [("fact", fact_id)]
    assert {h.id for h in hits if h.kind == "episode"} <= set(episode_ids) and len(hits) == 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_hybrid_recall_beats_facts_first_hash_embedder(store):
    keys, questions = load_labelled(store)
    hybrid = summarise(ranks(store, keys, questions, lambda q: recall.recall(store, q, [NS])))
    baseline = summarise(ranks(store, keys, questions, lambda q: facts_first.recall(store, q, NS)))
    assert hybrid["mrr"] > baseline["mrr"]


def test_hybrid_recall_beats_facts_first_minilm(make_store):
    # the default embedder; `make install` brings its weights, so a missing model fails here
    store = make_store(embedder="minilm", vector_dim=384)
    keys, questions = load_labelled(store)
    hybrid = summarise(ranks(store, keys, questions, lambda q: recall.recall(store, q, [NS])))
    baseline = summarise(ranks(store, keys, questions, lambda q: facts_first.recall(store, q, NS)))
    assert hybrid["mrr"] > baseline["mrr"]
