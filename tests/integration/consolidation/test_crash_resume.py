"""Every model stage: a crash mid-batch commits nothing; the rerun equals a clean run; a third run adds nothing."""

from __future__ import annotations

import pytest

from stash_pipeline.consolidation import runner
from stash_pipeline.memory import failures, goals, hypotheses, lineage
from stash_pipeline.stages import STAGES
from tests.integration.consolidation.conftest import rows, seed

EPISODES = [
    "Alice works at Acme in the Lyon office",
    "Alice works at Acme in the Lyon office today",
    "Alice drives a Tesla to the Lyon office",
    "Alice drives a Tesla to the Lyon office daily",
    "Bob deploys Kubernetes clusters every Friday",
    "Bob deploys Kubernetes clusters every Friday night",
    "Deploy script failed on Friday with Postgres timeout",
    "Nightly deploy script failed with Postgres timeout",
]

# Derived rows per namespace, with ids masked (the two namespaces draw from shared sequences).
SIGNATURE = {
    "facts": "SELECT regexp_replace(content, '[0-9]+', '#', 'g') AS v, origin AS o FROM facts WHERE namespace_id = %(ns)s",
    "relationships": "SELECT from_entity || ' ' || relation_type || ' ' || to_entity AS v FROM relationships WHERE namespace_id = %(ns)s",
    "causal_links": "SELECT regexp_replace(rationale, '[0-9]+', '#', 'g') AS v FROM causal_links WHERE namespace_id = %(ns)s",
    "patterns": "SELECT content AS v FROM patterns WHERE namespace_id = %(ns)s",
    "goal_notes": "SELECT kind || ' ' || content AS v FROM goal_notes WHERE namespace_id = %(ns)s",
    "evidence": "SELECT verdict || ' ' || COALESCE(action, '') AS v FROM hypothesis_evidence WHERE namespace_id = %(ns)s",
    "repeats": "SELECT regexp_replace(content, '[0-9]+', '#', 'g') AS v FROM episodes WHERE namespace_id = %(ns)s AND kind = 'repeat_failure'",
    "lineage": "SELECT child_kind || '<-' || parent_kind AS v FROM lineage WHERE namespace_id = %(ns)s",
    "contradictions": "SELECT classification AS v FROM contradictions WHERE namespace_id = %(ns)s",
    "hypotheses": "SELECT status || ' ' || round(confidence::numeric, 2) AS v FROM hypotheses WHERE namespace_id = %(ns)s",
}


def _signature(store, slug):
    ns = rows(store, "SELECT id FROM namespaces WHERE slug = %(s)s", s=slug)[0]["id"]
    return {name: sorted(str(sorted(r.items())) for r in rows(store, sql, ns=ns)) for name, sql in SIGNATURE.items()}


def _cursors(store, stage):
    found = rows(store, "SELECT cursor, aux_cursor FROM stage_checkpoints c JOIN namespaces n"
                        " ON n.id = c.namespace_id WHERE n.slug = '/crash' AND stage = %(s)s", s=stage)
    return (found[0]["cursor"], found[0]["aux_cursor"]) if found else (0, 0)


def _prepare(store, slug):
    seed(store, slug, [])
    goals.create(store, slug, "Make Kubernetes deploys on Friday safe for Alice")
    hypotheses.create(store, slug, "Kubernetes deploys on Friday cause Postgres timeout",
                      "Compare Friday Kubernetes deploy logs with Postgres timeout errors")
    failures.create(store, slug, "Deploy script failed with Postgres timeout", "pool too small", "raise the pool size")
    seed(store, slug, EPISODES)


MODEL_STAGES = [s.name for s in STAGES if s.needs_model]


@pytest.mark.parametrize("stage", MODEL_STAGES)
def test_crash_mid_batch_then_resume(cstore, server, model, monkeypatch, stage):
    before = MODEL_STAGES[: MODEL_STAGES.index(stage)]
    for slug in ("/clean", "/crash"):
        _prepare(cstore, slug)
        if before:
            runner.run_all(cstore, slug, stages=before)
    runner.run_stage(cstore, "/clean", stage)
    pre = _signature(cstore, "/crash")
    cursor_before = _cursors(cstore, stage)

    real_add = lineage.add
    state = {"calls": 0}
    # after one item's writes, in the middle of the next (patterns writes one row here:
    # crash between its insert and its lineage)
    crash_at = 1 if stage == "patterns" else 2

    def crash_mid_batch(*args, **kwargs):
        state["calls"] += 1
        if state["calls"] == crash_at:
            raise RuntimeError("injected crash")
        return real_add(*args, **kwargs)

    monkeypatch.setattr(lineage, "add", crash_mid_batch)
    with pytest.raises(RuntimeError, match="injected crash"):
        runner.run_stage(cstore, "/crash", stage)
    monkeypatch.setattr(lineage, "add", real_add)
    assert state["calls"] == crash_at
    assert _signature(cstore, "/crash") == pre  # nothing of the crashed batch was committed
    assert _cursors(cstore, stage) == cursor_before

    resumed = runner.run_stage(cstore, "/crash", stage)
    assert resumed.rows_written > 0
    assert _signature(cstore, "/crash") == _signature(cstore, "/clean")

    third = runner.run_stage(cstore, "/crash", stage)
    assert third.rows_written == 0
    assert _signature(cstore, "/crash") == _signature(cstore, "/clean")
