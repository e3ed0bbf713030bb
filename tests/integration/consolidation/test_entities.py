"""Entities as callers see them: get_entity, merge and split, withdrawal, deletion, export and import."""

from __future__ import annotations

import pytest

from stash_pipeline import errors
from stash_pipeline.consolidation import runner
from stash_pipeline.interchange import export, readers
from stash_pipeline.memory import entities, facts, graph, namespaces
from tests.integration.consolidation.conftest import rows, seed
from tests.integration.consolidation.test_entity_resolution import FIRST, LATER, SPELLINGS

PARIS = ["Alice lives in Paris near the river Seine", "Alice lives in Paris near the river"]
BERLIN = ["Alice lives in Berlin since the spring"]


def _alice(store):
    """Four spellings of Alice through the facts stage; returns her entity id."""
    seed(store, "/t", FIRST)
    runner.run_stage(store, "/t", "facts")
    seed(store, "/t", LATER)
    runner.run_stage(store, "/t", "facts")
    return entities.get_entity(store, name="Alice").entity["id"]


def test_get_entity_lists_the_facts_of_every_spelling(cstore, server, model):
    model.entity_names.update(SPELLINGS)
    alice = _alice(cstore)
    got = entities.get_entity(cstore, alice)
    assert got.entity["name"] == "Alice" and got.entity["namespace"] == "/t"
    assert [f["entity"] for f in got.facts] == ["Alice", "alice", "Alice Chen", "she (Alice)"]
    assert [a["normalised"] for a in got.aliases] == ["alice", "alice chen"]
    # any spelling finds her, in any case and form
    for spelling in ("ALICE", "she (Alice)", "Alice  Chen!"):
        assert entities.get_entity(cstore, name=spelling).entity["id"] == alice
    with pytest.raises(errors.RecordNotFound):
        entities.get_entity(cstore, name="Bob")
    with pytest.raises(errors.RecordNotFound):  # outside the caller's scope it does not exist
        namespaces.create(cstore, "/other")
        entities.get_entity(cstore, alice, namespaces=["/other"])


def test_timeline_keeps_superseded_facts_in_valid_from_order(cstore, server, model):
    seed(cstore, "/t", PARIS)
    runner.run_stage(cstore, "/t", "facts")
    seed(cstore, "/t", BERLIN)
    runner.run_stage(cstore, "/t", "facts")
    got = entities.get_entity(cstore, name="Alice")
    assert [f["value"] for f in got.timeline] == ["Paris", "Berlin"]
    assert [f["current"] for f in got.timeline] == [False, True]
    assert got.timeline[0]["superseded_by"] == got.timeline[1]["id"]
    assert [f["value"] for f in got.facts] == ["Berlin"]
    assert got.timeline[0]["valid_from"] <= got.timeline[1]["valid_from"]


def test_relationships_and_causal_links_of_an_entity(cstore, server, model):
    seed(cstore, "/t", ["Alice mentors Bob on the Atlas project", "Alice plays chess at the club every Monday"])
    runner.run_stage(cstore, "/t", "facts")
    runner.run_stage(cstore, "/t", "relationships")
    bob = entities.get_entity(cstore, name="Bob")
    assert [(r["from_entity"], r["to_entity"]) for r in bob.relationships] == [("Alice", "Bob")]
    alice = entities.get_entity(cstore, name="Alice")
    assert bob.relationships[0] in alice.relationships  # both ends see it
    first, second = (f["id"] for f in alice.facts)
    link = graph.create_causal_link(cstore, "/t", first, effect_id=second, rationale="mentoring takes Mondays")
    assert [c["id"] for c in entities.get_entity(cstore, name="Alice").causal_links] == [link.id]


def test_merge_then_split_round_trips(cstore, server, model):
    model.entity_names.update({"chess": "Alice", "Lisbon": "Ally"})
    seed(cstore, "/t", ["Alice plays chess at the club every Monday", "Ally moved to Lisbon for the new job"])
    runner.run_stage(cstore, "/t", "facts")
    alice = entities.get_entity(cstore, name="Alice")
    ally = entities.get_entity(cstore, name="Ally")
    assert alice.entity["id"] != ally.entity["id"]
    before = rows(cstore, "SELECT id, entity_id FROM facts ORDER BY id")

    merged = entities.merge_entities(cstore, alice.entity["id"], ally.entity["id"], note="Ally is Alice")
    assert merged.moved.model_dump() == {"aliases": ["ally"], "facts": 1, "relationship_ends": 0}
    after_merge = entities.get_entity(cstore, name="Ally")
    assert after_merge.entity["id"] == alice.entity["id"]
    assert [f["entity"] for f in after_merge.facts] == ["Alice", "Ally"]
    assert [m["id"] for m in after_merge.merged_from] == [ally.entity["id"]]
    # the merged id still answers, with the entity it is now part of
    assert entities.get_entity(cstore, ally.entity["id"]).entity["id"] == alice.entity["id"]
    with pytest.raises(errors.InvalidTransition):
        entities.merge_entities(cstore, ally.entity["id"], alice.entity["id"])

    split = entities.split_entity(cstore, alice.entity["id"], ["Ally"], note="they are two people")
    assert split.revived is True and split.new_id == ally.entity["id"]
    assert rows(cstore, "SELECT id, entity_id FROM facts ORDER BY id") == before
    assert entities.get_entity(cstore, name="Ally").entity["id"] == ally.entity["id"]
    assert entities.get_entity(cstore, name="Alice").merged_from == []
    # traced: both corrections, with lineage from each to the two entities
    history = entities.get_entity(cstore, name="Alice").corrections
    assert [(c["action"], c["reason"]) for c in history] == [("merge", "Ally is Alice"), ("split", "they are two people")]
    parents = rows(cstore, "SELECT child_id, parent_kind, parent_id FROM lineage WHERE child_kind = 'entity_correction' "
                   "ORDER BY child_id, parent_id")
    assert [(p["parent_kind"], p["parent_id"]) for p in parents] == [
        ("entity", alice.entity["id"]), ("entity", ally.entity["id"])] * 2


def test_split_of_a_name_never_merged_makes_a_new_entity(cstore, server, model):
    model.entity_names.update(SPELLINGS)
    alice = _alice(cstore)
    split = entities.split_entity(cstore, alice, ["Alice Chen"])
    assert split.revived is False and split.moved.facts == 1
    chen = entities.get_entity(cstore, split.new_id)
    assert chen.entity["name"] == "Alice Chen" and [f["entity"] for f in chen.facts] == ["Alice Chen"]
    assert len(entities.get_entity(cstore, alice).facts) == 3
    with pytest.raises(errors.InvalidInput):  # an entity keeps at least one alias
        entities.split_entity(cstore, alice, ["alice"])
    with pytest.raises(errors.InvalidInput):
        entities.split_entity(cstore, alice, ["Bob"])
    # and it merges back
    entities.merge_entities(cstore, alice, split.new_id)
    assert len(entities.get_entity(cstore, name="Alice Chen").facts) == 4


def test_withdrawn_facts_leave_the_entity_and_deletion_removes_it(cstore, server, model):
    model.entity_names.update(SPELLINGS)
    alice = _alice(cstore)
    first = entities.get_entity(cstore, alice).facts[0]["id"]
    facts.withdraw(cstore, first, "wrong")
    got = entities.get_entity(cstore, alice)
    assert first not in [f["id"] for f in got.facts + got.timeline]
    facts.purge(cstore, got.facts[0]["id"])
    assert len(entities.get_entity(cstore, alice).facts) == 2
    namespaces.delete(cstore, "/t", confirm=True)
    assert rows(cstore, "SELECT count(*) AS n FROM entities")[0]["n"] == 0
    assert rows(cstore, "SELECT count(*) AS n FROM entity_aliases")[0]["n"] == 0


@pytest.mark.parametrize("file_format", ["parquet", "csv"])
def test_export_then_import_keeps_entities(cstore, server, model, tmp_path, file_format):
    model.entity_names.update(SPELLINGS)
    alice = _alice(cstore)
    seed(cstore, "/t", ["Ally moved to Porto for the new job"])
    model.entity_names["Porto"] = "Ally"
    runner.run_stage(cstore, "/t", "facts")
    ally = entities.get_entity(cstore, name="Ally").entity["id"]
    entities.merge_entities(cstore, alice, ally)
    manifest = export.export_tables(cstore, "/t", tmp_path / "out", format=file_format)
    assert manifest["tables"]["entities"]["rows"] == 2 and manifest["tables"]["entity_aliases"]["rows"] == 3

    result = readers.import_export(cstore, tmp_path / "out", into="/copy")
    assert result["skipped"] == {}
    original, copy = entities.get_entity(cstore, alice), entities.get_entity(cstore, name="Alice", namespaces=["/copy"])
    assert copy.entity["id"] != alice and copy.entity["namespace"] == "/copy"
    assert [a["normalised"] for a in copy.aliases] == [a["normalised"] for a in original.aliases]
    assert [f["content"] for f in copy.facts] == [f["content"] for f in original.facts]
    assert len(copy.merged_from) == 1 and copy.merged_from[0]["id"] != ally
    assert [c["action"] for c in copy.corrections] == ["merge"]
    # the copy's entity has a name vector again, so resolution by similarity works there too
    assert rows(cstore, "SELECT count(*) AS n FROM entities WHERE embedding IS NULL")[0]["n"] == 0


def test_tree_export_then_import_keeps_entities(cstore, server, model, tmp_path):

    model.entity_names.update(SPELLINGS)
    alice = _alice(cstore)
    seed(cstore, "/t", ["Alice mentors Bob on the Atlas project"])
    runner.run_stage(cstore, "/t", "facts")
    runner.run_stage(cstore, "/t", "relationships")
    bob = entities.get_entity(cstore, name="Bob").entity["id"]
    entities.split_entity(cstore, alice, ["Alice Chen"])
    exported = export.export_tree(cstore, "/t", tmp_path / "tree.jsonl")
    # Alice, Alice Chen (split off), and the relationship ends Bob, Monday and Porto
    assert exported["rows"]["entities"] == 5 and exported["rows"]["entity_corrections"] == 1

    result = readers.import_export(cstore, tmp_path / "tree.jsonl", into="/copy")
    assert result["skipped"] == {}
    for name in ("Alice", "Alice Chen", "Bob", "Porto"):
        original = entities.get_entity(cstore, name=name, namespaces=["/t"])
        copy = entities.get_entity(cstore, name=name, namespaces=["/copy"])
        assert copy.entity["id"] != original.entity["id"], name
        assert [f["content"] for f in copy.timeline] == [f["content"] for f in original.timeline], name
        assert [a["alias"] for a in copy.aliases] == [a["alias"] for a in original.aliases], name
        assert [(r["from_entity"], r["to_entity"]) for r in copy.relationships] == [
            (r["from_entity"], r["to_entity"]) for r in original.relationships], name
    assert entities.get_entity(cstore, name="Bob", namespaces=["/copy"]).entity["id"] != bob
    assert [c["action"] for c in entities.get_entity(cstore, name="Alice Chen", namespaces=["/copy"]).corrections] == [
        "split"]


def test_a_new_value_under_another_alias_supersedes_the_old_one(cstore, server, model):
    # "Alice" resolves to the entity first named "Alice Chen": her new city replaces the
    # old one even though the two facts spell her differently
    model.entity_names.update({"Chen": "Alice Chen", "Berlin": "Alice"})
    seed(cstore, "/t", [text.replace("Alice", "Alice Chen") for text in PARIS])
    runner.run_stage(cstore, "/t", "facts")
    seed(cstore, "/t", BERLIN)
    runner.run_stage(cstore, "/t", "facts")
    got = entities.get_entity(cstore, name="Alice")
    assert [(f["entity"], f["current"]) for f in got.timeline] == [("Alice Chen", False), ("Alice", True)]
    assert got.timeline[0]["superseded_by"] == got.timeline[1]["id"]
    assert [f["value"] for f in got.facts] == ["Berlin"]


def test_an_asserted_fact_under_an_alias_is_checked_against_the_entitys_facts(cstore):
    namespaces.create(cstore, "/t")
    old = facts.assert_fact(cstore, "/t", "Alice Chen works at Acme", entity="Alice Chen",
                            property="employer", value="Acme").fact
    short = facts.assert_fact(cstore, "/t", "Alice is an engineer", entity="Alice",
                              property="role", value="engineer").fact
    keep = entities.get_entity(cstore, name="Alice Chen").entity["id"]
    entities.merge_entities(cstore, keep, entities.get_entity(cstore, name="Alice").entity["id"])
    assert entities.get_entity(cstore, name="Alice").entity["id"] == keep
    new = facts.assert_fact(cstore, "/t", "Alice works at Globex now", entity="Alice",
                            property="employer", value="Globex", supersede=True)
    assert new.superseded_fact_ids == [old.id]
    assert facts.get(cstore, old.id).current is False
    assert facts.get(cstore, short.id).current is True
