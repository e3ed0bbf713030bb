"""Goal progress, hypothesis evidence, failure patterns and decay: exact rows and rules."""

from __future__ import annotations

from stash_pipeline.consolidation import runner
from stash_pipeline.memory import failures, goals, hypotheses
from tests.integration.consolidation.conftest import rows, seed


def test_goal_progress_appends_model_notes_and_never_completes(cstore, server, model):
    seed(cstore, "/q", [])
    goal = goals.create(cstore, "/q", "Migrate the Kubernetes clusters to version 1.30")
    idle = runner.run_stage(cstore, "/q", "goal_progress")
    assert idle.status == "idle" and idle.model_calls == 0
    seed(cstore, "/q", ["Bob upgraded Kubernetes clusters on Friday", "Bob upgraded Kubernetes clusters on Friday night"])
    runner.run_stage(cstore, "/q", "facts")
    fact_id = rows(cstore, "SELECT id FROM facts")[0]["id"]
    report = runner.run_stage(cstore, "/q", "goal_progress")
    assert (report.rows_in, report.rows_written, report.model_calls) == (1, 1, 1)
    notes = rows(cstore, "SELECT goal_id, author, kind, fact_id, confidence FROM goal_notes")
    assert notes == [{"goal_id": goal.id, "author": "model", "kind": "progress", "fact_id": fact_id, "confidence": 0.8}]
    assert rows(cstore, "SELECT status FROM goals")[0]["status"] == "active"
    note_parents = rows(cstore, "SELECT parent_kind, parent_id FROM lineage WHERE child_kind = 'goal_note'")
    assert note_parents == [{"parent_kind": "fact", "parent_id": fact_id}]
    again = runner.run_stage(cstore, "/q", "goal_progress")
    assert again.rows_written == 0 and len(rows(cstore, "SELECT id FROM goal_notes")) == 1


def test_hypothesis_evidence_moves_states_and_logs_every_verdict(cstore, server, model):
    seed(cstore, "/h", [])
    hyp = hypotheses.create(cstore, "/h", "Friday deploys of Kubernetes clusters cause outages",
                            "Check deploy logs for Friday Kubernetes outages", confidence=0.5)
    seed(cstore, "/h", ["Bob deploys Kubernetes clusters every Friday", "Bob deploys Kubernetes clusters every Friday morning"])
    runner.run_stage(cstore, "/h", "facts")
    r1 = runner.run_stage(cstore, "/h", "hypothesis_evidence")
    assert r1.details["hypotheses_testing"] == 1
    assert rows(cstore, "SELECT status FROM hypotheses")[0]["status"] == "testing"
    request = next(r for r in server.chat_requests() if "STAGE: hypothesis_evidence" in r["messages"][0]["content"])
    assert "plan: Check deploy logs for Friday Kubernetes outages" in request["messages"][1]["content"]
    seed(cstore, "/h", ["Kubernetes clusters deploys on Friday caused outages for Bob",
                        "Kubernetes clusters deploys on Friday caused outages for Bob again"])
    runner.run_stage(cstore, "/h", "facts")
    r2 = runner.run_stage(cstore, "/h", "hypothesis_evidence")
    assert r2.details["hypotheses_confirmed"] == 1
    h = rows(cstore, "SELECT status, confirmed_fact_id FROM hypotheses")[0]
    assert h["status"] == "confirmed"
    confirmed = rows(cstore, "SELECT origin, content FROM facts WHERE id = %(id)s", id=h["confirmed_fact_id"])[0]
    assert confirmed == {"origin": "hypothesis", "content": hyp.content}
    evidence = rows(cstore, "SELECT verdict, action, reasoning <> '' AS has_reasoning FROM hypothesis_evidence ORDER BY id")
    assert [(e["verdict"], e["action"], e["has_reasoning"]) for e in evidence] == [
        ("supports", "testing", True), ("supports", "confirmed", True),
    ]


def test_contradicting_evidence_rejects_or_lowers_confidence(cstore, server, model, make_store):
    seed(cstore, "/h", [])
    hypotheses.create(cstore, "/h", "Friday deploys of Kubernetes clusters cause outages",
                      "Check deploy logs", confidence=0.6)
    seed(cstore, "/h", ["Bob deploys Kubernetes clusters on Friday and never sees outages",
                        "Bob deploys Kubernetes clusters on Friday and never sees outages at all"])
    runner.run_stage(cstore, "/h", "facts")
    runner.run_stage(cstore, "/h", "hypothesis_evidence")
    h = rows(cstore, "SELECT status, rejection_reason FROM hypotheses")[0]
    assert h["status"] == "rejected" and h["rejection_reason"].startswith("the fact speaks to")
    # below the reject threshold a contradiction still lowers the confidence (defect 19)
    strict = make_store(openai_base_url=server.base_url, reasoner_model="scripted",
                        hypothesis_auto_reject_threshold=0.99)
    hypotheses.create(strict, "/h", "Friday deploys of Kubernetes clusters cause outages often",
                      "Check deploy logs again", confidence=0.6)
    seed(strict, "/h", ["Bob never sees outages after Friday Kubernetes cluster deploys",
                        "Bob never sees outages after Friday Kubernetes cluster deploys at night"])
    runner.run_stage(strict, "/h", "facts")
    runner.run_stage(strict, "/h", "hypothesis_evidence")
    second = rows(strict, "SELECT status, round(confidence::numeric, 2) AS c FROM hypotheses ORDER BY id")[1]
    assert second["status"] == "proposed" and float(second["c"]) == 0.1


def test_failure_patterns_repeat_episodes_and_pattern_fact(cstore, server, model):
    seed(cstore, "/f", ["Deploy script failed on Friday with Postgres timeout"])
    failure = failures.create(cstore, "/f", "Deploy script failed with Postgres timeout",
                              "connection pool too small", "raise the pool size")
    first = runner.run_stage(cstore, "/f", "failure_patterns")
    # a new failure is compared with recent evidence: one repeat (episode 1)
    assert first.details.get("repeat_failures") == 1
    ev = seed(cstore, "/f", ["Deploy script failed again with Postgres timeout at noon",
                             "Nightly deploy script failed with Postgres timeout"])
    second = runner.run_stage(cstore, "/f", "failure_patterns")
    assert second.details["repeat_failures"] == 2 and second.details["pattern_facts"] == 1
    repeats = rows(cstore, "SELECT id, content, embedding IS NOT NULL AS embedded, idempotency_key FROM episodes"
                          " WHERE kind = 'repeat_failure' ORDER BY id")
    assert len(repeats) == 3 and all(r["embedded"] for r in repeats)
    assert repeats[1]["idempotency_key"] == f"repeat_failure:{failure.id}:{ev[0]}"
    parents = rows(cstore, "SELECT parent_kind, parent_id FROM lineage WHERE child_kind = 'episode' AND child_id = %(id)s"
                          " ORDER BY parent_kind", id=repeats[1]["id"])
    assert [(p["parent_kind"], p["parent_id"]) for p in parents] == [("episode", ev[0]), ("failure", failure.id)]
    fact = rows(cstore, "SELECT id, origin FROM facts WHERE origin = 'failure_pattern'")
    assert len(fact) == 1
    fparents = rows(cstore, "SELECT parent_kind FROM lineage WHERE child_kind = 'fact' AND child_id = %(id)s ORDER BY 1",
                    id=fact[0]["id"])
    assert [p["parent_kind"] for p in fparents] == ["episode", "failure"]
    # repeat episodes are never evidence themselves: another run finds nothing new
    third = runner.run_stage(cstore, "/f", "failure_patterns")
    assert third.model_calls == 0 and third.rows_written == 0
    assert len(rows(cstore, "SELECT id FROM episodes WHERE kind = 'repeat_failure'")) == 3


def test_decay_and_expiry(cstore):
    seed(cstore, "/d", [])
    from stash_pipeline.memory import facts as fact_ops

    with cstore.db.transaction() as tx:
        ns_id = tx.scalar("get_namespace_by_slug", slug="/d")
        old = fact_ops.insert_fact(tx, cstore, namespace_id=ns_id, content="Old knowledge", origin="asserted", confidence=0.5)
        weak = fact_ops.insert_fact(tx, cstore, namespace_id=ns_id, content="Weak knowledge", origin="asserted", confidence=0.1)
        fresh = fact_ops.insert_fact(tx, cstore, namespace_id=ns_id, content="Fresh knowledge", origin="asserted", confidence=0.5)
    rows(cstore, "UPDATE facts SET updated_at = now() - interval '8 days', valid_from = now() - interval '8 days'"
                 " WHERE id = ANY(%(ids)s) RETURNING id", ids=[old["id"], weak["id"]])
    report = runner.run_stage(cstore, "/d", "decay")
    assert report.details == {"facts_decayed": 2, "facts_expired": 1}
    got = {r["id"]: r for r in rows(cstore, "SELECT id, round(confidence::numeric, 3) AS c, valid_until IS NOT NULL AS expired FROM facts")}
    assert (float(got[old["id"]]["c"]), got[old["id"]]["expired"]) == (0.475, False)
    assert (float(got[weak["id"]]["c"]), got[weak["id"]]["expired"]) == (0.095, True)
    assert (float(got[fresh["id"]]["c"]), got[fresh["id"]]["expired"]) == (0.5, False)
    again = runner.run_stage(cstore, "/d", "decay")
    assert again.details == {"facts_decayed": 0, "facts_expired": 0}
