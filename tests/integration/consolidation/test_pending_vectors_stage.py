"""The facts stage (and the watermark) never pass an episode still waiting for its vector."""

from __future__ import annotations

from typing import Any

from stash_pipeline.consolidation import runner
from stash_pipeline.memory import episodes
from stash_pipeline.memory.pending import embed_pending
from tests.integration.consolidation.conftest import rows, seed

ALICE = ["Alice lives in Paris near the river Seine", "Alice lives in Paris near the river"]
BOB = "Bob deploys Kubernetes clusters every Friday"


def _facts_status(store: Any) -> dict[str, Any]:
    return next(s for s in runner.status(store, "/t") if s["stage"] == "facts")


def test_watermark_and_cursor_stop_before_a_waiting_episode(cstore: Any, make_store: Any, server: Any) -> None:
    alice = seed(cstore, "/t", ALICE)
    deferring = make_store(embed_on_write="async")
    bob = episodes.remember(deferring, "/t", BOB).id
    later = episodes.remember(cstore, "/t", "Carol reviews the quarterly budget in March").id
    assert alice[1] < bob < later

    # the watermark: the head stops before the waiting episode, so the backlog is Alice's two
    status = _facts_status(cstore)
    assert (status["head"], status["backlog"], status["has_work"]) == (alice[1], 2, True)

    report = runner.run_stage(cstore, "/t", "facts")
    assert report.status == "ok"
    assert (report.rows_in, report.cursor_to) == (2, alice[1])  # not past Bob, so Carol waits too
    parents = rows(cstore, "SELECT DISTINCT parent_id FROM lineage WHERE parent_kind = 'episode' ORDER BY 1")
    assert [r["parent_id"] for r in parents] == alice
    status = _facts_status(cstore)
    assert (status["cursor"], status["head"], status["has_work"]) == (alice[1], alice[1], False)
    assert runner.run_stage(cstore, "/t", "facts").status == "idle"

    # the vector arrives: Bob and Carol are consumed, nothing was skipped
    assert embed_pending(deferring) == 1
    assert _facts_status(cstore)["head"] == later
    report = runner.run_stage(cstore, "/t", "facts")
    assert (report.status, report.rows_in, report.cursor_to) == ("ok", 2, later)
    parents = rows(cstore, "SELECT DISTINCT parent_id FROM lineage WHERE parent_kind = 'episode' ORDER BY 1")
    assert [r["parent_id"] for r in parents] == [*alice, bob, later]


def test_an_erased_waiting_episode_does_not_hold_the_watermark(cstore: Any, make_store: Any) -> None:
    first = seed(cstore, "/t", ["Dana runs the on-call rotation"])[0]
    deferring = make_store(embed_on_write="async")
    waiting = episodes.remember(deferring, "/t", "Erin owns the payments dashboard").id
    after = episodes.remember(cstore, "/t", "Frank moved the standup to ten").id
    assert _facts_status(cstore)["head"] == first
    episodes.purge(cstore, waiting)
    assert _facts_status(cstore)["head"] == after
