"""Entity resolution through the facts and relationships stages, against the scripted model."""

from __future__ import annotations

import pytest

from stash_pipeline.consolidation import runner
from stash_pipeline.stages.entity_resolution import resolvable_key, subset_match
from tests.integration.consolidation.conftest import rows, seed

#: four spellings of one person, each the entity of one observation's fact
SPELLINGS = {
    "chess": "Alice",
    "violin": "alice",
    "Chen": "Alice Chen",
    "sister": "she (Alice)",
}
FIRST = ["Alice plays chess at the club every Monday", "Alice practises the violin before breakfast"]
LATER = ["Alice Chen moved to Lisbon for the new job", "Alice visits her sister in Porto each summer"]


def _entities(store):
    return rows(store, "SELECT id, name, normalised, merged_into FROM entities ORDER BY id")


def _aliases(store):
    return rows(store, "SELECT entity_id, alias, normalised FROM entity_aliases ORDER BY normalised")


def test_four_spellings_of_one_person_resolve_to_one_entity(cstore, server, model):
    model.entity_names.update(SPELLINGS)
    seed(cstore, "/t", FIRST)
    first = runner.run_stage(cstore, "/t", "facts")
    assert first.status == "ok" and first.details["facts_created"] == 2
    seed(cstore, "/t", LATER)
    later = runner.run_stage(cstore, "/t", "facts")
    assert later.details["facts_created"] == 2
    # "Alice Chen" by the token-subset rule, "she (Alice)" by its alias: no model call for either
    assert later.details["entities_by_subset"] == 1 and later.details["entities_by_alias"] == 1
    assert later.model_calls == 1  # the facts call only

    entities = _entities(cstore)
    assert [e["name"] for e in entities] == ["Alice"]
    facts = rows(cstore, "SELECT entity, entity_id FROM facts ORDER BY id")
    assert [f["entity"] for f in facts] == ["Alice", "alice", "Alice Chen", "she (Alice)"]
    assert {f["entity_id"] for f in facts} == {entities[0]["id"]}
    assert [a["normalised"] for a in _aliases(cstore)] == ["alice", "alice chen"]


def test_relationship_ends_resolve_to_the_entities_of_their_names(cstore, server, model):
    seed(cstore, "/t", ["Alice mentors Bob on the Atlas project"])
    runner.run_stage(cstore, "/t", "facts")
    report = runner.run_stage(cstore, "/t", "relationships")
    assert report.rows_written >= 1
    named = {e["normalised"]: e["id"] for e in _entities(cstore)}
    rels = rows(cstore, "SELECT from_entity, to_entity, from_entity_id, to_entity_id FROM relationships")
    assert rels and all(r["from_entity_id"] == named[r["from_entity"].lower()] for r in rels)
    assert all(r["to_entity_id"] == named[r["to_entity"].lower()] for r in rels)
    fact = rows(cstore, "SELECT entity_id FROM facts")[0]
    assert fact["entity_id"] == named["alice"]  # the fact's entity and the relationship's end are one


def test_a_name_in_the_unsure_band_is_decided_by_one_recorded_model_call(cstore, server, model):
    model.entity_names.update({"Lisbon": "Alice Chen", "Porto": "Dr. Alice Chen"})
    seed(cstore, "/t", ["Alice Chen moved to Lisbon for the new job"])
    runner.run_stage(cstore, "/t", "facts")
    seed(cstore, "/t", ["Dr. Alice Chen gave a talk in Porto about compilers"])
    report = runner.run_stage(cstore, "/t", "facts")
    assert report.details["entities_by_model"] == 1
    assert report.model_calls == 2  # the facts call and the entity check
    assert len(_entities(cstore)) == 1
    assert len({f["entity_id"] for f in rows(cstore, "SELECT entity_id FROM facts")}) == 1
    calls = rows(cstore, "SELECT stage, ok FROM model_calls ORDER BY id")
    assert [(c["stage"], c["ok"]) for c in calls] == [("facts", True)] * 3
    assert model.calls["entities"] == 1


def test_an_unanswered_check_makes_a_new_entity(cstore, server, model):
    model.entity_names.update({"Lisbon": "Alice Chen", "Porto": "Dr. Alice Chen"})
    seed(cstore, "/t", ["Alice Chen moved to Lisbon for the new job"])
    runner.run_stage(cstore, "/t", "facts")
    model.inject("entities", "garbage", times=5)
    seed(cstore, "/t", ["Dr. Alice Chen gave a talk in Porto about compilers"])
    report = runner.run_stage(cstore, "/t", "facts")
    assert report.status == "ok" and report.details["facts_created"] == 1
    assert report.details["entity_checks_failed"] == 1
    assert [e["name"] for e in _entities(cstore)] == ["Alice Chen", "Dr. Alice Chen"]


def test_entities_are_per_namespace(cstore, server, model):
    seed(cstore, "/a", ["Alice plays chess at the club every Monday"])
    seed(cstore, "/b", ["Alice plays chess at the club every Monday"])
    runner.run_stage(cstore, "/a", "facts")
    runner.run_stage(cstore, "/b", "facts")
    entities = rows(cstore, "SELECT namespace_id, normalised FROM entities ORDER BY id")
    assert [e["normalised"] for e in entities] == ["alice", "alice"]
    assert len({e["namespace_id"] for e in entities}) == 2


@pytest.mark.parametrize(
    ("name", "aliases", "expected"),
    [
        ("alice", [(1, "alice chen")], 1),  # the one known full name with that first word
        ("chen", [(1, "alice chen")], 1),  # ... or last word
        ("alice", [(1, "alice chen"), (2, "alice wong")], None),  # two Alices: ambiguous
        ("alice chen", [(1, "alice")], 1),  # a full name of a known first name
        ("alice chen", [(1, "alice"), (2, "chen")], None),  # Alice or Chen: ambiguous
        ("alice chen", [(1, "alice"), (1, "alice wong")], None),  # that Alice is Alice Wong
        ("alice", [(1, "alice in chains band today")], None),  # not a 2-3 word name
        ("a", [(1, "a chen")], None),  # one letter is no name
        ("bob", [(1, "alice chen")], None),
    ],
)
def test_token_subset_rule(name, aliases, expected):
    assert subset_match(name, aliases) == expected


def test_pronouns_and_punctuation_alone_name_nothing():
    assert resolvable_key("she") is None and resolvable_key(" ()! ") is None and resolvable_key(None) is None
    assert resolvable_key("she (Alice)") == "alice"


def test_a_failure_pattern_fact_resolves_its_entity(cstore, server, model):
    from stash_pipeline.memory import failures

    seed(cstore, "/f", ["Deploy script failed on Friday with Postgres timeout"])
    failures.create(cstore, "/f", "Deploy script failed with Postgres timeout", "pool too small", "raise the pool")
    runner.run_stage(cstore, "/f", "failure_patterns")
    seed(cstore, "/f", ["Deploy script failed again with Postgres timeout at noon",
                        "Nightly deploy script failed with Postgres timeout"])
    report = runner.run_stage(cstore, "/f", "failure_patterns")
    assert report.details["pattern_facts"] == 1
    [fact] = rows(cstore, "SELECT f.entity, e.normalised FROM facts f JOIN entities e ON e.id = f.entity_id "
                          "WHERE f.origin = 'failure_pattern'")
    assert fact["normalised"] == fact["entity"].lower()
