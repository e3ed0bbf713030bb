"""Stage code versions change with exactly what decides a stage's output."""

from __future__ import annotations

import dataclasses

import pytest

from stash_pipeline import errors
from stash_pipeline.stages import STAGES, get_stage, prompts, versions
from stash_pipeline.stages.versions import code_version


def test_every_stage_has_its_prompts_listed_and_a_stable_version() -> None:
    for spec in STAGES:
        assert bool(spec.prompts) == spec.needs_model, spec.name
        assert [p["system"] for p in versions.version_inputs(spec, "m")["prompts"]] == [s for s, _ in spec.prompts]
        assert code_version(spec, "m") == code_version(spec, "m")
        assert code_version(spec, "m").startswith(f"v{spec.logic_version}-")
    assert len({code_version(s, "m") for s in STAGES}) == len(STAGES)


def test_a_prompt_change_changes_only_that_stage() -> None:
    before = {s.name: code_version(s, "m") for s in STAGES}
    changed = tuple(
        dataclasses.replace(s, prompts=((prompts.RELATIONSHIPS + "\nPrefer present tense.", prompts.RelationshipsAnswer),))
        if s.name == "relationships" else s
        for s in STAGES
    )
    after = {s.name: code_version(s, "m") for s in changed}
    assert {name for name in before if before[name] != after[name]} == {"relationships"}


def test_a_stage_cannot_send_a_prompt_its_entry_does_not_list() -> None:
    from stash_pipeline.consolidation.reasoner import RunLedger
    from stash_pipeline.stages.context import StageContext, StageReport

    spec = get_stage("relationships")
    ctx = StageContext(store=None, stage=spec.name, namespace_id=1, namespace="/", reasoner=None,
                       ledger=RunLedger(), report=StageReport(spec.name, "/"), prompts=spec.prompts)  # type: ignore[arg-type]
    with pytest.raises(errors.ConfigurationError, match=r"StageSpec\.prompts does not list"):
        ctx.call(prompts.PATTERNS, "Facts:", prompts.PatternsAnswer)
    # a listed prompt gets as far as the (absent) model
    with pytest.raises(errors.ReasonerNotConfigured):
        ctx.call(prompts.RELATIONSHIPS, "Facts:", prompts.RelationshipsAnswer)


def test_the_model_name_and_logic_version_count_but_not_for_sql_only_stages() -> None:
    facts, decay = get_stage("facts"), get_stage("decay")
    assert code_version(facts, "model-a") != code_version(facts, "model-b")
    assert code_version(facts, "m") != code_version(dataclasses.replace(facts, logic_version=2), "m")
    assert code_version(decay, "model-a") == code_version(decay, "model-b") == code_version(decay, None)


def test_an_answer_schema_change_changes_the_version() -> None:
    from pydantic import BaseModel

    class Wider(BaseModel):
        relationships: list[prompts.RelationshipDraft]
        notes: str = ""

    spec = get_stage("relationships")
    wider = dataclasses.replace(spec, prompts=((prompts.RELATIONSHIPS, Wider),))
    assert code_version(wider, "m") != code_version(spec, "m")


def test_the_facts_prompt_and_its_cited_sources_count_in_the_facts_version() -> None:
    """The facts stage asks for several facts per cluster or window, each citing its sources:
    its prompt and answer schema are part of its version, so a change to either marks its
    partitions unsynced (and nothing else's)."""
    from pydantic import BaseModel

    assert "sources" in prompts.FactDraft.model_fields
    facts = get_stage("facts")
    rest = facts.prompts[1:]
    before = {s.name: code_version(s, "m") for s in STAGES}
    reworded = dataclasses.replace(facts, prompts=((prompts.FACTS + "\nOne fact per cluster.", prompts.FactsAnswer), *rest))
    after = {s.name: code_version(reworded if s.name == "facts" else s, "m") for s in STAGES}
    assert {name for name in before if before[name] != after[name]} == {"facts"}

    class Uncited(BaseModel):  # the answer before facts cited their sources
        cluster: int
        summary: str | None = None

    class OneEach(BaseModel):
        facts: list[Uncited]

    uncited = dataclasses.replace(facts, prompts=((prompts.FACTS, OneEach), *rest))
    assert code_version(uncited, "m") != before["facts"]
