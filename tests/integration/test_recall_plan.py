"""The recall statement reads facts and episodes through indexes only, at a moderate size.

A few thousand rows is where the planner, left alone, reads the whole facts table and
sorts it instead of asking the HNSW index (measured at 2,000 facts). Both plans recall
can run are checked: the custom plan of a statement's first executions on a connection
(planned with the values) and the generic plan it switches to once the client prepares it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from stash_pipeline.db.gateway import Session
from stash_pipeline.db.sql import query
from stash_pipeline.memory import episodes, facts, namespaces, recall

TOPICS = ("deploy", "invoice", "standup", "kafka", "postgres", "vpn", "lunch", "retro")


def recall_parameters(store: Any, text: str, **options: Any) -> dict[str, Any]:
    """The parameters recall sends to recall_hybrid for ``text`` (captured by a spy)."""
    captured: dict[str, Any] = {}
    original = Session.all

    def spy(self: Session, name: str, /, **params: Any) -> list[dict[str, Any]]:
        if name == "recall_hybrid":
            captured.update(params)
        return original(self, name, **params)

    Session.all = spy  # type: ignore[method-assign]
    try:
        recall.recall(store, text, **options)
    finally:
        Session.all = original  # type: ignore[method-assign]
    return captured


def with_numbered_parameters(sql: str) -> str:
    """``%(name)s`` placeholders as ``$1, $2 ...`` (what EXPLAIN (GENERIC_PLAN) takes)."""
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in order:
            order.append(match.group(1))
        return f"${order.index(match.group(1)) + 1}"

    return re.sub(r"%\((\w+)\)s", number, sql).replace("%%", "%")


def plan(store: Any, params: dict[str, Any] | None) -> str:
    """The plan recall_hybrid gets under recall's own settings: custom (with values) or generic."""
    with store.db.transaction() as tx:
        tx.one("recall_search_params", ef_search=str(recall.EF_SEARCH))
        if params is None:
            rows = tx.conn.execute("EXPLAIN (GENERIC_PLAN, COSTS OFF) " + with_numbered_parameters(query("recall_hybrid")))
        else:
            rows = tx.conn.execute("EXPLAIN (COSTS OFF) " + query("recall_hybrid"), params)
        return "\n".join(next(iter(r.values())) for r in rows.fetchall())


def test_recall_reads_facts_and_episodes_by_index_only(store):
    namespaces.create(store, "/plan/a")
    namespaces.create(store, "/plan/b")
    for slug in ("/plan/a", "/plan/b"):
        items = [{"content": f"{TOPICS[i % len(TOPICS)]} note {i} from {slug}: step {i % 37} of item {i}"}
                 for i in range(1500)]
        for start in range(0, len(items), 500):
            episodes.remember_batch(store, slug, items[start:start + 500])
        for i in range(250):
            facts.assert_fact(store, slug, f"{TOPICS[i % len(TOPICS)]} owner {i} is person {i % 13}",
                              entity=f"service-{i}", property="owner", value=f"person {i % 13}")
    with store.db.transaction() as tx:
        tx.conn.execute("ANALYZE episodes")
        tx.conn.execute("ANALYZE facts")
    queries = {
        "common words": recall_parameters(store, "what was the deploy step", namespaces="/"),
        "identifier": recall_parameters(store, "item 1234", namespaces="/plan/a"),
        "several namespaces": recall_parameters(store, "kafka owner", namespaces=["/plan/a", "/plan/b"]),
        "as_of": recall_parameters(store, "vpn owner", as_of=datetime.now(UTC)),
        "include_history": recall_parameters(store, "lunch note", include_history=True),
    }
    plans = {name: plan(store, params) for name, params in queries.items()} | {"generic": plan(store, None)}
    for name, text in plans.items():
        assert "facts_embedding_hnsw" in text and "episodes_embedding_hnsw" in text, (name, text)
        assert "_search_gin" in text, (name, text)
        scans = re.findall(r"Seq Scan on (\w+)", text)
        assert not {"facts", "episodes"} & set(scans), (name, scans, text)
