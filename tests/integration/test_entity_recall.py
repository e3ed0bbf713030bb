"""Entity-aware recall: a query that names a known entity gets that entity's current facts
(stated under any of its aliases) and, one current relationship away, its neighbours'
facts; a query naming no entity ranks exactly as without the entity leg.

The graph: Alice Chen (aliases "Alice", "achen") worked on the courier tracker (superseded)
and now works on the loyalty platform (alias "Kestrel"); chatter episodes name "Alice" and
"work" so that plain text search has better-looking candidates than the facts.
"""

from __future__ import annotations

from typing import Any

import pytest

from stash_pipeline.memory import (
    entities,
    entity_recall,
    episodes,
    facts,
    namespaces,
    recall,
    recall_grouping,
)
from stash_pipeline.memory.entities import normalise

NS = "/org"
OTHER = "/elsewhere"

CHATTER = [
    "Alice brought cake for the whole floor today.",
    "Alice will work from home on Friday.",
    "Alice asked whether anyone has a spare HDMI adapter for work.",
    "Alice is late to standup, she is stuck at the dentist.",
    "Does Alice still want the meeting room at ten?",
    "Alice shared photos from the weekend hike.",
    "Reminder for Alice: the work laptop goes back to IT on Monday.",
    "Alice said the coffee machine on the third floor works again.",
    "Alice wants everyone to work on the retro notes before Friday.",
    "Alice booked a desk near the window.",
    "Alice says the printer is out of toner again.",
    "Alice hates the new chairs, they creak.",
]


def _entity(store: Any, name: str, aliases: list[str]) -> int:
    """The entity ``name`` (as an asserted fact's entity resolves), its aliases merged into it."""
    ids = []
    for spelling in [name, *aliases]:
        vector = entities.name_embedding(store, spelling)
        with store.db.transaction() as tx:
            ids.append(entities.find_or_create(tx, namespaces.resolve_id(tx, NS), spelling, normalise(spelling),
                                               embedding=vector,
                                               embedding_model=store.settings.embedding_model_name)[0])
    for other in ids[1:]:
        if other != ids[0]:
            entities.merge_entities(store, ids[0], other)
    return ids[0]


def _fact(store: Any, content: str, entity: str, prop: str, value: str) -> int:
    return facts.assert_fact(store, NS, content, entity=entity, property=prop, value=value, supersede=True)["fact"].id


@pytest.fixture
def graph(store: Any) -> dict[str, int]:
    namespaces.create(store, NS)
    namespaces.create(store, OTHER)
    episodes.remember_batch(store, NS, [{"content": text} for text in CHATTER])
    episodes.remember_batch(store, OTHER, [{"content": "Alice from accounting sent the invoices."}])
    ids = {
        "old_work": _fact(store, "Alice Chen works on the courier tracker.", "Alice Chen", "works_on", "courier tracker"),
        "role": _fact(store, "Alice Chen is a staff engineer.", "Alice Chen", "role", "staff engineer"),
        "work": _fact(store, "achen moved to the Kestrel team this quarter.", "Alice Chen", "works_on",
                      "loyalty platform"),
        "database": _fact(store, "Kestrel keeps its records in Postgres 16.", "loyalty platform", "datastore",
                          "Postgres 16"),
        "old_database": _fact(store, "The courier tracker keeps its records in DynamoDB.", "courier tracker",
                              "datastore", "DynamoDB"),
    }
    alice = _entity(store, "Alice Chen", ["Alice", "achen"])  # the facts above already named "Alice Chen"
    loyalty = _entity(store, "loyalty platform", ["Kestrel", "loyalty-platform"])
    courier = _entity(store, "courier tracker", [])
    with store.db.transaction() as tx:
        namespace_id = namespaces.resolve_id(tx, NS)
        # only the relationships stage writes relationships: the row it would write
        for target, target_id, fact_key in (("courier tracker", courier, "old_work"),
                                             ("loyalty platform", loyalty, "work")):
            tx.conn.execute(
                "INSERT INTO relationships (namespace_id, from_entity, relation_type, to_entity, source_fact_id,"
                " from_entity_id, to_entity_id) VALUES (%s, 'Alice Chen', 'works_on', %s, %s, %s, %s)",
                (namespace_id, target, ids[fact_key], alice, target_id),
            )
        linked = {r["id"]: r["entity_id"] for r in tx.conn.execute(
            "SELECT id, entity_id FROM facts WHERE id = ANY(%s)", (list(ids.values()),)).fetchall()}
    assert linked[ids["work"]] == linked[ids["role"]] == alice  # assert_fact linked them by name
    assert linked[ids["database"]] == loyalty
    return ids


def _ids(hits: list[Any], kind: str = "fact") -> list[int]:
    return [h.id for h in hits if h.kind == kind]


def test_a_named_person_gets_her_current_facts_under_any_alias_not_superseded_ones(store, graph, monkeypatch):
    hits = recall.recall(store, "What does Alice work on?", NS)
    found = _ids(hits)
    assert graph["work"] in found  # stated as "achen ...": no word in common with the query
    assert graph["role"] in found  # stated as "Alice Chen ..."
    assert graph["old_work"] not in found  # superseded
    work = next(h for h in hits if h.id == graph["work"] and h.kind == "fact")
    assert work.score_parts["entity"] == pytest.approx(work.score)
    assert work.current is True

    monkeypatch.setattr(entity_recall, "ENABLED", False)
    without = _ids(recall.recall(store, "What does Alice work on?", NS))
    assert graph["work"] not in without  # the chatter outranks it on words alone


def test_one_hop_reaches_the_current_project_not_the_old_one(store, graph, monkeypatch):
    # the leg's own rows and parts: grouping off (it fetches past the limit, where the
    # hybrid row of a fact, with its own parts, would join the leg's)
    hits = recall.recall(store, "Which database does Alice's project use?", NS,
                         grouping=recall_grouping.GroupingConfig(enabled=False))
    found = _ids(hits)
    assert graph["database"] in found
    assert graph["old_database"] not in found  # its relationship's source fact is superseded
    hop = next(h for h in hits if h.id == graph["database"] and h.kind == "fact")
    direct = next(h for h in hits if h.id == graph["work"] and h.kind == "fact")
    # the hop fact gets HOP_FACTOR of the credit for "Alice" that the direct fact gets
    assert hop.score_parts["coverage"] < direct.score_parts["coverage"]
    assert direct.score_parts["entity"] == pytest.approx(
        recall.W_VECTOR * max(direct.score_parts["vector"], 0)
        + (1 - recall.W_VECTOR) * min(direct.score_parts["coverage"], 1))

    monkeypatch.setattr(entity_recall, "ENABLED", False)
    assert graph["database"] not in _ids(recall.recall(store, "Which database does Alice's project use?", NS))


def test_a_query_naming_no_entity_is_unaffected(store, graph, monkeypatch):
    query = "who brought cake for the floor"
    assert entity_recall.query_phrases(query)  # phrases were looked up, none is an alias
    with_leg = [(h.kind, h.id, h.score) for h in recall.recall(store, query, NS)]
    monkeypatch.setattr(entity_recall, "ENABLED", False)
    without = [(h.kind, h.id, h.score) for h in recall.recall(store, query, NS)]
    assert with_leg == without


def test_aliases_resolve_only_in_the_namespaces_in_scope(store, graph):
    hits = recall.recall(store, "What does Alice work on?", OTHER)
    assert _ids(hits) == []
    assert all(h.namespace == OTHER for h in hits)


def test_history_and_as_of_do_not_use_the_entity_leg(store, graph):
    hits = recall.recall(store, "What does Alice work on?", NS, limit=5, include_history=True)
    assert all(h.score_parts.get("entity") is None for h in hits)


def test_query_phrases_are_normalised_ngrams_without_possessives():
    phrases = entity_recall.query_phrases("Which database does Alice Chen's loyalty-platform use?")
    assert "alice chen" in phrases and "alice" in phrases
    assert "loyalty platform" in phrases  # "loyalty-platform" normalises as its alias does
    assert "chen s" not in phrases and "s" not in phrases
    assert len(entity_recall.query_phrases(" ".join(f"w{i}" for i in range(100)))) == entity_recall.MAX_PHRASES
