"""Stage code versions change with exactly what decides a stage's output."""

from __future__ import annotations

import dataclasses

import pytest

from stash_pipeline.stages import STAGES, get_stage, prompts, versions
from stash_pipeline.stages.versions import code_version


def test_every_stage_has_its_prompts_listed_and_a_stable_version() -> None:
    assert set(versions.STAGE_PROMPTS) == {s.name for s in STAGES}
    for spec in STAGES:
        assert bool(versions.STAGE_PROMPTS[spec.name]) == spec.needs_model, spec.name
        assert code_version(spec, "m") == code_version(spec, "m")
        assert code_version(spec, "m").startswith(f"v{spec.logic_version}-")
    assert len({code_version(s, "m") for s in STAGES}) == len(STAGES)


def test_a_prompt_change_changes_only_that_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    before = {s.name: code_version(s, "m") for s in STAGES}
    monkeypatch.setitem(
        versions.STAGE_PROMPTS,
        "relationships",
        ((prompts.RELATIONSHIPS + "\nPrefer present tense.", prompts.RelationshipsAnswer),),
    )
    after = {s.name: code_version(s, "m") for s in STAGES}
    assert {name for name in before if before[name] != after[name]} == {"relationships"}


def test_the_model_name_and_logic_version_count_but_not_for_sql_only_stages() -> None:
    facts, decay = get_stage("facts"), get_stage("decay")
    assert code_version(facts, "model-a") != code_version(facts, "model-b")
    assert code_version(facts, "m") != code_version(dataclasses.replace(facts, logic_version=2), "m")
    assert code_version(decay, "model-a") == code_version(decay, "model-b") == code_version(decay, None)


def test_an_answer_schema_change_changes_the_version(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import BaseModel

    class Wider(BaseModel):
        relationships: list[prompts.RelationshipDraft]
        notes: str = ""

    before = code_version(get_stage("relationships"), "m")
    monkeypatch.setitem(versions.STAGE_PROMPTS, "relationships", ((prompts.RELATIONSHIPS, Wider),))
    assert code_version(get_stage("relationships"), "m") != before


def test_the_facts_prompt_and_its_cited_sources_count_in_the_facts_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """The facts stage asks for several facts per cluster or window, each citing its sources:
    its prompt and answer schema are part of its version, so a change to either marks its
    partitions unsynced (and nothing else's)."""
    from pydantic import BaseModel

    assert "sources" in prompts.FactDraft.model_fields
    stages_before = {s.name: code_version(s, "m") for s in STAGES}
    rest = versions.STAGE_PROMPTS["facts"][1:]
    monkeypatch.setitem(versions.STAGE_PROMPTS, "facts", ((prompts.FACTS + "\nOne fact per cluster.", prompts.FactsAnswer),
                                                          *rest))
    changed = {s.name for s in STAGES if code_version(s, "m") != stages_before[s.name]}
    assert changed == {"facts"}

    class Uncited(BaseModel):  # the answer before facts cited their sources
        cluster: int
        summary: str | None = None

    class OneEach(BaseModel):
        facts: list[Uncited]

    monkeypatch.setitem(versions.STAGE_PROMPTS, "facts", ((prompts.FACTS, OneEach), *rest))
    assert code_version(get_stage("facts"), "m") != stages_before["facts"]
