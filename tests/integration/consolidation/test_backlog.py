"""stage_backlog / status / decay: the runner's bookkeeping against real Postgres."""

from __future__ import annotations

from stash_pipeline import consolidation
from stash_pipeline.memory import namespaces


def test_status_reports_every_stage_and_not_configured_leaves_cursors(store):
    namespaces.create(store, "/a")
    with store.db.transaction() as tx:
        ns_id = tx.scalar("get_namespace_by_slug", slug="/a")
    rows = consolidation.status(store, "/a")
    assert [r["stage"] for r in rows] == [
        "facts", "relationships", "causal_links", "patterns", "goal_progress",
        "failure_patterns", "hypothesis_evidence", "decay",
    ]
    assert all(r["cursor"] == 0 and r["head"] == 0 and not r["has_work"] for r in rows)
    report = consolidation.run_stage(store, "/a", "facts")
    assert report.status == "not_configured"
    assert "reasoner not configured" in report.message
    decay = consolidation.run_stage(store, "/a", "decay")
    assert decay.status == "idle"
    reports = consolidation.run_all(store, "/a")
    assert [r.status for r in reports] == ["not_configured"] * 7 + ["idle"]
    assert ns_id is not None
