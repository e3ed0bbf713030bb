"""A recall sees the writes acknowledged before it, whatever the vector mode.

With vectors deferred (``STASH_EMBED_ON_WRITE=async``) a remembered episode is committed
before its vector, and the vector legs cannot see it until a worker embeds it. The
queries here share no word with the texts they look for, so only a vector finds them.
"""

from __future__ import annotations

import threading
from typing import Any

from stash_pipeline import recall
from stash_pipeline.memory import episodes, namespaces
from stash_pipeline.memory.pending import PendingVectorWorker, backlog
from stash_pipeline.recall import pipeline

#: paraphrases: no word in common with the remembered text (the hash embedder's vectors
#: still rank the one episode of a small scope among the candidates once it has one)
TEXT = "The billing service retries failed webhooks three times"
QUESTION = "how often is a callback attempted again"


def _store(make_store: Any) -> Any:
    store = make_store(embed_on_write="async", vector_dim=384)
    namespaces.create(store, "/p")
    return store


def test_a_recall_right_after_a_remember_finds_it_by_vector(make_store: Any) -> None:
    store = _store(make_store)
    stored = episodes.remember(store, "/p", TEXT)
    assert backlog(store).pending == 1  # no worker: the row waits for its vector

    for mode in ("vector", "hybrid"):
        answer = recall.recall_results(store, QUESTION, ["/p"], mode=mode)
        assert [r["id"] for r in answer["results"]] == [stored.id], mode
        assert "pending" not in answer
    assert backlog(store).pending == 0  # the recall embedded it, as the worker would have


def test_more_waiting_than_a_recall_embeds_are_reported_as_pending(make_store: Any, monkeypatch: Any) -> None:
    store = _store(make_store)
    monkeypatch.setattr(pipeline, "READ_YOUR_WRITES", 3)
    for i in range(5):
        episodes.remember(store, "/p", f"Observation number {i} about the nightly backup")
    answer = recall.recall_results(store, QUESTION, ["/p"], mode="vector")
    assert answer["pending"] == 2  # 3 embedded by the recall, 2 still wait
    assert len(answer["results"]) == 3
    assert "pending" not in recall.recall_results(store, QUESTION, ["/p"], mode="text")  # text sees them all
    again = recall.recall_results(store, QUESTION, ["/p"], mode="vector")
    assert "pending" not in again and len(again["results"]) == 5


def test_under_a_stream_of_writes_a_recall_embeds_first_and_searches_once(make_store: Any, monkeypatch: Any) -> None:
    """Once a recall found episodes waiting in its scope, the next ones there embed the
    waiting episodes before their round trip: one run of the statement, not two; the
    answer is the same."""
    store = _store(make_store)
    trips: list[int] = []
    real = pipeline.round_trip

    def counted(*args: Any, **kwargs: Any) -> Any:
        trips.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "round_trip", counted)
    recall.recall_results(store, QUESTION, ["/p"], mode="vector")  # the query's vector cached
    for turn, expected_trips in ((0, 2), (1, 1), (2, 1)):
        stored = episodes.remember(store, "/p", f"{TEXT} (turn {turn})")
        trips.clear()
        answer = recall.recall_results(store, QUESTION, ["/p"], mode="vector")
        assert stored.id in [r["id"] for r in answer["results"]] and "pending" not in answer
        assert len(trips) == expected_trips, (turn, len(trips))
    monkeypatch.setattr(pipeline, "PENDING_RECENT_S", 0.0)  # long after: found waiting, then embedded
    stored = episodes.remember(store, "/p", f"{TEXT} (turn 3)")
    trips.clear()
    answer = recall.recall_results(store, QUESTION, ["/p"], mode="vector")
    assert stored.id in [r["id"] for r in answer["results"]] and len(trips) == 2


def test_every_recall_sees_its_own_write_under_concurrent_writers_and_a_worker(make_store: Any) -> None:
    """Writers remember and at once recall their own text while the service's worker embeds
    concurrently: a recall never misses the write it follows (a row the worker holds is
    waited for, not skipped)."""
    store = make_store(embed_on_write="async", vector_dim=384, embed_pending_interval_s=0.05)
    namespaces.create(store, "/p")
    worker = PendingVectorWorker(store).start()
    missed: list[str] = []
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(6):
                slug = f"/p/w{n}-{i}"
                namespaces.create(store, slug)
                stored = episodes.remember(store, slug, f"{TEXT} (writer {n}, turn {i})")
                found = recall.recall_results(store, QUESTION, [slug], mode="vector")
                if [r["id"] for r in found["results"]] != [stored.id]:
                    missed.append(f"{slug}: {found}")
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        worker.stop()
    assert not errors, errors
    assert not missed, missed
