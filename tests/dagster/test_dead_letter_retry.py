"""Pending dead letters come back by themselves: the watermark sensor counts those due as work.

An item that failed is retried ``DEAD_LETTER_BACKOFF_S`` after its failure (doubling per
failure), in a run the sensor requests for its partition, tagged ``stash/dead-letter-retry``.
"""

from __future__ import annotations

import json
from typing import Any

import dagster as dg
import pytest

from stash_pipeline.defs import sensors
from stash_pipeline.defs.assets import build_stage_assets, episodes
from stash_pipeline.defs.resources import StashResource
from stash_pipeline.defs.sensors import DEAD_LETTER_TAG, watermark_sensor
from stash_pipeline.memory import namespaces as ns
from stash_pipeline.memory.episodes import remember
from stash_pipeline.store import Store
from testkit.openai_server import Reply, ScriptedOpenAI
from testkit.scripted_model import ScriptedModel
from tests.dagster.test_sensors import catch_up, requested, tick

ASSETS = build_stage_assets(retry_policy=dg.RetryPolicy(max_retries=2, delay=0))
POISON = "Zebulon pasted the whole nightly Quartz backup log into the chat"


def execute(store: Store, sql: str, *params: Any) -> list[dict[str, Any]]:
    with store.db.connection() as conn:
        cur = conn.execute(sql, params or None)
        out = cur.fetchall() if cur.description else []
        conn.commit()
    return out


def dead_letter(store: Store, slug: str, item_id: int, *, status: str, attempts: int, age_s: float) -> None:
    """A dead letter of the facts stage whose item last failed ``age_s`` seconds ago."""
    execute(
        store,
        "INSERT INTO dead_letters (namespace_id, stage, item_kind, item_id, attempts, last_error, status, updated_at)"
        " SELECT id, 'facts', 'episode', %s, %s, 'ModelUnavailable: down', %s, now() - make_interval(secs => %s)"
        " FROM namespaces WHERE slug = %s",
        item_id, attempts, status, age_s, slug,
    )


def test_a_due_dead_letter_makes_the_watermark_request_a_run(
    store: Store, instance: dg.DagsterInstance, stash: StashResource
) -> None:
    backoff = sensors.DEAD_LETTER_BACKOFF_S
    items = {}
    for slug in ["/due", "/early", "/dead", "/again"]:
        ns.create(store, slug)
        items[slug] = remember(store, slug, f"An observation in {slug}.").id
    catch_up(store)  # every stage at its head: only dead letters can be work
    assert tick(watermark_sensor, instance, stash, None).run_requests == []

    dead_letter(store, "/due", items["/due"], status="pending", attempts=1, age_s=backoff + 5)
    dead_letter(store, "/early", items["/early"], status="pending", attempts=1, age_s=backoff - 60)
    dead_letter(store, "/dead", items["/dead"], status="dead", attempts=3, age_s=10 * backoff)
    # failed twice: due twice the backoff after its last failure
    dead_letter(store, "/again", items["/again"], status="pending", attempts=2, age_s=backoff + 5)

    result = tick(watermark_sensor, instance, stash, None)
    assert requested(result) == {("facts", "/due")}
    (request,) = result.run_requests or []
    assert request.tags[DEAD_LETTER_TAG] == "facts:1"
    assert request.tags["stash/trigger"] == "watermark"
    assert request.run_key is not None and "dead-letter-retry" in request.run_key
    # the same dead letters in the same bucket: the same key (Dagster runs it once)
    assert tick(watermark_sensor, instance, stash, result.cursor).run_requests[0].run_key == request.run_key

    execute(store, "UPDATE dead_letters SET updated_at = updated_at - make_interval(secs => %s)", backoff)
    assert requested(tick(watermark_sensor, instance, stash, None)) == {("facts", "/due"), ("facts", "/early"),
                                                                        ("facts", "/again")}


def test_an_operator_retry_is_due_at_once(store: Store, instance: dg.DagsterInstance, stash: StashResource) -> None:
    ns.create(store, "/x")
    item = remember(store, "/x", "An observation.").id
    catch_up(store)
    dead_letter(store, "/x", item, status="pending", attempts=0, age_s=0)  # what `dead-letters retry` leaves
    assert requested(tick(watermark_sensor, instance, stash, None)) == {("facts", "/x")}


def test_no_dead_letter_run_without_a_reasoner_or_behind_a_closed_gate(
    store: Store, instance: dg.DagsterInstance, settings: Any, stash: StashResource
) -> None:
    from tests.dagster.conftest import resource_for

    ns.create(store, "/x")
    item = remember(store, "/x", "An observation.").id
    catch_up(store)
    dead_letter(store, "/x", item, status="pending", attempts=1, age_s=10 * sensors.DEAD_LETTER_BACKOFF_S)
    assert tick(watermark_sensor, instance, resource_for(settings), None).run_requests == []
    # goal_progress looks at nothing without an active goal: its dead letters wait for one
    execute(store, "UPDATE dead_letters SET stage = 'goal_progress', item_kind = 'fact'")
    assert tick(watermark_sensor, instance, stash, None).run_requests == []


def test_an_item_that_failed_comes_back_once_its_cause_is_gone(
    store: Store, instance: dg.DagsterInstance, model_stash: StashResource, server: ScriptedOpenAI,
    model: ScriptedModel, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One episode is rejected (its request too long for the server) and dead-lettered; the
    server's context is raised; the sensor requests the retry and the run derives its fact."""
    monkeypatch.setenv("STASH_FACTS_CLUSTERS_PER_CALL", "1")
    ns.create(store, "/x")
    good = remember(store, "/x", "Alice lives in Paris near the river Seine").id
    poison = remember(store, "/x", POISON).id

    def small_context(request: dict[str, Any]) -> Reply | str:
        if POISON in json.dumps(request.get("messages", [])):
            return Reply(status=400, error_message="prompt is too long for the context window")
        return model(request)

    server.responder = small_context
    instance.add_dynamic_partitions("namespaces", ["/x"])
    first = dg.materialize([episodes, *ASSETS], selection=["facts"], partition_key="/x", instance=instance,
                           resources={"stash": model_stash}, raise_on_error=False)
    assert first.success
    letters = execute(store, "SELECT item_id, status FROM dead_letters")
    assert letters == [{"item_id": poison, "status": "pending"}]
    catch_up(store)  # the other stages have nothing to do with these two facts-less episodes
    assert tick(watermark_sensor, instance, model_stash, None).run_requests == []  # not due yet

    server.responder = model  # the cause is gone
    monkeypatch.setattr(sensors, "DEAD_LETTER_BACKOFF_S", 0.0)
    result = tick(watermark_sensor, instance, model_stash, None)
    (request,) = result.run_requests or []
    assert request.partition_key == "/x" and request.tags[DEAD_LETTER_TAG] == "facts:1"
    retry = dg.materialize([episodes, *ASSETS], selection=request.asset_selection, partition_key="/x",
                           instance=instance, resources={"stash": model_stash}, tags=request.tags,
                           raise_on_error=False)
    assert retry.success
    assert execute(store, "SELECT item_id, status FROM dead_letters") == [{"item_id": poison, "status": "retried"}]
    cited = execute(store, "SELECT DISTINCT parent_id FROM lineage WHERE parent_kind = 'episode' ORDER BY 1")
    assert [r["parent_id"] for r in cited] == [good, poison]
    after = tick(watermark_sensor, instance, model_stash, None)
    assert ("facts", "/x") not in requested(after)  # nothing left to retry (later stages have a new fact)
    assert all(DEAD_LETTER_TAG not in r.tags for r in after.run_requests or [])
