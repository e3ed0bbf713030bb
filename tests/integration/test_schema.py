"""Schema guarantees the stages rely on: commit-ordered ids per namespace, migrations idempotent."""

from __future__ import annotations

import psycopg
import pytest

from stash_pipeline.db.migrate import current_revision, head_revision, migrate


def _insert_episode(conn: psycopg.Connection, namespace_id: int, text: str) -> int:
    row = conn.execute(
        "INSERT INTO episodes (namespace_id, content, embedding, embedding_model) "
        "VALUES (%s, %s, array_fill(0.1, ARRAY[384])::vector, 'test') RETURNING id",
        (namespace_id, text),
    ).fetchone()
    return int(row[0])


def test_ids_are_consecutive_without_gaps(database_url):
    with psycopg.connect(database_url, autocommit=True) as conn:
        ids = [_insert_episode(conn, 1, f"episode {i}") for i in range(5)]
    assert ids == list(range(ids[0], ids[0] + 5))


def test_writers_of_one_namespace_serialise_so_ids_commit_in_order(database_url):
    with psycopg.connect(database_url) as first, psycopg.connect(database_url) as second:
        other_ns = first.execute("INSERT INTO namespaces (slug) VALUES ('/other') RETURNING id").fetchone()[0]
        first.commit()
        held = _insert_episode(first, 1, "in flight")  # transaction still open: holds namespace 1's id lock
        second.execute("SET lock_timeout = '300ms'")
        # another namespace is not blocked
        assert _insert_episode(second, other_ns, "elsewhere") > 0
        second.commit()
        # the same namespace must wait: no id can be drawn (and committed) past the in-flight one
        with pytest.raises(psycopg.errors.LockNotAvailable):
            _insert_episode(second, 1, "would overtake")
        second.rollback()
        first.commit()
        later = _insert_episode(second, 1, "after")
        second.commit()
    assert later > held


def test_migrate_is_idempotent_and_at_head(settings, database_url):
    assert current_revision(database_url) == head_revision()
    before, after = migrate(settings, database_url)
    assert before == after == head_revision()


def test_the_word_indexes_keep_no_pending_list(database_url):
    """A GIN pending list is read through in full by every search until it is merged: the
    recall statement's word indexes take each row's lexemes at once instead."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        options = dict(conn.execute(
            "SELECT c.relname, c.reloptions FROM pg_class c "
            "WHERE c.relname IN ('episodes_search_gin', 'facts_search_gin')").fetchall())
        assert options == {"episodes_search_gin": ["fastupdate=off"], "facts_search_gin": ["fastupdate=off"]}
        _insert_episode(conn, 1, "a word index row written at once")
        pending = conn.execute("SELECT gin_clean_pending_list('episodes_search_gin'::regclass)").fetchone()[0]
        assert pending == 0  # nothing waited in a pending list
