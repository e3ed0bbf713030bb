"""Migration 0019: the HNSW reads' half-precision key takes the vector columns' own dimension.

A store re-embedded to another model (``stash reembed``) has vector columns of that
model's size, whatever STASH_VECTOR_DIM says; the key and its indexes must follow the
columns, or the index build fails (a cast to the wrong dimension) and the upgrade with it.
"""

from __future__ import annotations

import psycopg
from alembic import command
from pgvector.psycopg import register_vector

from stash_pipeline.db.migrate import _config


def test_the_key_follows_the_columns_dimension_and_replaces_the_full_precision_indexes(database_at):
    dsn = database_at("0018")
    with psycopg.connect(dsn, autocommit=True) as conn:
        # as reembed leaves a store moved to an 8-dimensional model
        conn.execute("DROP INDEX episodes_embedding_hnsw")
        conn.execute("DROP INDEX facts_embedding_hnsw")
        conn.execute("ALTER TABLE episodes ALTER COLUMN embedding TYPE vector(8) USING NULL")
        conn.execute("ALTER TABLE facts ALTER COLUMN embedding TYPE vector(8) USING NULL")
        conn.execute("CREATE INDEX episodes_embedding_hnsw ON episodes USING hnsw (embedding vector_cosine_ops)")
        conn.execute("CREATE INDEX facts_embedding_hnsw ON facts USING hnsw (embedding vector_cosine_ops)")
        namespace = conn.execute("INSERT INTO namespaces (slug) VALUES ('/k') RETURNING id").fetchone()[0]
        conn.execute(
            "INSERT INTO episodes (namespace_id, content, embedding, embedding_model) "
            "SELECT %s, 'turn ' || g, ARRAY[g, 1, 2, 3, 4, 5, 6, 7]::real[]::vector, 'm' "
            "FROM generate_series(1, 50) g", (namespace,))

    command.upgrade(_config(dsn, 384), "0019")  # the configured dimension is not the columns'

    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        indexes = dict(conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN ('episodes', 'facts') "
            "AND indexdef ILIKE '%%using hnsw%%'").fetchall())
        assert set(indexes) == {"episodes_embedding_key_hnsw", "facts_embedding_key_hnsw"}, indexes
        assert all("halfvec(8)" in d for d in indexes.values()), indexes
        conn.execute("SET enable_seqscan = off")
        query = "ORDER BY embedding_key(embedding) <=> embedding_key('[3,1,2,3,4,5,6,7]'::vector) LIMIT 1"
        plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN SELECT id FROM episodes {query}").fetchall())
        assert "episodes_embedding_key_hnsw" in plan, plan  # embedding_key inlines to the indexed cast
        content = conn.execute(f"SELECT content FROM episodes {query}").fetchone()[0]
        assert content == "turn 3"
