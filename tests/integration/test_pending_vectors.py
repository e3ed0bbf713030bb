"""Episodes committed before their vector: remember/remember_batch with deferred vectors,
recall while a row waits, the batch that embeds it (SKIP LOCKED), export of waiting rows."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import numpy as np
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from stash_pipeline import recall
from stash_pipeline.config import load_settings
from stash_pipeline.embedding.cache import as_array
from stash_pipeline.embedding.hashing import HashEmbedder
from stash_pipeline.memory import episodes, namespaces
from stash_pipeline.memory.pending import PendingVectorWorker, backlog, embed_pending, embed_pending_batch
from stash_pipeline.store import Store
from tests.conftest import free_port


def _vector(store: Any, episode_id: int) -> np.ndarray | None:
    with store.db.connection() as conn:
        row = conn.execute("SELECT embedding FROM episodes WHERE id = %(id)s", {"id": episode_id}).fetchone()
        conn.commit()
    return None if row["embedding"] is None else as_array(row["embedding"])


def _async_store(make_store: Any) -> Any:
    store = make_store(embed_on_write="async", vector_dim=384)
    namespaces.create(store, "/p")
    return store


def test_remember_commits_at_once_and_the_batch_fills_the_vector(make_store: Any) -> None:
    store = _async_store(make_store)
    assert store.defer_vectors and not store.vectors_pending.is_set()
    stored = episodes.remember(store, "/p", "The billing service retries failed webhooks three times")
    assert stored.created is True
    assert _vector(store, stored.id) is None  # committed without waiting for the vector
    assert store.vectors_pending.is_set()  # and the worker was told
    assert backlog(store).pending == 1

    # meanwhile a text recall finds it by its words (one with a vector leg embeds it first:
    # tests/integration/test_read_your_writes.py)
    hits = recall.recall(store, "billing service retries failed webhooks", ["/p"], mode="text")
    assert [h.id for h in hits][:1] == [stored.id]
    assert hits[0].score_parts["vector"] is None
    assert 0 < hits[0].score <= 1

    assert embed_pending(store) == 1
    vector = _vector(store, stored.id)
    assert vector is not None
    assert np.allclose(vector, HashEmbedder(384).embed_one("The billing service retries failed webhooks three times"))
    assert backlog(store).model_dump() == {"pending": 0, "oldest_age_s": None}
    hits = recall.recall(store, "billing service retries failed webhooks", ["/p"], mode="vector")
    assert hits[0].id == stored.id and hits[0].score_parts["vector"] > 0.5

    # the vector went into the cache too: the same text again is written with its vector
    again = episodes.remember(store, "/p", "The billing service retries failed webhooks three times")
    assert _vector(store, again.id) is not None


def test_cached_text_keeps_its_vector_and_replays_stay_replays(make_store: Any) -> None:
    sync = make_store(embed_on_write="sync")
    namespaces.create(sync, "/p")
    first = episodes.remember(sync, "/p", "Deploys happen on Tuesdays")
    store = make_store(embed_on_write="async")
    cached = episodes.remember(store, "/p", "Deploys happen on Tuesdays")
    assert _vector(store, cached.id) is not None and not store.vectors_pending.is_set()
    keyed = episodes.remember(store, "/p", "A new text with a key", idempotency_key="k1")
    replay = episodes.remember(store, "/p", "A new text with a key", idempotency_key="k1")
    assert replay.model_dump() == {"id": keyed.id, "namespace": "/p", "created": False}
    assert _vector(store, keyed.id) is None
    assert first.id < cached.id < keyed.id


def test_remember_batch_defers_new_texts_only(make_store: Any) -> None:
    store = _async_store(make_store)
    sync = make_store(embed_on_write="sync")
    known = episodes.remember(sync, "/p", "known text")
    items = [{"content": "known text"}, {"content": "new text one"}, {"content": "new text two", "idempotency_key": "a"}]
    results = episodes.remember_batch(store, "/p", items)
    assert [r.created for r in results] == [True, True, True]
    assert _vector(store, results[0].id) is not None
    assert _vector(store, results[1].id) is None and _vector(store, results[2].id) is None
    assert store.vectors_pending.is_set()
    # a batch of new texts only (every vector NULL) goes in too
    only_new = episodes.remember_batch(store, "/p", [{"content": f"fresh {i}"} for i in range(5)])
    assert backlog(store).pending == 7
    assert embed_pending(store, batch_size=3) == 7
    for result in [*results, *only_new]:
        assert _vector(store, result.id) is not None
    assert known.id < results[0].id


def test_a_claimed_row_is_skipped_by_a_second_worker(make_store: Any) -> None:
    store = _async_store(make_store)
    ids = [episodes.remember(store, "/p", f"row {i}").id for i in range(4)]
    # worker A holds the two oldest rows in its open transaction (as during its forward pass)
    with store.db.transaction() as tx:
        held = [r["id"] for r in tx.all("pending_vectors_claim", limit=2)]
        assert held == ids[:2]
        # worker B, on another connection, takes only the others
        assert embed_pending(store) == 2
        assert [_vector(store, i) is None for i in ids] == [True, True, False, False]
    assert embed_pending(store) == 2  # released: now they are taken
    assert all(_vector(store, i) is not None for i in ids)


def test_two_concurrent_workers_embed_every_row_exactly_once(make_store: Any) -> None:
    store = _async_store(make_store)
    episodes.remember_batch(store, "/p", [{"content": f"concurrent row {i}"} for i in range(200)])
    other = make_store(embed_on_write="async")
    counts: list[int] = []
    barrier = threading.Barrier(2)

    def work(s: Any) -> None:
        barrier.wait()
        counts.append(embed_pending(s, batch_size=7))

    threads = [threading.Thread(target=work, args=(s,)) for s in (store, other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sum(counts) == 200  # a row claimed twice would be counted twice
    assert backlog(store).pending == 0


def test_worker_thread_wakes_on_a_write_and_stops(make_store: Any) -> None:
    store = make_store(embed_on_write="async", embed_pending_interval_s=60)
    namespaces.create(store, "/p")
    worker = PendingVectorWorker(store).start()
    try:
        stored = episodes.remember(store, "/p", "woken by the write, not by the sweep")
        deadline = threading.Event()
        for _ in range(100):
            if _vector(store, stored.id) is not None:
                break
            deadline.wait(0.05)
        assert _vector(store, stored.id) is not None  # well before the 60 s sweep
        assert worker.embedded == 1
    finally:
        worker.stop()
    assert not worker._thread.is_alive()


def test_auto_defers_only_for_a_slow_embedder(make_store: Any) -> None:
    fast = make_store(embed_on_write="auto", embed_sync_budget_ms=1000)
    assert fast.defer_vectors is False  # auto never defers before a worker decides
    worker = PendingVectorWorker(fast).start()
    worker.stop()
    assert fast.defer_vectors is False  # the hash embedder is far under a second
    slow = make_store(embed_on_write="auto", embed_sync_budget_ms=0)
    worker = PendingVectorWorker(slow).start()
    worker.stop()
    assert slow.defer_vectors is True


class _Relay:
    """A local port that refuses connections until ``open``, then relays each to ``target``."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target, self.port = target, free_port()
        self.server: socket.socket | None = None

    def open(self) -> None:
        self.server = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        assert self.server is not None
        while True:
            try:
                client = self.server.accept()[0]
            except OSError:  # closed
                return
            upstream = socket.create_connection(self.target)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with source, sink:
            while data := source.recv(65536):
                sink.sendall(data)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


def test_auto_decides_once_the_database_answers(database_url: str, tmp_path: Any) -> None:
    # the service started while its database was down: with STASH_EMBEDDER unset the
    # embedder is the model the database was written with, so timing it waits for the
    # database instead of deferring for good
    parts = conninfo_to_dict(database_url)
    relay = _Relay((parts.get("host") or "127.0.0.1", int(parts.get("port") or 5432)))
    url = make_conninfo(**(parts | {"host": "127.0.0.1", "port": str(relay.port)}))
    settings = load_settings(database_url=url, home=tmp_path / "home", embed_on_write="auto",
                             embed_sync_budget_ms=5000, embed_pending_interval_s=0.2)
    store = Store.open(settings, timeout=0.5)
    worker = PendingVectorWorker(store).start()
    try:
        time.sleep(1.5)  # a few sweeps against a refused port
        assert not worker.decided and store.defer_vectors is False
        relay.open()
        deadline = time.monotonic() + 60  # the pool's reconnect backoff, the model's load
        while not worker.decided and time.monotonic() < deadline:
            time.sleep(0.1)
        assert worker.decided
        assert store.defer_vectors is False  # the local model is far under the budget
    finally:
        worker.stop()
        store.close()
        relay.close()


def test_batch_with_nothing_waiting_claims_nothing(make_store: Any) -> None:
    store = _async_store(make_store)
    assert embed_pending_batch(store) == 0


def test_export_carries_a_waiting_row_without_vector_and_restore_embeds_it(make_store: Any, tmp_path: Any) -> None:
    import pyarrow.parquet as pq

    from stash_pipeline.interchange import export, readers

    store = _async_store(make_store)
    sync = make_store(embed_on_write="sync")
    embedded = episodes.remember(sync, "/p", "already embedded").id
    waiting = episodes.remember(store, "/p", "still waiting for its vector").id
    export.export_tables(store, "/p", tmp_path / "out", with_vectors=True)
    rows = {r["id"]: r for r in pq.read_table(tmp_path / "out" / "episodes.parquet").to_pylist()}
    assert len(rows[embedded]["embedding"]) == 384 and rows[waiting]["embedding"] is None
    assert _vector(store, waiting) is None  # exporting does not wait for (or compute) the vector

    result = readers.import_export(sync, tmp_path / "out", into="/copy", with_vectors=True)
    assert result["namespace"] == "/copy"
    with sync.db.connection() as conn:
        copied = conn.execute(
            "SELECT e.content, e.embedding IS NOT NULL AS has_vector FROM episodes e "
            "JOIN namespaces n ON n.id = e.namespace_id WHERE n.slug = '/copy' ORDER BY e.id"
        ).fetchall()
        conn.commit()
    assert [(r["content"], r["has_vector"]) for r in copied] == [
        ("already embedded", True),
        ("still waiting for its vector", True),
    ]


def test_forget_skips_a_waiting_row_until_its_vector_exists(make_store: Any) -> None:
    store = _async_store(make_store)
    waiting = episodes.remember(store, "/p", "the staging password rotates monthly").id
    early = episodes.forget(store, "the staging password rotates monthly", "/p")
    assert (early.episode_id, early.applied) == (None, False)  # nothing with a vector to match yet
    embed_pending(store)
    late = episodes.forget(store, "the staging password rotates monthly", "/p")
    assert (late.episode_id, late.applied) == (waiting, True)
