"""Migration 0011 repairs timelines stored before one value at a time was enforced: a late
statement closed at the current value's start over an older closed value (the Initech
shape) ends where the next value begins; stated ends are kept; open contradictions on
withdrawn facts are resolved."""

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
def at_0010(database_at: Any) -> str:
    return str(database_at("0010"))


def test_migration_repairs_overlapping_history(at_0010: str, tmp_path: Path) -> None:
    vector = "array_fill(0.1, ARRAY[384])::vector"
    with psycopg.connect(at_0010, autocommit=True) as conn:
        def one(sql: str, *params: Any) -> Any:
            return conn.execute(sql, params).fetchone()[0]

        ns = one("INSERT INTO namespaces (slug) VALUES ('/old') RETURNING id")

        def fact(value: str, start: int, end: int | None, prop: str = "works_at") -> int:
            until = None if end is None else year(end)
            return one(f"INSERT INTO facts (namespace_id, content, entity, property, value, origin, embedding, "
                       f"embedding_model, valid_from, valid_until, recorded_valid_until) VALUES (%s, %s, 'Alice', "
                       f"%s, %s, 'asserted', {vector}, 'hash-384', %s, %s, %s) RETURNING id",
                       ns, f"Alice {prop} {value}", prop, value, year(start), until, until)

        # as 0010 stored it: Acme 2020 superseded by Globex 2023, Initech 2019 closed at 2023
        globex = fact("Globex", 2023, None)
        acme = fact("Acme", 2020, None)
        conn.execute("UPDATE facts SET valid_until = %s, superseded_by = %s, retired_at = now(), "
                     "recorded_valid_until = NULL WHERE id = %s", (year(2023), globex, acme))
        initech = fact("Initech", 2019, 2023)
        stated = fact("Hooli", 2010, 2012)  # an end the statement gave
        pizza = fact("pizza", 2019, 2023, "likes")  # several values at once: left alone
        fact("sushi", 2020, None, "likes")
        withdrawn = fact("Umbrella", 2021, None)
        conn.execute("UPDATE facts SET withdrawn_at = now() WHERE id = %s", (withdrawn,))
        conn.execute("INSERT INTO contradictions (namespace_id, old_fact_id, new_fact_id, classification) "
                     "VALUES (%s, %s, %s, 'contradiction')", (ns, globex, withdrawn))

    settings = load_settings(database_url=at_0010, home=tmp_path, embedder="hash", vector_dim=384)
    migrate(settings, at_0010)
    with psycopg.connect(at_0010) as conn:
        got = {r[0]: r[1:] for r in conn.execute(
            "SELECT id, valid_until, recorded_valid_until, stated_valid_until FROM facts")}
        contradiction = conn.execute("SELECT resolved, resolution FROM contradictions").fetchone()
    assert got[initech] == (year(2020), year(2020), None)  # the history close was no stated end
    assert got[stated] == (year(2012), year(2012), year(2012))
    assert got[pizza] == (year(2023), year(2023), year(2023))
    assert contradiction == (True, "withdrawn")
    with Store.open(settings) as store:
        assert [f.value for f in facts.query(store, "/old", as_of=year(2021), property="works_at")] == ["Acme"]
