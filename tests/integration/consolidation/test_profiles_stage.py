"""The profiles stage: an entity's current facts per aspect in one fact, traceable to its
members and their episodes, never outliving a member, and no stage's input."""

from __future__ import annotations

from typing import Any

import pytest

from stash_pipeline import recall
from stash_pipeline.consolidation import rebuild, runner
from stash_pipeline.memory import entities, episodes, facts
from stash_pipeline.recall.config import DEFAULT
from tests.integration.consolidation.conftest import rows, seed

HOBBIES = [
    "Evan took up watercolour painting as a hobby in his free time",
    "Evan goes kayaking for fun at weekends",
    "Evan's pastime is playing chess at the club in the evenings",
]


@pytest.fixture
def pstore(make_store: Any) -> Any:
    return make_store(embedder="minilm-int8", vector_dim=384)


def _assert_hobbies(store: Any, namespace: str = "/p") -> tuple[list[int], list[int]]:
    episode_ids = seed(store, namespace, HOBBIES)
    fact_ids = [
        facts.assert_fact(store, namespace, text, entity="Evan", property=f"hobby {i}", value=text,
                          source_episode_ids=[episode_id]).fact.id
        for i, (text, episode_id) in enumerate(zip(HOBBIES, episode_ids, strict=True))
    ]
    return episode_ids, fact_ids


def _profiles(store: Any, current: bool = True) -> list[dict[str, Any]]:
    return rows(store, "SELECT id, content, entity_id, withdrawn_at FROM facts WHERE origin = 'profile'"
                       + (" AND withdrawn_at IS NULL" if current else "") + " ORDER BY id")


def test_a_profile_gathers_the_entity_facts_with_their_sources(pstore):
    episode_ids, fact_ids = _assert_hobbies(pstore)
    report = runner.run_stage(pstore, "/p", "profiles")
    assert report.status == "ok" and report.details["profiles_written"] == 1
    [profile] = _profiles(pstore)
    assert profile["content"].startswith("Evan's hobbies and interests: ")
    assert "watercolour painting" in profile["content"] and "kayaking" in profile["content"]
    parents = rows(pstore, "SELECT parent_kind, parent_id FROM lineage WHERE child_kind = 'fact' AND child_id = %(id)s",
                   id=profile["id"])
    assert {(p["parent_kind"], p["parent_id"]) for p in parents} == {
        *(("fact", i) for i in fact_ids), *(("episode", i) for i in episode_ids)}
    [member] = rows(pstore, "SELECT entity_id FROM facts WHERE id = %(id)s", id=fact_ids[0])
    assert profile["entity_id"] == member["entity_id"] is not None

    hits = recall.recall(pstore, "What does Evan do for fun?", ["/p"], limit=3)
    place, shown = next((i, h) for i, h in enumerate(hits) if h.kind == "fact" and h.id == profile["id"])
    assert sorted(shown.source_episode_ids) == sorted(episode_ids) and shown.member_fact_ids == sorted(fact_ids)
    # a member ranked below its profile says nothing the profile does not: it takes no slot
    assert all(i < place for i, h in enumerate(hits) if h.kind == "fact" and h.id in fact_ids)
    [answer] = [r for r in recall.recall_results(pstore, "What does Evan do for fun?", ["/p"], limit=3)["results"]
                if r["id"] == profile["id"]]
    assert answer["member_fact_ids"] == sorted(fact_ids) and "sources" not in answer


def test_the_entity_leg_reaches_a_profile_only_through_its_own_name(pstore):
    # Dana's friend is Evan: a question about Dana reaches Evan's facts one hop away, where
    # the question asks for one of them, not for the digest of all of them
    _, fact_ids = _assert_hobbies(pstore)
    friend = facts.assert_fact(pstore, "/p", "Dana's best friend is Evan", entity="Dana", property="best friend",
                               value="Evan").fact.id
    runner.run_stage(pstore, "/p", "profiles")
    [profile] = _profiles(pstore)
    with pstore.db.transaction() as tx:
        # only the relationships stage writes relationships: the row it would write
        tx.conn.execute(
            "INSERT INTO relationships (namespace_id, from_entity, relation_type, to_entity, source_fact_id,"
            " from_entity_id, to_entity_id, valid_from, recorded_at)"
            " SELECT f.namespace_id, 'Dana', 'best_friend', 'Evan', f.id, f.entity_id, m.entity_id, f.valid_from,"
            " f.recorded_at FROM facts f, facts m WHERE f.id = %s AND m.id = %s", (friend, fact_ids[0]))

    def reached(query: str) -> set[int]:
        found = recall.search(pstore, recall.RecallRequest.of(pstore.settings, query, ["/p"], limit=10,
                                                              config=DEFAULT)).rows
        return {r["id"] for r in found if r["kind"] == "fact" and r["entity_score"] is not None}

    one_hop = reached("What does Dana's best friend do for fun?")
    assert set(fact_ids) & one_hop and profile["id"] not in one_hop
    assert profile["id"] in reached("What does Evan do for fun?")


def test_profiles_are_no_stage_input_and_a_rerun_writes_nothing(pstore):
    _assert_hobbies(pstore)
    runner.run_stage(pstore, "/p", "profiles")
    backlog = {r["stage"]: r for r in runner.status(pstore, "/p")}
    assert not backlog["profiles"]["has_work"]
    assert backlog["relationships"]["backlog"] == len(HOBBIES)  # the members, not the profile
    again = runner.run_stage(pstore, "/p", "profiles")
    assert again.details.get("profiles_written", 0) == 0 and len(_profiles(pstore)) == 1
    [head] = rows(pstore, "SELECT max(id) AS id FROM facts WHERE origin <> 'profile'")
    [cursor] = rows(pstore, "SELECT cursor FROM stage_checkpoints WHERE stage = 'profiles'")
    assert cursor["cursor"] == head["id"]


def test_a_profile_goes_with_a_retired_member_and_comes_back_rewritten(pstore):
    episode_ids, _ = _assert_hobbies(pstore)
    runner.run_stage(pstore, "/p", "profiles")
    # superseded: the member's replacement ends it, the trigger withdraws the profile
    facts.assert_fact(pstore, "/p", "Evan gave up kayaking and took up sailing for fun at weekends",
                      entity="Evan", property="hobby 1", value="sailing", supersede=True)
    assert _profiles(pstore) == []
    runner.run_stage(pstore, "/p", "profiles")
    [profile] = _profiles(pstore)
    assert "sailing" in profile["content"] and "goes kayaking" not in profile["content"]

    # a source episode purged: its fact goes, and the profile with it; no new fact comes,
    # the withdrawal asks for the entity again and the stage gathers what is left
    episodes.purge(pstore, episode_ids[0], "/p")
    assert _profiles(pstore) == []
    assert {r["stage"]: r for r in runner.status(pstore, "/p")}["profiles"]["has_work"]
    report = runner.run_stage(pstore, "/p", "profiles")
    [profile] = _profiles(pstore)
    assert "watercolour" not in profile["content"] and "sailing" in profile["content"]
    assert report.details["profiles_written"] == 1
    assert rows(pstore, "SELECT * FROM profile_requests") == []
    assert not {r["stage"]: r for r in runner.status(pstore, "/p")}["profiles"]["has_work"]


def test_a_purged_member_erases_its_profile_and_the_rest_is_gathered_again(pstore):
    _, fact_ids = _assert_hobbies(pstore)
    runner.run_stage(pstore, "/p", "profiles")
    [profile] = _profiles(pstore)
    facts.purge(pstore, fact_ids[0], "/p")
    # a withdrawal would keep the member's words in the profile: the purge erases it
    assert _profiles(pstore, current=False) == []
    assert rows(pstore, "SELECT count(*) AS n FROM lineage WHERE child_id = %(id)s", id=profile["id"]) == [{"n": 0}]
    assert not [r for r in rows(pstore, "SELECT content FROM facts") if "watercolour" in r["content"]]
    runner.run_stage(pstore, "/p", "profiles")
    [again] = _profiles(pstore)
    assert "watercolour" not in again["content"] and "kayaking" in again["content"]


def test_a_profile_follows_its_members_across_a_merge_and_a_split(pstore):
    seed(pstore, "/p", [])
    for text, entity, prop in [
        ("Sam plays chess for fun at weekends", "Sam", "hobby a"),
        ("Sam plays the guitar in his free time", "Sam", "hobby b"),
        ("Sam Lee took up skydiving as a hobby", "Sam Lee", "hobby c"),
        ("Sam Lee enjoys rock climbing for fun on Sundays", "Sam Lee", "hobby d"),
    ]:
        facts.assert_fact(pstore, "/p", text, entity=entity, property=prop, value=text)
    runner.run_stage(pstore, "/p", "profiles")
    ids = {r["name"]: int(r["id"]) for r in rows(pstore, "SELECT id, name FROM entities")}
    entities.merge_entities(pstore, ids["Sam"], ids["Sam Lee"], namespaces=["/p"])
    runner.run_stage(pstore, "/p", "profiles")
    [merged] = _profiles(pstore)
    assert merged["entity_id"] == ids["Sam"] and "skydiving" in merged["content"] and "guitar" in merged["content"]

    entities.split_entity(pstore, ids["Sam"], ["Sam Lee"], namespaces=["/p"])
    # before any run: no current profile lists a fact that is no longer its entity's
    assert _profiles(pstore) == []
    assert {r["stage"]: r for r in runner.status(pstore, "/p")}["profiles"]["has_work"]
    runner.run_stage(pstore, "/p", "profiles")
    by_entity = {p["entity_id"]: p["content"] for p in _profiles(pstore)}
    assert "skydiving" not in by_entity[ids["Sam"]] and "guitar" in by_entity[ids["Sam"]]
    assert "skydiving" in by_entity[ids["Sam Lee"]] and "guitar" not in by_entity[ids["Sam Lee"]]


def test_a_rebuild_withdraws_the_profiles_and_the_next_run_writes_them_again(pstore):
    _assert_hobbies(pstore)
    runner.run_stage(pstore, "/p", "profiles")
    [before] = _profiles(pstore)
    [report] = rebuild.rebuild(pstore, "/p", "profiles", apply=True)
    assert report.withdrawn == 1 and _profiles(pstore) == []
    runner.run_stage(pstore, "/p", "profiles")
    [after] = _profiles(pstore)
    assert after["content"] == before["content"] and after["id"] != before["id"]


def test_a_crash_mid_batch_commits_nothing_and_the_rerun_writes_it_all(pstore, monkeypatch):
    from stash_pipeline.memory import lineage

    _assert_hobbies(pstore)
    for i, text in enumerate(["Maria plays the piano for fun in her free time",
                              "Maria's hobby is knitting scarves in the evenings"]):
        facts.assert_fact(pstore, "/p", text, entity="Maria", property=f"hobby {i}", value=text)
    real_add, calls = lineage.add, []

    def crash_on_second(*args, **kwargs):
        calls.append(args)
        if len(calls) == 2:
            raise RuntimeError("injected crash")
        return real_add(*args, **kwargs)

    monkeypatch.setattr(lineage, "add", crash_on_second)
    with pytest.raises(RuntimeError, match="injected crash"):
        runner.run_stage(pstore, "/p", "profiles")
    monkeypatch.setattr(lineage, "add", real_add)
    assert _profiles(pstore, current=False) == []
    assert rows(pstore, "SELECT cursor FROM stage_checkpoints WHERE stage = 'profiles'") in ([], [{"cursor": 0}])
    assert runner.run_stage(pstore, "/p", "profiles").details["profiles_written"] == 2
    assert [p["content"].split(":")[0] for p in _profiles(pstore)] == [
        "Evan's hobbies and interests", "Maria's hobbies and interests"]


def test_a_member_retired_while_the_stage_runs_keeps_its_profile_out(pstore, monkeypatch):
    from stash_pipeline.stages import profiles

    _, fact_ids = _assert_hobbies(pstore)
    real_gather = profiles.gather

    def gather_then_retire(entity_facts, aspects):
        drafts = real_gather(entity_facts, aspects)
        facts.withdraw(pstore, fact_ids[0], "retired meanwhile", "/p")  # after the read, before the batch
        return drafts

    monkeypatch.setattr(profiles, "gather", gather_then_retire)
    assert runner.run_stage(pstore, "/p", "profiles").details["profiles_written"] == 0
    assert _profiles(pstore, current=False) == []
    # the entity is asked for again: the next run gathers the two members left
    monkeypatch.setattr(profiles, "gather", real_gather)
    assert len(rows(pstore, "SELECT entity_id FROM profile_requests")) == 1
    runner.run_stage(pstore, "/p", "profiles")
    [profile] = _profiles(pstore)
    assert "watercolour" not in profile["content"] and "kayaking" in profile["content"]
