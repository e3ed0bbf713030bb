"""The stage table drives everything: assets, checks, the watermark sensor's requests, the backlog query.

Adding a stage must be one ``STAGES`` entry plus one module; these tests fail if any of
the Dagster layer or the runner keeps its own list of stages beside the table.
"""

from __future__ import annotations

import importlib
import warnings

import dagster as dg
import pytest

from stash_pipeline.defs import checks
from stash_pipeline.defs.assets import build_stage_asset
from stash_pipeline.defs.definitions import build_definitions
from stash_pipeline.defs.sensors import WATERMARK_STAGES, pending_work, run_requests
from stash_pipeline.stages import STAGE_NAMES, STAGES, StageSpec, backlog_parameters, prompts

warnings.filterwarnings("ignore", category=dg.PreviewWarning)

defs = build_definitions(model="scripted")


def _expected_checks(spec: StageSpec) -> set[str]:
    return {checks.ITEM_CHECK} | ({checks.LINEAGE_CHECK} if checks.lineage_kinds(spec) else set())


def test_every_stage_runs_the_run_function_of_its_own_module() -> None:
    for spec in STAGES:
        assert spec.run is importlib.import_module(f"stash_pipeline.stages.{spec.name}").run, spec.name
    assert len(set(STAGE_NAMES)) == len(STAGES)


def test_the_asset_graph_is_the_stage_table() -> None:
    # resolving reads Dagster's current instance: give it a live one, not a closed test's
    with dg.instance_for_test():
        graph = defs.resolve_asset_graph()
    # the stages, the external episodes and the backlog asset of waiting vectors
    assert {key.to_user_string() for key in graph.get_all_asset_keys()} == {
        "episodes",
        "episode_embeddings",
        *STAGE_NAMES,
    }
    for spec in STAGES:
        asset = defs.resolve_assets_def(spec.name)
        assert {key.to_user_string() for key in graph.get(dg.AssetKey(spec.name)).parent_keys} == set(spec.deps)
        assert asset.op.pool == spec.pool
        assert asset.descriptions_by_key[dg.AssetKey(spec.name)] == spec.description
        assert {key.name for key in asset.check_keys} == _expected_checks(spec), spec.name
        kinds = {tag.removeprefix("dagster/kind/") for tag in asset.tags_by_key[dg.AssetKey(spec.name)]
                 if tag.startswith("dagster/kind/")}
        assert ("openai" in kinds) == spec.needs_model, spec.name


def test_a_new_table_entry_becomes_an_asset_with_its_deps_and_checks() -> None:
    new = StageSpec("echo", "Echo new facts.", lambda ctx: None, ("facts", "patterns"), "facts",
                    prompts=((prompts.PATTERNS, prompts.PatternsAnswer),), items_per_call=lambda settings: 3,
                    outputs=("fact",))
    asset = build_stage_asset(new)
    key = dg.AssetKey("echo")
    assert asset.keys == {key}
    assert {dep.asset_key.to_user_string() for dep in asset.specs_by_key[key].deps} == {"facts", "patterns"}
    assert {check.name for check in asset.check_keys} == {checks.ITEM_CHECK, checks.LINEAGE_CHECK}
    assert asset.op.pool == "model"
    assert {check.name for check in checks.check_specs(new)} == {checks.ITEM_CHECK, checks.LINEAGE_CHECK}


def _rows(**overrides: object) -> list[dict[str, object]]:
    """One namespace where every stage of the table reports work."""
    return [
        {"namespace_id": 1, "slug": "/a", "stage": spec.name, "cursor": 0, "head": 5, "aux_head": 7, "has_work": True,
         **overrides}
        for spec in STAGES
    ]


def test_the_sensor_requests_exactly_the_watermarked_stages_in_table_order() -> None:
    assert WATERMARK_STAGES == tuple(spec.name for spec in STAGES if spec.watermarked)
    work = pending_work(_rows(), stages=WATERMARK_STAGES, model_ready=True)
    (request,) = run_requests(work, ["/a"], trigger="watermark", now=0.0)
    assert request.asset_selection == [dg.AssetKey(spec.name) for spec in STAGES if spec.watermarked]
    # a stage watching a second source puts both heads in the run key
    for spec in STAGES:
        if spec.watermarked:
            expected = f"{spec.name}@5/7" if spec.aux_source else f"{spec.name}@5"
            assert expected in (request.run_key or "").split(":")[2].split(","), spec.name


def test_without_a_reasoner_the_sensor_requests_only_model_free_watermarked_stages() -> None:
    work = pending_work(_rows(), stages=WATERMARK_STAGES, model_ready=False)
    expected = [spec.name for spec in STAGES if spec.watermarked and not spec.needs_model]
    assert [item.stage for item in work.get("/a", [])] == expected


@pytest.mark.parametrize("namespace_ids", [None, [3, 1]])
def test_backlog_parameters_are_the_table_columns(namespace_ids: list[int] | None) -> None:
    params = backlog_parameters(namespace_ids)
    assert params["namespace_ids"] == namespace_ids
    assert params["stages"] == list(STAGE_NAMES)
    assert params["sources"] == [spec.source for spec in STAGES]
    assert params["head_stages"] == [spec.head_stage for spec in STAGES]
    assert params["aux_sources"] == [spec.aux_source for spec in STAGES]
    assert params["gates"] == [spec.gate for spec in STAGES]
    # a head taken from another stage's cursor must name a stage of the table
    assert {spec.head_stage for spec in STAGES if spec.head_stage} <= set(STAGE_NAMES)
