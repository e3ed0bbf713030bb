"""Entity-aware recall: a query that names a known entity gets that entity's current facts
(stated under any of its aliases) and, one current relationship away, its neighbours'
facts; a query naming no entity ranks exactly as without the entity leg; with as_of or
known_at the leg follows the facts and relationships of that time.

The graph: Alice Chen (aliases "Alice", "achen") worked on the courier tracker (superseded)
and now works on the loyalty platform (alias "Kestrel"); chatter episodes name "Alice" and
"work" so that plain text search has better-looking candidates than the facts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from stash_pipeline import recall
from stash_pipeline.embedding import cache
from stash_pipeline.embedding.cache import as_array, query_key
from stash_pipeline.memory import entities, episodes, facts, namespaces
from stash_pipeline.memory.entities import normalise
from stash_pipeline.recall import entities as entity_recall
from stash_pipeline.recall.config import DEFAULT, VARIANTS

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
        vector = entities.name_embedding(store.embedder, spelling)
        with store.db.transaction() as tx:
            ids.append(entities.find_or_create(tx, namespaces.resolve_id(tx, NS), spelling, normalise(spelling),
                                               embedding=vector,
                                               embedding_model=store.settings.embedding_model_name)[0])
    for other in ids[1:]:
        if other != ids[0]:
            entities.merge_entities(store, ids[0], other)
    return ids[0]


def _fact(store: Any, content: str, entity: str, prop: str, value: str) -> int:
    return facts.assert_fact(store, NS, content, entity=entity, property=prop, value=value, supersede=True).fact.id


@pytest.fixture
def graph(store: Any) -> dict[str, int]:
    namespaces.create(store, NS)
    namespaces.create(store, OTHER)
    episodes.remember_batch(store, NS, [{"content": text} for text in CHATTER])
    episodes.remember_batch(store, OTHER, [{"content": "Alice from accounting sent the invoices."}])
    # the old project and its datastore first, then the move: "then" lies between them
    ids = {
        "old_work": _fact(store, "Alice Chen works on the courier tracker.", "Alice Chen", "works_on", "courier tracker"),
        "old_database": _fact(store, "The courier tracker keeps its records in DynamoDB.", "courier tracker",
                              "datastore", "DynamoDB"),
        "role": _fact(store, "Alice Chen is a staff engineer.", "Alice Chen", "role", "staff engineer"),
    }
    with store.db.transaction() as tx:
        ids["then"] = tx.conn.execute("SELECT clock_timestamp() AS t").fetchone()["t"]
    ids |= {
        "work": _fact(store, "achen moved to the Kestrel team this quarter.", "Alice Chen", "works_on",
                      "loyalty platform"),
        "database": _fact(store, "Kestrel keeps its records in Postgres 16.", "loyalty platform", "datastore",
                          "Postgres 16"),
    }
    alice = _entity(store, "Alice Chen", ["Alice", "achen"])  # the facts above already named "Alice Chen"
    loyalty = _entity(store, "loyalty platform", ["Kestrel", "loyalty-platform"])
    courier = _entity(store, "courier tracker", [])
    with store.db.transaction() as tx:
        namespace_id = namespaces.resolve_id(tx, NS)
        # only the relationships stage writes relationships: the row it would write, on its
        # source fact's two time axes
        for target, target_id, fact_key in (("courier tracker", courier, "old_work"),
                                             ("loyalty platform", loyalty, "work")):
            tx.conn.execute(
                "INSERT INTO relationships (namespace_id, from_entity, relation_type, to_entity, source_fact_id,"
                " from_entity_id, to_entity_id, valid_from, valid_until, recorded_at, retired_at)"
                " SELECT %s, 'Alice Chen', 'works_on', %s, f.id, %s, %s, f.valid_from, f.valid_until,"
                " f.recorded_at, f.retired_at FROM facts f WHERE f.id = %s",
                (namespace_id, target, alice, target_id, ids[fact_key]),
            )
        linked = {r["id"]: r["entity_id"] for r in tx.conn.execute(
            "SELECT id, entity_id FROM facts WHERE id = ANY(%s)", ([v for k, v in ids.items() if k != "then"],)
        ).fetchall()}
    assert linked[ids["work"]] == linked[ids["role"]] == alice  # assert_fact linked them by name
    assert linked[ids["database"]] == loyalty
    return ids


def _ids(hits: list[Any], kind: str = "fact") -> list[int]:
    return [h.id for h in hits if h.kind == kind]


def test_a_named_person_gets_her_current_facts_under_any_alias_not_superseded_ones(store, graph):
    hits = recall.recall(store, "What does Alice work on?", [NS])
    found = _ids(hits)
    assert graph["work"] in found  # stated as "achen ...": no word in common with the query
    assert graph["role"] in found  # stated as "Alice Chen ..."
    assert graph["old_work"] not in found  # superseded
    work = next(h for h in hits if h.id == graph["work"] and h.kind == "fact")
    assert work.score_parts["entity"] == pytest.approx(work.score)
    assert work.current is True

    without = _ids(recall.recall(store, "What does Alice work on?", [NS], config=VARIANTS["no_entity_leg"]))
    assert graph["work"] not in without  # the chatter outranks it on words alone


def test_of_a_talkative_persons_newest_facts_the_leg_takes_those_nearest_the_query(store, graph):
    # thirty newer facts about Alice that have nothing to do with her work: the newest
    # facts_per_entity would all be these
    chatter = [f"Alice mentioned the weather of day {i}, sunny then pouring." for i in range(30)]
    for i, text in enumerate(chatter):
        _fact(store, text, "Alice Chen", f"chat_{i}", "weather")
    config = VARIANTS["no_grouping"].replace(facts_per_entity=5, max_facts=5)
    # (the test embedder is lexical: "Kestrel team" is what the query shares with the fact)
    leg = [h for h in recall.recall(store, "Which Kestrel team is Alice in?", [NS], config=config, limit=30)
           if h.kind == "fact" and h.score_parts.get("entity") is not None]
    assert graph["work"] in _ids(leg) and len(leg) == 5
    # a scan bound that leaves only chatter in reach finds only chatter
    bounded = config.replace(entity_scan=5)
    leg = [h for h in recall.recall(store, "Which Kestrel team is Alice in?", [NS], config=bounded, limit=30)
           if h.kind == "fact" and h.score_parts.get("entity") is not None]
    assert leg and graph["work"] not in _ids(leg)


def test_one_hop_reaches_the_current_project_not_the_old_one(store, graph):
    # the leg's own rows and parts: grouping off (it fetches past the limit, where the
    # hybrid row of a fact, with its own parts, would join the leg's) and the name left in
    # the query's vector (masked, it brings the direct fact to the vector leg too)
    hits = recall.recall(store, "Which database does Alice's project use?", [NS],
                         config=VARIANTS["no_grouping"].replace(mask_names=False))
    found = _ids(hits)
    assert graph["database"] in found
    assert graph["old_database"] not in found  # its relationship's source fact is superseded
    hop = next(h for h in hits if h.id == graph["database"] and h.kind == "fact")
    direct = next(h for h in hits if h.id == graph["work"] and h.kind == "fact")
    # the hop fact gets hop_factor of the credit for "Alice" that the direct fact gets
    assert hop.score_parts["coverage"] < direct.score_parts["coverage"]
    assert direct.score_parts["entity"] == pytest.approx(
        DEFAULT.w_vector * max(direct.score_parts["vector"], 0)
        + (1 - DEFAULT.w_vector) * min(direct.score_parts["coverage"], 1))

    off = VARIANTS["no_entity_leg"]
    assert graph["database"] not in _ids(recall.recall(store, "Which database does Alice's project use?", [NS],
                                                       config=off))


def test_a_query_whose_names_were_masked_weighs_its_cosine_by_w_vector_masked(store, graph):
    query = "Which database does Alice's project use?"

    def scores(**changes: Any) -> dict[int, float]:
        return {h.id: h.score for h in recall.recall(store, query, [NS], config=DEFAULT.replace(**changes))}

    assert scores(w_vector_masked=0.6) != scores(w_vector_masked=0.9)  # "Alice" is masked in NS
    assert scores(mask_names=False, w_vector_masked=0.6) == scores(mask_names=False, w_vector_masked=0.9)
    assert scores(mask_names=False, w_vector=0.6) != scores(mask_names=False, w_vector=0.9)


def test_every_fact_the_leg_found_joins_the_candidates_weighted_as_about_the_subject(store, graph):
    # grouping's pool: with no over-fetch and one result asked for, the statement still
    # returns every fact the entity leg reached, each ranked by fact_weight * subject_weight
    tight = DEFAULT.replace(overfetch=0)

    def rows(config):
        return recall.search(store, recall.RecallRequest.of(store.settings, "What does Alice work on?", [NS], limit=1,
                                                            config=config)).rows

    pooled = rows(tight)
    reached = [r for r in pooled if r["entity_score"] is not None]
    assert {graph["work"], graph["role"]} <= {r["id"] for r in reached} and len(pooled) > 1
    assert all(r["weight"] == pytest.approx(DEFAULT.fact_weight * DEFAULT.subject_weight) for r in reached)
    assert len(rows(tight.replace(entity_pool=False))) == 1
    assert all(r["weight"] == 1 for r in rows(tight.replace(grouping=False)))
    # the weight orders the hits; the score stays the evidence's own
    work = next(h for h in recall.recall(store, "What does Alice work on?", [NS]) if h.id == graph["work"])
    assert work.score_parts["weight"] == pytest.approx(DEFAULT.fact_weight * DEFAULT.subject_weight)
    assert work.score == pytest.approx(work.score_parts["entity"])


def test_a_query_naming_no_entity_is_unaffected(store, graph):
    query = "who brought cake for the floor"
    assert entity_recall.query_phrases(query)  # phrases were looked up, none is an alias
    with_leg = [(h.kind, h.id, h.score) for h in recall.recall(store, query, [NS])]
    without = [(h.kind, h.id, h.score) for h in recall.recall(store, query, [NS], config=VARIANTS["no_entity_leg"])]
    assert with_leg == without


def test_aliases_resolve_only_in_the_namespaces_in_scope(store, graph):
    hits = recall.recall(store, "What does Alice work on?", [OTHER])
    assert _ids(hits) == []
    assert all(h.namespace == OTHER for h in hits)


@pytest.mark.parametrize("time", ["as_of", "known_at"])
def test_as_of_and_known_at_follow_the_links_and_facts_of_that_time(store, graph, time):
    query = "Which database does Alice's project use?"
    then = recall.recall(store, query, [NS], **{time: graph["then"]})
    reached = {h.id: h for h in then if h.kind == "fact" and "entity" in h.score_parts}
    # then: the old project's datastore, one link away (link and source fact current then)
    assert graph["old_database"] in reached
    assert graph["database"] not in _ids(then) and graph["work"] not in _ids(then)  # not yet true / known
    now = {h.id for h in recall.recall(store, query, [NS]) if h.kind == "fact" and "entity" in h.score_parts}
    assert graph["database"] in now and graph["old_database"] not in now


def test_query_phrases_are_normalised_ngrams_without_possessives():
    phrases = entity_recall.query_phrases("Which database does Alice Chen's loyalty-platform use?")
    assert "alice chen" in phrases and "alice" in phrases
    assert "loyalty platform" in phrases  # "loyalty-platform" normalises as its alias does
    assert "chen s" not in phrases and "s" not in phrases
    assert len(entity_recall.query_phrases(" ".join(f"w{i}" for i in range(100)))) == DEFAULT.max_phrases


def cached_vector(store: Any, text: str, scope: list[str], masked: str | None = None) -> Any:
    """The vector the embedding cache holds for query ``text`` (mixed with ``masked``) over ``scope``."""
    with store.db.transaction() as tx:
        row = tx.conn.execute("SELECT embedding FROM embedding_cache WHERE text_hash = %s",
                              (query_key(text, scope, masked=masked),)).fetchone()
    return None if row is None else as_array(row["embedding"])


def test_a_name_common_in_scope_is_masked_in_most_of_the_query_vector(store, graph):
    query = "What does Alice Chen's team work on?"
    masked = "What does their team work on?"
    recall.recall(store, query, [NS])
    vectors = store.embedder.compute({"m": masked, "q": query})
    mixed = DEFAULT.mask_weight * vectors["m"] + (1 - DEFAULT.mask_weight) * vectors["q"]
    assert cached_vector(store, query, [NS], masked) == pytest.approx(mixed / np.linalg.norm(mixed), abs=1e-6)
    assert cached_vector(store, query, [NS]) is None
    recall.recall(store, query, [OTHER])  # no alias there: the query as asked
    assert cached_vector(store, query, [OTHER]) == pytest.approx(vectors["q"], abs=1e-6)
    recall.recall(store, "Is Alice in?", [NS], config=DEFAULT.replace(mask_names=False))
    assert cached_vector(store, "Is Alice in?", [NS]) is not None
    recall.recall(store, "Is Alice out?", [NS], mode="vector")  # a single-signal mode: as asked
    assert cached_vector(store, "Is Alice out?", [NS]) is not None
    # the text and entity legs still go by the name
    assert graph["role"] in _ids(recall.recall(store, "Alice staff", [NS]))


def test_only_a_name_in_many_of_the_scopes_rows_is_masked(store):
    """A speaker's name on every turn tells the turns little apart; a project named once is
    what the question is about, so its name stays in the vector."""
    slug = "/chat/tom"
    namespaces.create(store, slug)
    episodes.remember_batch(store, slug, [{"content": f"Tom: note {i} about the week"} for i in range(30)])
    facts.assert_fact(store, slug, "Tom leads the Zephyr launch", entity="Tom", property="leads", value="launch")
    facts.assert_fact(store, slug, "Zephyr ships on Friday", entity="Zephyr", property="ships", value="Friday")
    recall.recall(store, "When does Tom ship Zephyr?", [slug])
    assert cached_vector(store, "When does Tom ship Zephyr?", [slug], "When does they ship Zephyr?") is not None
    # with a share no name reaches, nothing is masked
    recall.recall(store, "Does Tom like Zephyr?", [slug], config=DEFAULT.replace(mask_share=1.01))
    assert cached_vector(store, "Does Tom like Zephyr?", [slug]) is not None


def test_a_process_looks_the_names_up_again_after_a_while(store, monkeypatch):
    slug = "/chat/ana"
    namespaces.create(store, slug)
    episodes.remember_batch(store, slug, [{"content": f"note {i} about the week"} for i in range(30)])
    facts.assert_fact(store, slug, "Ana runs the Friday demo", entity="Ana", property="runs", value="demo")
    query = "What does Ana run?"
    recall.recall(store, query, [slug])  # Ana in 1 of 31 rows: kept
    assert cached_vector(store, query, [slug]) is not None
    episodes.remember_batch(store, slug, [{"content": f"Ana: chat {i}"} for i in range(30)])
    recall.recall(store, query, [slug])  # a moment later: the names looked up before
    assert cached_vector(store, query, [slug], "What does they run?") is None
    monkeypatch.setattr(cache, "MASKED_FOR", 0.0)
    recall.recall(store, query, [slug])  # now in half the rows: masked
    assert cached_vector(store, query, [slug], "What does they run?") is not None


def test_masked_replaces_each_named_run_of_words_by_a_pronoun():
    masked = entity_recall.masked
    assert masked("Would Priya like a handmade gift?", ["priya"]) == "Would they like a handmade gift?"
    assert masked("Did Alice Chen's team ship?", ["alice", "alice chen"]) == "Did their team ship?"  # longest first
    assert masked("Did ALICE and achen meet Bob?", ["alice", "achen"]) == "Did they and they meet Bob?"
    assert masked("Alicea met Alice.", ["alice"]) == "Alicea met they."  # whole words only
    assert masked("Nobody named here", []) == "Nobody named here"
