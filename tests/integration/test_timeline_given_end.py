"""A fact's given end (``given_valid_until``: an expiry, a rejection) survives the
timeline's recomputation; migration 0015 backfills it from ends the timeline rule does
not explain, so the first recomputation of an old key changes nothing it should not."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from stash_pipeline.config import load_settings
from stash_pipeline.db.migrate import migrate
from stash_pipeline.memory import facts
from stash_pipeline.store import Store


def year(n: int) -> datetime:
    return datetime(n, 1, 1, tzinfo=UTC)


@pytest.fixture
def at_0014(database_at: Any) -> str:
    """A database at 0014, the revision before the given ends."""
    return str(database_at("0014"))


def test_expired_and_rejected_facts_keep_their_ends_when_the_key_is_recomputed(at_0014: str, tmp_path: Path) -> None:
    vector = "array_fill(0.1, ARRAY[384])::vector"
    with psycopg.connect(at_0014, autocommit=True) as conn:
        def one(sql: str, *params: Any) -> Any:
            return conn.execute(sql, params).fetchone()[0]

        ns = one("INSERT INTO namespaces (slug) VALUES ('/old') RETURNING id")

        def fact(value: str, start: int, end: int | None, by: int | None = None) -> int:
            until = None if end is None else year(end)
            return one(f"INSERT INTO facts (namespace_id, content, entity, property, value, origin, embedding, "
                       f"embedding_model, valid_from, valid_until, recorded_valid_until, superseded_by) VALUES "
                       f"(%s, %s, 'Alice', 'works_at', %s, 'asserted', {vector}, 'hash-384', %s, %s, %s, %s) "
                       f"RETURNING id", ns, f"Alice works at {value}", value, year(start), until, until, by)

        # as 0013 stored them: Globex from 2018; Acme 2010 expired by decay in 2015; Initech
        # told late, history before Globex; Hooli from 2019 rejected (keep_old) for Globex
        globex = fact("Globex", 2018, None)
        acme = fact("Acme", 2010, 2015)
        initech = fact("Initech", 2016, 2018)
        hooli = fact("Hooli", 2019, 2019, by=globex)

    settings = load_settings(database_url=at_0014, home=tmp_path, embedder="hash", vector_dim=384)
    migrate(settings, at_0014)
    with psycopg.connect(at_0014) as conn:
        given = dict(conn.execute("SELECT id, given_valid_until FROM facts").fetchall())
    assert given == {globex: None, acme: year(2015), initech: None, hooli: year(2019)}

    with Store.open(settings) as store:
        facts.withdraw(store, initech, "wrong")  # the key is recomputed without Initech
        def at(y: int) -> list[str]:
            return [f.value for f in facts.query(store, "/old", as_of=datetime(y, 7, 1, tzinfo=UTC))]
        assert [at(y) for y in (2012, 2016, 2018, 2019, 2020)] == [["Acme"], [], ["Globex"], ["Globex"], ["Globex"]]
        assert facts.get(store, hooli).valid_until == year(2019)
