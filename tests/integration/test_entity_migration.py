"""Migration 0009 gives existing facts and relationship ends entities by normalised exact match."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from alembic.script import ScriptDirectory

from stash_pipeline.config import load_settings
from stash_pipeline.db.migrate import _config, migrate


@pytest.fixture
def before_entities(database_at: Any) -> str:
    """A database migrated up to the revision before the entities."""
    down = ScriptDirectory.from_config(_config("postgresql://x/y", 384)).get_revision("0009").down_revision
    assert isinstance(down, str)
    return str(database_at(down))


def _fact(conn: psycopg.Connection, namespace_id: int, entity: str) -> int:
    return conn.execute(
        "INSERT INTO facts (namespace_id, content, entity, origin, embedding, embedding_model) "
        "VALUES (%s, %s, %s, 'asserted', array_fill(0.1, ARRAY[384])::vector, 'hash-384') RETURNING id",
        (namespace_id, f"{entity} did something", entity),
    ).fetchone()[0]


def test_backfill_links_every_spelling_by_exact_normalised_match(before_entities: str, tmp_path: Path) -> None:
    with psycopg.connect(before_entities, autocommit=True) as conn:
        team = conn.execute("INSERT INTO namespaces (slug) VALUES ('/team') RETURNING id").fetchone()[0]
        other = conn.execute("INSERT INTO namespaces (slug) VALUES ('/other') RETURNING id").fetchone()[0]
        alice = [_fact(conn, team, name) for name in ("Alice", "alice", "she (Alice)")]
        chen = _fact(conn, team, "Alice Chen")
        elsewhere = _fact(conn, other, "Alice")
        conn.execute(
            "INSERT INTO relationships (namespace_id, from_entity, relation_type, to_entity, source_fact_id) "
            "VALUES (%s, 'ALICE', 'mentors', 'Bob', %s)",
            (team, alice[0]),
        )
    migrate(load_settings(database_url=before_entities, home=tmp_path, embedder="hash", vector_dim=384), before_entities)

    with psycopg.connect(before_entities) as conn:
        entities = {(ns, norm): (eid, name) for eid, ns, norm, name in conn.execute(
            "SELECT id, namespace_id, normalised, name FROM entities")}
        assert set(entities) == {(team, "alice"), (team, "alice chen"), (team, "bob"), (other, "alice")}
        assert entities[(team, "alice")][1] == "Alice"  # named by the first spelling seen
        links = dict(conn.execute("SELECT id, entity_id FROM facts").fetchall())
        assert {links[i] for i in alice} == {entities[(team, "alice")][0]}
        assert links[chen] == entities[(team, "alice chen")][0]  # no token rule at migration time
        assert links[elsewhere] == entities[(other, "alice")][0]
        ends = conn.execute("SELECT from_entity_id, to_entity_id FROM relationships").fetchone()
        assert ends == (entities[(team, "alice")][0], entities[(team, "bob")][0])
        aliases = conn.execute("SELECT count(*) FROM entity_aliases").fetchone()[0]
        assert aliases == 4
