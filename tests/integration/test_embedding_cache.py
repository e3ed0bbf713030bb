"""The embedding cache and the model lock against a real Postgres."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from stash_pipeline import errors
from stash_pipeline.db.gateway import Database
from stash_pipeline.embedding.cache import CachedEmbedder, read_lock, text_hash
from stash_pipeline.embedding.hashing import HashEmbedder
from stash_pipeline.store import Store


class CountingEmbedder:
    """A hash embedder that records every batch it is asked to compute."""

    endpoint = "local"

    def __init__(self, dim: int = 384, name: str | None = None) -> None:
        self._inner = HashEmbedder(dim)
        self.dim = dim
        self.name = name or self._inner.name
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> list[np.ndarray]:
        self.calls.append(list(texts))
        return self._inner.embed(texts)


def cache_rows(db: Database) -> list[dict[str, Any]]:
    with db.transaction() as tx:
        return tx.conn.execute(
            "SELECT text_hash, model, endpoint, vector_dims(embedding) AS dims FROM embedding_cache "
            "ORDER BY model, text_hash"
        ).fetchall()


def test_miss_computes_in_one_batch_and_hit_skips_the_inner_embedder(store: Store) -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(store.db, inner)

    first = cached.embed(["alpha beta", "gamma", "alpha beta"])
    assert inner.calls == [["alpha beta", "gamma"]]  # de-duplicated, one batched call
    assert np.array_equal(first[0], first[2])
    assert np.allclose(first[0], HashEmbedder(384).embed_one("alpha beta"), atol=1e-6)

    second = cached.embed(["gamma", "alpha beta", "delta"])
    assert inner.calls == [["alpha beta", "gamma"], ["delta"]]  # only the miss is computed
    assert np.allclose(second[0], first[1], atol=1e-6)
    assert np.allclose(second[1], first[0], atol=1e-6)

    rows = cache_rows(store.db)
    assert sorted(r["text_hash"] for r in rows) == sorted(
        text_hash(t) for t in ["alpha beta", "gamma", "delta"]
    )
    assert {(r["model"], r["endpoint"], r["dims"]) for r in rows} == {("hash-384", "local", 384)}


def test_embed_one_and_empty_batch(store: Store) -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(store.db, inner)
    assert cached.embed([]) == []
    with pytest.raises(errors.InvalidInput, match="only strings"):
        cached.embed(["fine", None])  # type: ignore[list-item]
    assert inner.calls == []
    vector = cached.embed_one("one text")
    assert vector.shape == (384,) and vector.dtype == np.float32
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5


def test_a_new_cached_embedder_reads_what_another_wrote(store: Store) -> None:
    CachedEmbedder(store.db, CountingEmbedder()).embed(["shared text"])
    again = CountingEmbedder()
    CachedEmbedder(store.db, again).embed(["shared text"])
    assert again.calls == []


def test_cache_is_keyed_by_model(store: Store) -> None:
    a = CountingEmbedder(name="hash-384")
    b = CountingEmbedder(name="other-model")
    CachedEmbedder(store.db, a, enforce_lock=False).embed(["same text"])
    CachedEmbedder(store.db, b, enforce_lock=False).embed(["same text"])
    assert b.calls == [["same text"]]  # model a's vector is not reused for model b
    rows = cache_rows(store.db)
    assert [(r["model"], r["text_hash"]) for r in rows] == [
        ("hash-384", text_hash("same text")),
        ("other-model", text_hash("same text")),
    ]


def test_forget_texts_removes_the_text_for_every_model(store: Store) -> None:
    CachedEmbedder(store.db, CountingEmbedder(name="hash-384"), enforce_lock=False).embed(["secret", "keep"])
    CachedEmbedder(store.db, CountingEmbedder(name="other"), enforce_lock=False).embed(["secret"])
    cached = CachedEmbedder(store.db, CountingEmbedder())
    with store.db.transaction() as tx:
        assert cached.forget_texts(tx, ["secret", "secret"]) == 2
    assert [r["text_hash"] for r in cache_rows(store.db)] == [text_hash("keep")]


def test_cache_write_failure_does_not_fail_the_embed(store: Store) -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(store.db, inner)
    cached.embed(["warm"])  # lock recorded; now make the cache table unwritable
    with store.db.transaction() as tx:
        tx.conn.execute("ALTER TABLE embedding_cache RENAME TO embedding_cache_gone")
    vectors = cached.embed(["still works"])
    assert vectors[0].shape == (384,)
    assert inner.calls == [["warm"], ["still works"]]


def test_store_embedder_records_the_lock_on_first_use(store: Store) -> None:
    assert read_lock(store.db) == {}
    store.embedder.embed_one("first write")
    assert read_lock(store.db) == {
        "embedding_model": "hash-384",
        "vector_dim": "384",
        "embedding_endpoint": "local",
    }


def test_lock_mismatch_names_both_models_and_the_ways_out(make_store: Any) -> None:
    first = make_store(embedder="hash", vector_dim=384)
    first.embedder.embed_one("recorded by hash-384")

    class OtherModel(CountingEmbedder):
        pass

    other = CachedEmbedder(first.db, OtherModel(name="all-MiniLM-L6-v2"))
    with pytest.raises(errors.EmbeddingModelMismatch) as info:
        other.embed(["anything"])
    message = str(info.value)
    assert "'hash-384' (384 dims)" in message
    assert "'all-MiniLM-L6-v2' (384 dims)" in message
    assert "STASH_EMBEDDER" in message and "`stash reembed`" in message
    assert info.value.details["stored_model"] == "hash-384"
    # The lock is unchanged by the failed attempt.
    assert read_lock(first.db)["embedding_model"] == "hash-384"


def test_dimension_mismatch_against_the_lock(make_store: Any) -> None:
    make_store(embedder="hash", vector_dim=384).embedder.embed_one("x")
    wrong = make_store(embedder="hash", vector_dim=256)
    with pytest.raises(
        errors.EmbeddingModelMismatch, match=r"'hash-384' \(384 dims\).*'hash-256' \(256 dims\)"
    ):
        wrong.embedder.embed_one("y")


def test_column_dimension_is_checked_before_the_first_lock(make_store: Any) -> None:
    # Fresh database (columns are vector(384), no lock yet) opened with a 256-d embedder.
    wrong = make_store(embedder="hash", vector_dim=256)
    with pytest.raises(
        errors.EmbeddingModelMismatch, match=r"vector columns hold 384 dimensions.*produces 256"
    ):
        wrong.embedder.embed_one("y")
    assert read_lock(wrong.db) == {}  # nothing recorded by the failed attempt


def test_endpoint_change_is_recorded_not_refused(store: Store) -> None:
    store.embedder.embed_one("x")

    class Moved(CountingEmbedder):
        endpoint = "http://elsewhere/v1"

    moved = CachedEmbedder(store.db, Moved())
    moved.embed(["x"])
    assert read_lock(store.db)["embedding_endpoint"] == "http://elsewhere/v1"
    # Cache key includes the endpoint: the moved endpoint computed its own vector.
    assert len(cache_rows(store.db)) == 2


def tenants_and_model_calls(store: Store) -> Callable[[Callable[[], Any]], list[list[str]]]:
    """Make /a and /b; the returned function runs a call and gives the batches the model
    (the cache's inner embedder) computed during it."""
    from stash_pipeline.memory import namespaces

    namespaces.create(store, "/a")
    namespaces.create(store, "/b")
    model = store.embedder.inner
    embed = model.embed
    calls: list[list[str]] = []
    model.embed = lambda texts: calls.append(list(texts)) or embed(texts)  # type: ignore[method-assign]

    def model_calls(fn: Callable[[], Any]) -> list[list[str]]:
        calls.clear()
        fn()
        return list(calls)

    return model_calls


def test_a_query_reuses_no_vector_another_scope_stored_or_asked(store: Store) -> None:
    """With one cache shared by every namespace, an /a recall of a text
    stored (or asked) in /b skipped the model and answered in half the time: one call per
    guess told whether anyone held the text. A query's vector is now reused only where the
    same scope asked it before (bench/cache_timing.py measures the times)."""
    from stash_pipeline import recall
    from stash_pipeline.memory import episodes

    model_calls = tenants_and_model_calls(store)

    secret = "vault code 7741"
    assert model_calls(lambda: episodes.remember(store, "/b", secret)) == [[secret]]
    # stored in /b: /a's recall still waits for the model, as for a text never stored
    assert model_calls(lambda: recall.recall(store, secret, ["/a"])) == [[secret]]
    assert model_calls(lambda: recall.recall(store, "never stored anywhere", ["/a"])) == [["never stored anywhere"]]
    # what /a asked before is cached for /a
    assert model_calls(lambda: recall.recall(store, secret, ["/a"])) == []
    # asked in /b only: not reused in /a, nor in a wider scope
    assert model_calls(lambda: recall.recall(store, "who asked this", ["/b"])) == [["who asked this"]]
    assert model_calls(lambda: recall.recall(store, "who asked this", ["/a"])) == [["who asked this"]]
    assert model_calls(lambda: recall.recall(store, "who asked this", ["/a", "/b"])) == [["who asked this"]]
    # forget's query (its preview is a read) follows the same rule, sharing recall's entries
    episodes.remember(store, "/b", "alarm code 1234")
    assert model_calls(lambda: episodes.forget(store, "alarm code 1234", "/a", preview=True)) == [["alarm code 1234"]]
    assert model_calls(lambda: episodes.forget(store, "alarm code 1234", "/a", preview=True)) == []
    assert model_calls(lambda: episodes.forget(store, secret, "/a", preview=True)) == []  # /a asked it
    # a purge forgets every scope's entry of the text, not only the plain one
    from stash_pipeline.embedding.cache import query_key

    keys = [query_key(secret, ["/b"]), query_key(secret, ["/a"])]
    assert {r["text_hash"] for r in cache_rows(store.db)} >= set(keys)
    with store.db.transaction() as tx:
        store.embedder.forget_texts(tx, [secret])
    assert not [r for r in cache_rows(store.db) if r["text_hash"].startswith(text_hash(secret))]
    assert any(r["text_hash"].startswith(text_hash("who asked this")) for r in cache_rows(store.db))


def test_a_write_reuses_no_vector_another_namespace_made(store: Store) -> None:
    """A remembered turn, a batch, an asserted fact and its entity name are embedded for
    the namespace written: the same text written in /b before still waits for the model
    in /a, so a write's time tells nothing of what /b holds; /a's own second write of it
    is a cache hit (bench/cache_timing.py --writes measures the times)."""
    from stash_pipeline.memory import episodes, facts

    batches = tenants_and_model_calls(store)

    def model_calls(fn: Any) -> list[str]:
        return [text for batch in batches(fn) for text in batch]

    secret = "vault code 7741"
    for namespace in ("/b", "/a"):  # written in /b first: /a still runs the model
        assert model_calls(lambda ns=namespace: episodes.remember(store, ns, secret)) == [secret]
    assert model_calls(lambda: episodes.remember(store, "/a", secret)) == []  # /a's own entry
    assert model_calls(lambda: episodes.remember_batch(store, "/b", [{"content": "batch secret"}])) == ["batch secret"]
    assert model_calls(lambda: episodes.remember_batch(store, "/a", [{"content": "batch secret"}])) == ["batch secret"]
    fact = "The vault is in room 4"
    for namespace in ("/b", "/a"):
        made = model_calls(lambda ns=namespace: facts.assert_fact(store, ns, fact, entity="Vault", property="room",
                                                           value="4"))
        assert sorted(made) == sorted([fact, "vault"]), made
