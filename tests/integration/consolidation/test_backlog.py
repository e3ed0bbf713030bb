"""stage_backlog / status / decay: the runner's bookkeeping against real Postgres."""

from __future__ import annotations

from stash_pipeline.consolidation import runner
from stash_pipeline.memory import namespaces
from stash_pipeline.stages import backlog_parameters, get_stage


def test_status_reports_every_stage_and_not_configured_leaves_cursors(store):
    namespaces.create(store, "/a")
    with store.db.transaction() as tx:
        ns_id = tx.scalar("get_namespace_by_slug", slug="/a")
    rows = runner.status(store, "/a")
    assert [r["stage"] for r in rows] == [
        "facts", "relationships", "causal_links", "patterns", "goal_progress",
        "failure_patterns", "hypothesis_evidence", "profiles", "decay",
    ]
    assert all(r["cursor"] == 0 and r["head"] == 0 and not r["has_work"] for r in rows)
    report = runner.run_stage(store, "/a", "facts")
    assert report.status == "not_configured"
    assert "reasoner not configured" in report.message
    decay = runner.run_stage(store, "/a", "decay")
    assert decay.status == "idle"
    reports = runner.run_all(store, "/a")
    assert [r.status for r in reports] == ["not_configured"] * 7 + ["idle", "idle"]
    assert ns_id is not None


def test_backlog_rules_per_stage(cstore, server, model):
    from stash_pipeline.memory import failures, goals, hypotheses
    from tests.integration.consolidation.conftest import seed

    ids = seed(cstore, "/w", ["Bob deploys Kubernetes clusters every Friday"])
    seed(cstore, "/w/child", [])

    def work(path):
        return {r["stage"]: (r["head"], r["has_work"]) for r in runner.status(cstore, path)
                if r["namespace"] == path}

    # not configured: nothing moves, status says so
    assert work("/w")["facts"] == (ids[0], True)
    assert work("/w")["failure_patterns"] == (ids[0], False)  # no failure yet
    runner.run_stage(cstore, "/w", "facts")
    fact_head = runner.status(cstore, "/w")[1]["head"]
    backlog = work("/w")
    assert backlog["facts"] == (ids[0], False)
    assert backlog["relationships"] == (fact_head, True) and backlog["causal_links"] == (fact_head, True)
    assert backlog["goal_progress"] == (fact_head, False)  # no active goal
    assert backlog["hypothesis_evidence"] == (fact_head, False)  # no open hypothesis
    assert backlog["patterns"] == (0, False)  # waits for the relationships cursor
    assert backlog["decay"] == (0, False)
    assert backlog["profiles"] == (fact_head, True)
    goals.create(cstore, "/w", "Ship it")
    hypotheses.create(cstore, "/w", "Friday deploys break things", "Look at the logs")
    failures.create(cstore, "/w", "Deploy broke", "bad config", "check config")
    backlog = work("/w")
    assert backlog["goal_progress"][1] and backlog["hypothesis_evidence"][1] and backlog["failure_patterns"][1]
    assert work("/w/child")["facts"] == (0, False)
    # the sensor's form: every namespace in one query
    with cstore.db.transaction() as tx:
        every = tx.all("stage_backlog", **backlog_parameters())
    assert {r["slug"] for r in every} == {"/", "/w", "/w/child"}
    assert set(every[0]) >= {"namespace_id", "slug", "stage", "cursor", "head", "has_work"}
    # run_tree runs every namespace of the tree separately
    reports = runner.run_tree(cstore, "/w", stages=["facts", "relationships"])
    assert [(r.namespace, r.stage) for r in reports] == [
        ("/w", "facts"), ("/w", "relationships"), ("/w/child", "facts"), ("/w/child", "relationships"),
    ]
    assert reports[1].rows_written == 1


def test_not_configured_keeps_cursors(store):
    from tests.integration.consolidation.conftest import rows, seed

    seed(store, "/n", ["Bob deploys Kubernetes clusters every Friday"])
    reports = runner.run_all(store, "/n")
    assert {r.status for r in reports if get_stage(r.stage).needs_model} == {"not_configured"}
    assert rows(store, "SELECT stage, cursor, last_status FROM stage_checkpoints WHERE stage = 'facts'") == [
        {"stage": "facts", "cursor": 0, "last_status": "not_configured"}
    ]
    assert rows(store, "SELECT count(*) AS n FROM model_calls")[0]["n"] == 0


def test_dead_letter_bulk_retry_and_drop_by_stage(cstore, server, model):
    from stash_pipeline.consolidation import dead_letters
    from tests.integration.consolidation.conftest import seed

    seed(cstore, "/x", ["Alice uses Python for data work"])
    model.inject("facts", "invent", times=20)
    for _ in range(3):
        runner.run_stage(cstore, "/x", "facts")
    assert [d["status"] for d in dead_letters.list_(cstore, "/x")] == ["dead"]
    assert len(dead_letters.retry(cstore, namespaces="/x", stage="facts")) == 1
    assert dead_letters.list_(cstore, "/x", status="pending")[0]["attempts"] == 0
    assert len(dead_letters.drop(cstore, namespaces="/x", stage="facts")) == 1
    assert dead_letters.list_(cstore, "/x", status="pending") == []


def test_status_backlog_counts_rows_of_this_namespace_only(store):
    from stash_pipeline.consolidation import runner
    from stash_pipeline.memory import episodes, namespaces

    namespaces.create(store, "/mine")
    namespaces.create(store, "/theirs")
    # interleave writes so the global ids of /mine are far apart
    for i in range(3):
        episodes.remember(store, "/mine", f"mine {i}")
        for j in range(4):
            episodes.remember(store, "/theirs", f"theirs {i}.{j}")
    rows = {r["stage"]: r for r in runner.status(store, "/mine")}
    assert rows["facts"]["backlog"] == 3
    assert rows["failure_patterns"]["backlog"] == 3
    assert rows["relationships"]["backlog"] == 0
    assert rows["decay"]["backlog"] == 0


def test_the_backlog_query_reports_every_stage_of_the_table_a_new_one_too(store, monkeypatch):
    """stage_backlog knows no stage names: a new table entry is reported and gated by its columns."""
    from stash_pipeline import stages
    from stash_pipeline.memory import facts, goals

    namespaces.create(store, "/e")
    with store.db.transaction() as tx:
        ns_id = tx.scalar("get_namespace_by_slug", slug="/e")
    echo = stages.StageSpec("echo", "Echo new facts while a goal is active.", lambda ctx: None, ("facts",), "facts",
                            gate="active_goal", needs_model=False)
    monkeypatch.setattr(stages, "STAGES", (*stages.STAGES, echo))

    def rows():
        return store.db.all("stage_backlog", **backlog_parameters([ns_id]))

    assert [r["stage"] for r in rows()] == [*stages.STAGE_NAMES, "echo"]
    fact_id = facts.assert_fact(store, "/e", "The deploy window is Friday").fact.id
    assert {r["stage"]: (r["head"], r["has_work"]) for r in rows()}["echo"] == (fact_id, False)  # gate closed
    goals.create(store, "/e", "Ship it")
    assert {r["stage"]: (r["head"], r["has_work"]) for r in rows()}["echo"] == (fact_id, True)
