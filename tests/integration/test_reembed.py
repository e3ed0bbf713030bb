"""``reembed``: switching model and dimension on a database that already holds vectors."""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg
import pytest

from stash_pipeline import errors
from stash_pipeline.db.locks import ID_ORDER_KEY, REEMBED_LOCK
from stash_pipeline.embedding.cache import as_array, column_dims, read_lock
from stash_pipeline.embedding.hashing import HashEmbedder
from stash_pipeline.memory.reembed import _ddl, reembed
from stash_pipeline.store import Store
from testkit.openai_server import ScriptedOpenAI

EPISODES = ["the deploy runs on fridays", "postgres holds the memories", "an old deleted note"]
FACTS = ["deploys happen on fridays", "memories live in postgres"]


def seed(store: Store) -> None:
    """Episodes (one soft-deleted) and facts in '/', embedded by the store's embedder."""
    vectors = store.embedder.embed(EPISODES + FACTS)
    model = store.embedder.name
    with store.db.transaction() as tx:
        for text, vector in zip(EPISODES, vectors, strict=False):
            tx.conn.execute(
                "INSERT INTO episodes (namespace_id, content, embedding, embedding_model, deleted_at) "
                "VALUES (1, %s, %s, %s, CASE WHEN %s THEN now() END)",
                (text, vector, model, text.startswith("an old")),
            )
        for text, vector in zip(FACTS, vectors[len(EPISODES) :], strict=True):
            tx.conn.execute(
                "INSERT INTO facts (namespace_id, content, origin, embedding, embedding_model) "
                "VALUES (1, %s, 'asserted', %s, %s)",
                (text, vector, model),
            )


def vectors_of(store: Store, table: str) -> dict[str, tuple[str, np.ndarray]]:
    with store.db.transaction() as tx:
        rows = tx.conn.execute(
            f"SELECT content, embedding_model, embedding FROM {table} ORDER BY id"
        ).fetchall()
    return {r["content"]: (r["embedding_model"], as_array(r["embedding"])) for r in rows}


def schema_state(store: Store) -> dict[str, Any]:
    return dict(store.db.one("reembed_schema_state") or {})


def test_reembed_changes_dimension_and_model(store: Store, make_store: Any) -> None:
    seed(store)
    assert column_dims(store.db) == {
        "embedding_cache.embedding": 384,
        "entities.embedding": 384,
        "episodes.embedding": 384,
        "facts.embedding": 384,
    }
    new = make_store(embedder="hash", vector_dim=256)
    with pytest.raises(errors.EmbeddingModelMismatch):
        new.embedder.embed_one("refused before reembed")

    calls: list[tuple[int, int]] = []
    report = reembed(new, progress=lambda done, total: calls.append((done, total)), batch_size=2)

    assert report.model == "hash-256" and report.dim == 256
    assert report.previous_model == "hash-384" and report.previous_dim == 384
    assert report.dims_changed is True
    assert (report.episodes, report.facts, report.rows_written) == (3, 2, 5)
    assert calls == [(0, 5), (2, 5), (3, 5), (5, 5)]  # batches of 2: episodes 2+1, facts 2

    assert column_dims(new.db) == {
        "embedding_cache.embedding": 256,
        "entities.embedding": 256,
        "episodes.embedding": 256,
        "facts.embedding": 256,
    }
    hashing = HashEmbedder(256)
    for table, texts in (("episodes", EPISODES), ("facts", FACTS)):
        stored = vectors_of(new, table)
        assert list(stored) == texts
        for text, (model, vector) in stored.items():
            assert model == "hash-256"
            assert vector.shape == (256,)
            assert np.allclose(vector, hashing.embed_one(text), atol=1e-6)
    # episodes.embedding stays nullable (an episode may wait for its vector); none does here
    assert int(new.db.scalar("pending_vectors_backlog")) == 0
    assert schema_state(new) == {
        "facts_not_null": True,
        "episodes_index": True,
        "facts_index": True,
        "entities_index": True,
    }
    assert read_lock(new.db) == {
        "embedding_model": "hash-256",
        "vector_dim": "256",
        "embedding_endpoint": "local",
    }

    # The new configuration now works through the normal path, the old one is refused.
    assert make_store(embedder="hash", vector_dim=256).embedder.embed_one("accepted").shape == (256,)
    with pytest.raises(errors.EmbeddingModelMismatch, match=r"'hash-256' \(256 dims\)"):
        make_store(embedder="hash", vector_dim=384).embedder.embed_one("old config")
    with new.db.transaction() as tx:
        dims = tx.conn.execute(
            "SELECT DISTINCT model, vector_dims(embedding) AS d FROM embedding_cache"
        ).fetchall()
    assert dims == [{"model": "hash-256", "d": 256}]


def test_reembed_twice_is_a_no_op(make_store: Any, store: Store) -> None:
    seed(store)
    new = make_store(embedder="hash", vector_dim=256)
    reembed(new)
    before = vectors_of(new, "episodes")
    again = reembed(new)
    assert again.dims_changed is False
    assert again.rows_written == 0
    after = vectors_of(new, "episodes")
    assert all(np.array_equal(before[k][1], after[k][1]) for k in before)


def test_reembed_resumes_after_a_crash_mid_way(store: Store, make_store: Any) -> None:
    seed(store)
    new = make_store(embedder="hash", vector_dim=256)
    # A crash right after the columns were retyped: vectors NULL, no index, no NOT NULL.
    _ddl(new, "reembed_drop_indexes")
    _ddl(new, "reembed_alter_dims", dim=256)
    assert schema_state(new)["episodes_index"] is False

    report = reembed(new)

    assert report.dims_changed is False  # columns already had the new type
    assert report.rows_written == 5
    assert all(model == "hash-256" for model, _ in vectors_of(new, "facts").values())
    assert all(schema_state(new).values())
    assert read_lock(new.db)["embedding_model"] == "hash-256"


def test_reembed_same_dimension_other_model_skips_done_rows(store: Store, make_store: Any) -> None:
    seed(store)
    with ScriptedOpenAI() as server:
        base_url = server.base_url
        new = make_store(
            embedder="openai",
            embedding_model="scripted-embed",
            openai_base_url=base_url,
            vector_dim=384,
            reasoner_max_retries=0,
        )
        # One fact is already done (as after an interrupted run): it is not sent again.
        with new.db.transaction() as tx:
            tx.conn.execute(
                "UPDATE facts SET embedding_model = 'scripted-embed' WHERE content = %s", (FACTS[0],)
            )
        report = reembed(new)
        sent = [t for r in server.embedding_requests() for t in r["input"]]
    assert report.dims_changed is False
    assert (report.episodes, report.facts) == (3, 1)
    assert sorted(sent) == sorted([*EPISODES, FACTS[1]])
    assert column_dims(new.db)["episodes.embedding"] == 384
    assert read_lock(new.db) == {
        "embedding_model": "scripted-embed",
        "vector_dim": "384",
        "embedding_endpoint": base_url,
    }


def test_reembed_refuses_an_unknown_vector_column(store: Store) -> None:
    with store.db.transaction() as tx:
        tx.conn.execute("ALTER TABLE patterns ADD COLUMN embedding vector(384)")
    with pytest.raises(errors.ConfigurationError, match=r"patterns\.embedding"):
        reembed(store)


def test_a_second_reembed_at_the_same_time_is_refused(store: Store, database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s, %s)", REEMBED_LOCK)
        with pytest.raises(errors.StageBusy, match="another `stash reembed` is running"):
            reembed(store)


def test_a_write_in_flight_in_any_namespace_does_not_look_like_a_reembed(store: Store, database_url: str) -> None:
    """Writers hold (ID_ORDER_KEY, namespace id) until they commit; reembed's lock is not one of those."""
    with psycopg.connect(database_url) as writer:
        writer.execute("SELECT pg_advisory_xact_lock(%s, %s)", (ID_ORDER_KEY, REEMBED_LOCK[1]))
        report = reembed(store)  # before the keys were separated: StageBusy while namespace 3 wrote
        writer.rollback()
    assert report.model == store.embedder.name


def test_reembed_refills_entity_names_in_the_new_dimension(store: Store, make_store: Any) -> None:
    from stash_pipeline.memory import facts

    facts.assert_fact(store, "/", "Alice owns the billing runbook", entity="Alice", property="owns", value="runbook")
    new = make_store(embedder="hash", vector_dim=256)
    report = reembed(new)
    assert report.entities == 1 and report.dims_changed is True
    with new.db.transaction() as tx:
        row = tx.conn.execute("SELECT embedding_model, vector_dims(embedding) AS dim FROM entities").fetchone()
    assert (row["embedding_model"], row["dim"]) == ("hash-256", 256)


def test_a_minilm_database_under_the_int8_default_says_how_to_go_on(make_store: Any) -> None:
    # A database first written with the numpy MiniLM, opened with the new default: the
    # error names the exact setting that keeps it working, and reembed moves it over.
    old = make_store(embedder="minilm", vector_dim=384)
    seed(old)
    old.embedder.check_lock()
    new = make_store(embedder="minilm-int8", vector_dim=384)
    with pytest.raises(errors.EmbeddingModelMismatch) as info:
        new.embedder.embed_one("anything")
    message = str(info.value)
    assert "STASH_EMBEDDER=minilm)" in message and "stash reembed" in message
    report = reembed(new)
    assert report.model == "all-MiniLM-L6-v2-int8"
    assert {model for model, _ in vectors_of(new, "episodes").values()} == {"all-MiniLM-L6-v2-int8"}
    assert read_lock(new.db)["embedding_model"] == "all-MiniLM-L6-v2-int8"
    new.embedder.embed_one("anything")  # the lock now matches


def test_without_stash_embedder_a_database_keeps_the_local_model_it_was_written_with(
    make_store: Any, database_url: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An upgrade must not stop writes: a database written by the numpy MiniLM, opened with
    # no STASH_EMBEDDER given, goes on with that model rather than the new default.
    from stash_pipeline.config import load_settings

    old = make_store(embedder="minilm", vector_dim=384)
    seed(old)
    old.embedder.check_lock()
    monkeypatch.delenv("STASH_EMBEDDER", raising=False)
    settings = load_settings(database_url=database_url, home=tmp_path / "home", vector_dim=384)
    assert settings.embedder == "minilm-int8"  # the default a fresh database gets
    upgraded = Store.open(settings)
    try:
        assert upgraded.embedder.name == "all-MiniLM-L6-v2"
        assert upgraded.settings.embedder == "minilm"
        upgraded.embedder.embed_one("a new text after the upgrade")  # no model mismatch
    finally:
        upgraded.close()
