"""consolidation.plan.plan: what a run would do, from the backlog alone — no model call,
no write — and an estimate the real run stays within."""

from __future__ import annotations

import math

import pytest

from stash_pipeline import errors
from stash_pipeline.consolidation import runner
from stash_pipeline.consolidation.plan import plan
from stash_pipeline.stages import STAGE_NAMES
from tests.integration.consolidation.conftest import rows, seed


def _by(rows_: list[dict], namespace: str) -> dict[str, dict]:
    return {r["stage"]: r for r in rows_ if r["namespace"] == namespace}


def test_plan_counts_items_and_calls_without_calling_or_writing(cstore, server, model):
    seed(cstore, "/w", [f"Team {n} deploys service {n} on day {n % 7}" for n in range(20)])
    seed(cstore, "/w/child", ["Alice owns the billing service", "Bob reviews every migration", "CI runs nightly"])
    before_status = runner.status(cstore, "/w")
    before_checkpoints = rows(cstore, "SELECT count(*) AS n FROM stage_checkpoints")

    planned = plan(cstore, "/w")

    per_call = cstore.settings.facts_clusters_per_call
    top, child = _by(planned, "/w"), _by(planned, "/w/child")
    assert list(top) == list(STAGE_NAMES) and list(child) == list(STAGE_NAMES)
    assert top["facts"] == {
        "namespace": "/w", "stage": "facts", "action": "run", "items": 20, "retries": 0,
        "items_per_call": per_call, "model_calls": math.ceil(20 / per_call),
    }
    assert child["facts"]["items"] == 3 and child["facts"]["model_calls"] == 1
    # no facts yet: the fact-driven stages have nothing to do; decay (no model) always runs
    assert top["relationships"]["action"] == "idle" and top["relationships"]["model_calls"] == 0
    assert top["decay"]["action"] == "run" and top["decay"]["model_calls"] == 0
    # read-only: no model request, no checkpoint, nothing moved
    assert server.chat_requests() == []
    assert rows(cstore, "SELECT count(*) AS n FROM stage_checkpoints") == before_checkpoints
    assert runner.status(cstore, "/w") == before_status

    # the estimate is an upper bound of the facts stage's own calls
    runner.run_all(cstore, "/w", stages=["facts"])
    assert 1 <= model.calls["facts"] <= top["facts"]["model_calls"]
    after = _by(plan(cstore, "/w", ["facts", "relationships"]), "/w")
    assert set(after) == {"facts", "relationships"}
    assert after["facts"]["action"] == "idle" and after["facts"]["items"] == 0
    assert after["relationships"]["action"] == "run" and after["relationships"]["items"] >= 1


def test_plan_without_a_reasoner_says_the_model_stages_would_be_skipped(store):
    seed(store, "/p", ["The deploy uses blue-green"])
    facts = _by(plan(store, "/p"), "/p")["facts"]
    assert facts["action"] == "not_configured" and facts["items"] == 1 and facts["model_calls"] == 0
    with pytest.raises(errors.InvalidInput):
        plan(store, "/p", ["nope"])
    with pytest.raises(errors.NamespaceNotFound):
        plan(store, "/nope")
