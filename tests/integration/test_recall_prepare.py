"""The recall statements are prepared on a connection's first recall, and a serving process
has its pool prepare them as it opens each connection (``recall/statement.py``).

What is checked is the server's own list of a connection's prepared statements
(``pg_prepared_statements``): a recall on a connection prepared at connect adds no
recall statement of its own (psycopg found the prepared one: same SQL, same parameter
types) and only ever runs the generic plan.
"""

from __future__ import annotations

from typing import Any

from stash_pipeline import recall
from stash_pipeline.db.gateway import Database
from stash_pipeline.db.sql import query
from stash_pipeline.memory import episodes, namespaces
from stash_pipeline.recall import statement as recall_prepare
from stash_pipeline.store import Store

#: what only the recall statement says (the server holds it as psycopg sent it: $1 ...)
MARK = "query_vector AS MATERIALIZED"


def recall_statements(db: Database) -> list[dict[str, Any]]:
    """The prepared recall statements of the pool's one connection, oldest first."""
    assert MARK in query("recall")
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE position(%s in statement) > 0 ORDER BY prepare_time", (MARK,)).fetchall()
        conn.commit()
    return rows


def one_connection_store(store: Store) -> Store:
    return Store.open(store.settings, db=Database(store.db.dsn, min_size=1, max_size=1))


def fill(store: Store) -> None:
    namespaces.create(store, "/projects/x")
    episodes.remember_batch(store, "/projects/x", [
        {"content": text} for text in ("we deploy on Fridays", "Alice runs the deploy", "lunch at noon")])


def test_a_connection_prepares_recall_on_its_first_recall(store):
    fill(store)
    fresh = one_connection_store(store)
    try:
        assert recall_statements(fresh.db) == []
        recall.recall(fresh, "who runs the deploy", ["/projects/x"])  # new: its vector sent
        recall.recall(fresh, "who runs the deploy", ["/projects/x"])  # seen: the cache's vector
        # the same parameter types either way (no vector is a NULL typed as one), so one
        # statement, prepared at once and planned once
        assert recall_statements(fresh.db) == [{"generic_plans": 2, "custom_plans": 0}]
    finally:
        fresh.close()


def test_a_connection_prepared_at_connect_plans_no_recall_again(store):
    fill(store)
    fresh = one_connection_store(store)
    try:
        recall_prepare.prepare_on_connect(fresh)
        # prepared once as the pool opened the connection
        assert recall_statements(fresh.db) == [{"generic_plans": 1, "custom_plans": 0}]
        recall.recall(fresh, "who runs the deploy", ["/projects/x"])  # new: embedded, then once
        recall.recall(fresh, "who runs the deploy", ["/projects/x"])  # seen before: once
        recall.recall_results(fresh, "lunch", ["/projects/x"], context=1)  # new, context turns
        assert recall_statements(fresh.db) == [{"generic_plans": 4, "custom_plans": 0}]
    finally:
        fresh.close()
