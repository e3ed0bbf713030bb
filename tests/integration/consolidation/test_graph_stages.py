"""Relationships, causal links and patterns: exact rows, lineage, own cursors, idempotency."""

from __future__ import annotations

from stash_pipeline.consolidation import runner
from testkit.openai_server import last_user_message, system_prompt
from tests.integration.consolidation.conftest import rows, seed

EPISODES = [
    "Alice works at Acme in the Lyon office",
    "Alice works at Acme in the Lyon office today",
    "Alice drives a Tesla to the Lyon office",
    "Alice drives a Tesla to the Lyon office daily",
    "Bob deploys Kubernetes clusters every Friday",
]


def _listed_ids(server, stage):
    import re

    out = []
    for request in server.chat_requests():
        if f"STAGE: {stage}" in system_prompt(request):
            facts = last_user_message(request).split("Relationships:")[0]
            out += [int(i) for i in re.findall(r"^\[(\d+)\]", facts, re.MULTILINE)]
    return sorted(set(out))


def test_graph_stages_exact_rows_and_lineage(cstore, server, model):
    seed(cstore, "/g", EPISODES)
    reports = {r.stage: r for r in runner.run_all(cstore, "/g")}
    facts = rows(cstore, "SELECT id, entity, property, value FROM facts ORDER BY id")
    assert [(f["entity"], f["property"], f["value"]) for f in facts] == [
        ("Alice", "works", "Acme"), ("Alice", "drives", "Tesla"), ("Bob", "deploys", "Kubernetes"),
    ]
    f1, f2, f3 = (f["id"] for f in facts)

    rels = rows(cstore, "SELECT id, from_entity, relation_type, to_entity, source_fact_id, confidence FROM relationships ORDER BY id")
    assert [(r["from_entity"], r["relation_type"], r["to_entity"], r["source_fact_id"]) for r in rels] == [
        ("Alice", "works_at", "Acme", f1), ("Alice", "drives_a", "Tesla", f2), ("Bob", "deploys", "Kubernetes", f3),
    ]
    assert reports["relationships"].model_calls == 1  # three facts, one call
    rel_lineage = rows(cstore, "SELECT child_id, parent_kind, parent_id FROM lineage WHERE child_kind = 'relationship' ORDER BY child_id")
    assert [(r["parent_kind"], r["parent_id"]) for r in rel_lineage] == [("fact", f1), ("fact", f2), ("fact", f3)]

    links = rows(cstore, "SELECT cause_fact_id, effect_fact_id, method, rationale FROM causal_links")
    assert [(c["cause_fact_id"], c["effect_fact_id"], c["method"]) for c in links] == [(f1, f2, "extracted")]
    assert links[0]["rationale"] == f"fact {f1} precedes and explains fact {f2}"
    assert reports["causal_links"].details["self_loops_dropped"] == 1
    link_parents = rows(cstore, "SELECT parent_id FROM lineage WHERE child_kind = 'causal_link' ORDER BY parent_id")
    assert [p["parent_id"] for p in link_parents] == [f1, f2]
    # the reference's shared-cursor bug: causal links must see exactly what relationships saw
    assert _listed_ids(server, "causal_links") == _listed_ids(server, "relationships") == [f1, f2, f3]

    patterns = rows(cstore, "SELECT id, content, rationale, round(confidence::numeric, 4) AS confidence FROM patterns")
    assert [p["content"] for p in patterns] == ["Alice recurs across 2 facts"]
    assert patterns[0]["rationale"] == "all cited facts are about Alice"
    sources = rows(cstore, "SELECT parent_kind, parent_id FROM lineage WHERE child_kind = 'pattern' ORDER BY parent_kind, parent_id")
    assert [(s["parent_kind"], s["parent_id"]) for s in sources] == [
        ("fact", f1), ("fact", f2), ("relationship", rels[0]["id"]), ("relationship", rels[1]["id"]),
    ]
    cursors = {r["stage"]: r["cursor"] for r in rows(cstore, "SELECT stage, cursor FROM stage_checkpoints")}
    assert cursors["relationships"] == cursors["causal_links"] == cursors["patterns"] == f3

    # run twice → nothing new, no model calls
    calls_before = len(server.chat_requests())
    again = runner.run_all(cstore, "/g")
    assert all(r.rows_written == 0 for r in again)
    assert len(server.chat_requests()) == calls_before
    assert len(rows(cstore, "SELECT id FROM relationships")) == 3
    assert len(rows(cstore, "SELECT id FROM patterns")) == 1


def test_patterns_wait_for_relationships_cursor(cstore, server, model):
    seed(cstore, "/g", EPISODES)
    runner.run_stage(cstore, "/g", "facts")
    early = runner.run_stage(cstore, "/g", "patterns")
    assert early.status == "idle" and early.model_calls == 0
    status = {r["stage"]: r for r in runner.status(cstore, "/g")}
    assert status["patterns"]["head"] == 0 and not status["patterns"]["has_work"]
    assert status["relationships"]["has_work"] and status["causal_links"]["has_work"]
    runner.run_stage(cstore, "/g", "relationships")
    status = {r["stage"]: r for r in runner.status(cstore, "/g")}
    assert status["patterns"]["has_work"] and status["causal_links"]["has_work"]
    assert not status["relationships"]["has_work"]
    late = runner.run_stage(cstore, "/g", "patterns")
    assert late.rows_written == 1


def test_superseded_facts_are_not_fed_to_later_stages(cstore, server, model):
    seed(cstore, "/s", ["Alice lives in Paris near the river Seine", "Alice lives in Paris near the river"])
    runner.run_stage(cstore, "/s", "facts")
    seed(cstore, "/s", ["Alice lives in Berlin since the spring"])
    runner.run_stage(cstore, "/s", "facts")
    facts = rows(cstore, "SELECT id, value, valid_until IS NOT NULL AS retired FROM facts ORDER BY id")
    assert [(f["value"], f["retired"]) for f in facts] == [("Paris", True), ("Berlin", False)]
    runner.run_stage(cstore, "/s", "relationships")
    assert _listed_ids(server, "relationships") == [facts[1]["id"]]
    cursor = rows(cstore, "SELECT cursor FROM stage_checkpoints WHERE stage = 'relationships'")[0]["cursor"]
    assert cursor == facts[1]["id"]
