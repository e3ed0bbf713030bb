"""How often ``remember`` and ``recall`` wait for the server, observed in libpq's protocol trace.

Every wait for the server ends a client message batch with ``Sync`` (extended protocol)
or is a simple ``Query``; counting those frontend messages counts round trips. A live
idle connection is handed out without a probe (``test_gateway_checkout``); the probe of
one the server wrote to would not be traced (it happens before the handover).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stash_pipeline import recall
from stash_pipeline.memory import episodes, facts, namespaces


@pytest.fixture
def traced(store, tmp_path: Path) -> Iterator[list[Path]]:
    """Trace the protocol of every connection the store hands out; yields the trace files."""
    db = store.db
    handed_out = db._checked_connection
    files: list[Path] = []

    @contextlib.contextmanager
    def tracing() -> Iterator[Any]:
        with handed_out() as conn:
            path = tmp_path / f"trace-{len(files)}.txt"
            files.append(path)
            with path.open("w") as sink:
                conn.pgconn.trace(sink.fileno())
                try:
                    yield conn
                finally:
                    conn.pgconn.untrace()

    db._checked_connection = tracing  # type: ignore[method-assign]
    try:
        yield files
    finally:
        del db._checked_connection


def round_trips(files: list[Path]) -> tuple[int, int]:
    """(connections checked out, client waits) recorded in the trace files."""
    waits = 0
    for path in files:
        for line in path.read_text().splitlines():
            fields = line.split("\t")
            if len(fields) >= 4 and fields[1] == "F" and fields[3] in ("Sync", "Query"):
                waits += 1
    return len(files), waits


def test_cached_remember_is_one_checkout_and_one_round_trip(store, traced):
    namespaces.create(store, "/projects/x")
    first = episodes.remember(store, "/projects/x", "the deploy script needs sudo")
    traced.clear()  # the first call embedded the text; now it is cached
    again = episodes.remember(store, "/projects/x", "the deploy script needs sudo")
    assert round_trips(traced) == (1, 1)
    assert again.created and again.id > first.id


def test_new_text_remember_is_two_round_trips_with_the_model_between(store, traced):
    namespaces.create(store, "/projects/x")
    store.embedder.ensure_lock()  # once per process: compare the model with the stored lock
    traced.clear()
    out = episodes.remember(store, "/projects/x", "a text never seen before")
    # the cached read finds no vector; the model runs; cache write + insert in one statement
    assert round_trips(traced) == (2, 2)
    with store.db.connection() as conn:
        cached = conn.execute("SELECT count(*) AS n FROM embedding_cache").fetchone()["n"]
        stored = conn.execute("SELECT count(*) AS n FROM episodes WHERE id = %s", (out.id,)).fetchone()["n"]
    assert (cached, stored) == (1, 1)


def test_new_text_with_deferred_vector_is_one_round_trip_and_no_model_call(store, traced):
    namespaces.create(store, "/projects/x")
    store.embedder.ensure_lock()
    store.defer_vectors = True  # STASH_EMBED_ON_WRITE=async
    calls: list[list[str]] = []
    model = store.embedder.inner
    embed = model.embed
    model.embed = lambda texts: calls.append(list(texts)) or embed(texts)  # type: ignore[method-assign]
    traced.clear()
    out = episodes.remember(store, "/projects/x", "a text the worker embeds later")
    assert round_trips(traced) == (1, 1)
    assert calls == []
    with store.db.connection() as conn:
        row = conn.execute("SELECT embedding IS NULL AS waiting FROM episodes WHERE id = %s", (out.id,)).fetchone()
    assert row["waiting"] is True


def test_key_replay_is_one_round_trip_and_embeds_nothing(store, traced):
    namespaces.create(store, "/projects/x")
    first = episodes.remember(store, "/projects/x", "retry me", idempotency_key="k1")
    calls: list[list[str]] = []
    model = store.embedder.inner
    embed = model.embed
    model.embed = lambda texts: calls.append(list(texts)) or embed(texts)  # type: ignore[method-assign]
    traced.clear()
    again = episodes.remember(store, "/projects/x", "retry me", idempotency_key="k1")
    assert again.model_dump() == {"id": first.id, "namespace": "/projects/x", "created": False}
    assert round_trips(traced) == (1, 1)
    assert calls == []


def test_the_one_statement_insert_keeps_term_statistics_current(store):
    namespaces.create(store, "/projects/x")
    for _ in range(3):  # the first embeds; the next two insert through the cached statement
        episodes.remember(store, "/projects/x", "Caroline adopted a beagle from the rescue")
    with store.db.connection() as conn:
        kept = conn.execute(
            "SELECT t.documents FROM recall_term_stats t JOIN namespaces n ON n.id = t.namespace_id "
            "WHERE n.slug = '/projects/x' AND t.lexeme = 'beagl'"
        ).fetchone()["documents"]
        text = conn.execute(
            "SELECT s.documents FROM recall_text_stats s JOIN namespaces n ON n.id = s.namespace_id "
            "WHERE n.slug = '/projects/x'"
        ).fetchone()["documents"]
        conn.commit()
    assert (kept, text) == (3, 3)


def test_recall_of_a_query_seen_before_is_one_checkout_and_one_round_trip(store, traced):
    """Cached query vector, scope, entity leg, hybrid ranking, fusion and context turns:
    one wait for the server. A new query with a local model waits twice: for the names it
    holds (masked in the text the model embeds), then, after the model, for the search."""
    namespaces.create(store, "/projects/x")
    episodes.remember_batch(store, "/projects/x", [
        {"content": text, "metadata": {"session": "s1"}}
        for text in ("we deploy on Fridays", "Alice runs the deploy", "after lunch usually",
                     *(f"unrelated turn {i} about the weather" for i in range(8)))])
    facts.assert_fact(store, "/projects/x", "Alice owns the deploy pipeline", entity="Alice", property="owns",
                      value="deploy pipeline")
    query = "what does Alice do for the deploy"
    store.embedder.ensure_lock()  # once per process
    traced.clear()
    first = recall.recall_results(store, query, ["/projects/x"], limit=2, context=1, include_score_parts=True)
    # this process never asked it: recall_names names "alice", the model embeds "what does
    # they do for the deploy", and the round trip caches that vector in the same transaction
    assert round_trips(traced) == (2, 2)
    traced.clear()
    out = recall.recall_results(store, query, ["/projects/x"], limit=2, context=1, include_score_parts=True)
    assert round_trips(traced) == (1, 1)
    assert out == first
    assert any("context" in r for r in out["results"])  # the neighbours came with it
    assert any("entity" in r["score_parts"] for r in out["results"] if r["kind"] == "fact")  # the leg ran


def test_the_recall_statement_is_split_into_its_parameters_once_per_process(store):
    """psycopg re-splits a long query's %(name)s placeholders on every execute unless told
    to cache it (db/query_cache.py): the long recall statement is read from the cache like the
    two short statements pipelined with it."""
    from psycopg import _queries

    namespaces.create(store, "/projects/x")
    episodes.remember(store, "/projects/x", "we deploy on Fridays")
    recall.recall(store, "when do we deploy", ["/projects/x"])  # the model embeds the query once
    recall.recall(store, "when do we deploy", ["/projects/x"])
    before = _queries._query2pg.cache_info()
    recall.recall(store, "when do we deploy", ["/projects/x"])
    after = _queries._query2pg.cache_info()
    assert (after.hits - before.hits, after.misses - before.misses) == (3, 0)


def test_a_query_another_process_cached_is_one_round_trip_too(store, make_store):
    """A second process (its own embedder) asking a query the first cached: the model runs
    again, since looking up a query this process never cached is mostly a wasted trip, and
    the answer is the same."""
    namespaces.create(store, "/projects/y")
    episodes.remember(store, "/projects/y", "the release train leaves on Tuesdays")
    query = "when does the release train leave"
    first = recall.recall_results(store, query, ["/projects/y"], limit=1)
    other = make_store()
    other.embedder.ensure_lock()
    calls: list[list[str]] = []
    embed = other.embedder.inner.embed
    other.embedder.inner.embed = lambda texts: calls.append(list(texts)) or embed(texts)  # type: ignore[method-assign]
    assert recall.recall_results(other, query, ["/projects/y"], limit=1) == first
    assert calls == [[query]]
    assert recall.recall_results(other, query, ["/projects/y"], limit=1) == first
    assert calls == [[query]]  # now cached by this process too: read in the round trip
