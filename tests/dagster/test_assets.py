"""Stage assets materialized by Dagster against Postgres and the scripted model server.

The assets are built with a zero-delay RetryPolicy (the deployed one waits 10 s, 20 s,
40 s); the reasoner's own HTTP retries are off, so every model outage reaches Dagster.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest

from stash_pipeline.defs import checks
from stash_pipeline.defs.assets import build_stage_assets, episodes
from stash_pipeline.defs.resources import StashResource
from stash_pipeline.memory import namespaces as ns
from stash_pipeline.memory.episodes import remember
from stash_pipeline.stages import REPORT_KEYS, backlog_parameters
from stash_pipeline.store import Store
from testkit.scripted_model import ScriptedModel
from tests.dagster.conftest import resource_for

TEXTS = ["Alice lives in Paris near the river Seine", "Bob deploys Kubernetes clusters every Friday"]

ASSETS = build_stage_assets(retry_policy=dg.RetryPolicy(max_retries=2, delay=0))


def materialize(instance: dg.DagsterInstance, stash: StashResource, slug: str, *stages: str) -> Any:
    instance.add_dynamic_partitions("namespaces", [slug])
    return dg.materialize(
        [episodes, *ASSETS],
        selection=list(stages),
        partition_key=slug,
        instance=instance,
        resources={"stash": stash},
        raise_on_error=False,
    )


def metadata(result: Any, stage: str) -> dict[str, Any]:
    (event,) = result.asset_materializations_for_node(stage)
    return {key: value.value for key, value in event.metadata.items()}


def check_outcomes(result: Any) -> dict[tuple[str, str], bool]:
    return {
        (e.asset_key.to_user_string(), e.check_name): e.passed for e in result.get_asset_check_evaluations()
    }


def fact_rows(store: Store) -> list[tuple[Any, ...]]:
    with store.db.connection() as conn:
        rows = conn.execute("SELECT entity, property, value, content FROM facts ORDER BY id").fetchall()
        conn.commit()
    return [tuple(r.values()) for r in rows]


def seed(store: Store, slug: str) -> list[int]:
    ns.create(store, slug)
    return [remember(store, slug, text).id for text in TEXTS]


def test_materialize_one_partition_runs_the_stage_and_records_metadata(
    store: Store, instance: dg.DagsterInstance, model_stash: StashResource, model: ScriptedModel
) -> None:
    ids = seed(store, "/projects/x")
    result = materialize(instance, model_stash, "/projects/x", "facts")
    assert result.success
    meta = metadata(result, "facts")
    assert set(meta) == {*REPORT_KEYS, "status", "message"}
    assert meta["status"] == "ok"
    assert (meta["rows_in"], meta["rows_written"], meta["items_failed"], meta["dead_lettered"]) == (2, 2, 0, 0)
    assert (meta["cursor_from"], meta["cursor_to"]) == (0, ids[-1])
    assert meta["model_calls"] == model.calls["facts"] >= 1
    assert meta["tokens_in"] > 0 and meta["tokens_out"] > 0
    assert check_outcomes(result) == {("facts", checks.ITEM_CHECK): True, ("facts", checks.LINEAGE_CHECK): True}
    (event,) = result.asset_materializations_for_node("facts")
    assert event.partition == "/projects/x"
    assert len(fact_rows(store)) == 2


def test_a_run_of_every_stage_follows_the_graph(
    store: Store, instance: dg.DagsterInstance, model_stash: StashResource
) -> None:
    seed(store, "/projects/x")
    stages = [a.key.to_user_string() for a in ASSETS]
    result = materialize(instance, model_stash, "/projects/x", *stages)
    assert result.success
    order = [
        e.asset_key.to_user_string()
        for e in result.all_events
        if e.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION and e.asset_key is not None
    ]
    assert order.index("facts") < order.index("relationships") < order.index("causal_links")
    assert order.index("relationships") < order.index("patterns")
    assert metadata(result, "relationships")["rows_in"] == 2  # saw the facts written in this run
    assert all(passed for passed in check_outcomes(result).values())


def test_model_outage_fails_the_partition_and_a_rerun_after_it_succeeds_without_duplicates(
    store: Store, instance: dg.DagsterInstance, model_stash: StashResource, model: ScriptedModel
) -> None:
    seed(store, "/projects/x")
    model.inject("facts", "status500", times=50)  # outlasts the step's retries
    failed = materialize(instance, model_stash, "/projects/x", "facts")
    assert not failed.success
    retries = [e for e in failed.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    assert len(retries) == 2  # transient: retried by the RetryPolicy before giving up
    assert fact_rows(store) == []
    assert store.db.all("stage_backlog", **backlog_parameters())[0]["cursor"] == 0  # checkpoint untouched

    model._faults.clear()  # the outage is over (drop the scripted 500s not yet served)
    rerun = materialize(instance, model_stash, "/projects/x", "facts")
    assert rerun.success and metadata(rerun, "facts")["rows_written"] == 2
    rows = fact_rows(store)
    assert len(rows) == 2

    again = materialize(instance, model_stash, "/projects/x", "facts")  # a backfill over done work
    assert again.success and metadata(again, "facts")["status"] == "idle"
    assert fact_rows(store) == rows


def test_a_short_outage_is_absorbed_by_the_retry_policy(
    store: Store, instance: dg.DagsterInstance, model_stash: StashResource, model: ScriptedModel
) -> None:
    seed(store, "/projects/x")
    model.inject("facts", "status500", times=1)
    result = materialize(instance, model_stash, "/projects/x", "facts")
    assert result.success
    assert [e.event_type for e in result.all_events].count(dg.DagsterEventType.STEP_UP_FOR_RETRY) == 1
    assert len(fact_rows(store)) == 2


def test_a_permanent_error_fails_without_retry_and_says_why(
    store: Store, instance: dg.DagsterInstance, model_stash: StashResource
) -> None:
    # The partition outlived its namespace (deleted between discovery ticks).
    result = materialize(instance, model_stash, "/gone", "facts")
    assert not result.success
    events = result.all_events
    assert not [e for e in events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    (failure,) = [e for e in events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert "facts failed for /gone" in failure.step_failure_data.error.message
    assert "not found" in failure.step_failure_data.error.message


def test_without_a_reasoner_a_model_stage_fails_clearly_without_retry(
    store: Store, instance: dg.DagsterInstance, settings: Any
) -> None:
    """No false green: the partition is red and says which settings are missing."""
    seed(store, "/projects/x")
    result = materialize(instance, resource_for(settings), "/projects/x", "facts")
    assert not result.success
    assert result.asset_materializations_for_node("facts") == []
    assert not [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    message = failure.step_failure_data.error.message
    assert "facts failed for /projects/x" in message
    assert "STASH_REASONER_MODEL" in message and "STASH_OPENAI_BASE_URL" in message
    assert store.db.all("stage_backlog", **backlog_parameters())[0]["cursor"] == 0


def test_without_a_reasoner_sql_only_stages_still_materialize(
    store: Store, instance: dg.DagsterInstance, settings: Any
) -> None:
    seed(store, "/projects/x")
    result = materialize(instance, resource_for(settings), "/projects/x", "decay")
    assert result.success
    assert metadata(result, "decay")["status"] in {"ok", "idle"}


def test_an_unexpected_error_fails_without_retry(
    store: Store, instance: dg.DagsterInstance, model_stash: StashResource, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug is not transient: retrying the same input would fail the same way."""
    import dataclasses

    from stash_pipeline import stages

    def broken(ctx: Any) -> None:
        raise KeyError("cluster")

    # the runner calls the stage table's run function: swap it in the table
    table = tuple(dataclasses.replace(s, run=broken) if s.name == "facts" else s for s in stages.STAGES)
    monkeypatch.setattr(stages, "STAGES", table)
    seed(store, "/projects/x")
    result = materialize(instance, model_stash, "/projects/x", "facts")
    assert not result.success
    assert not [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert "facts failed for /projects/x: KeyError" in failure.step_failure_data.error.message
