"""Facts stage: clustering, grounded synthesis, dedup reinforcement, contradictions, idempotency."""

from __future__ import annotations

import pytest

from stash_pipeline.consolidation import runner
from stash_pipeline.stages import facts as facts_stage
from stash_pipeline.stages.prompts import FactDraft
from tests.integration.consolidation.conftest import rows, seed

ALICE = ["Alice lives in Paris near the river Seine", "Alice lives in Paris near the river"]
BOB = ["Bob deploys Kubernetes clusters every Friday"]


def _facts(store):
    return rows(
        store,
        "SELECT id, entity, property, value, content, round(confidence::numeric, 4) AS confidence, origin,"
        " reinforcements, valid_until IS NOT NULL AS retired, superseded_by FROM facts ORDER BY id",
    )


def _fact_parents(store, fact_id):
    return [
        (r["parent_kind"], r["parent_id"])
        for r in rows(
            store,
            "SELECT parent_kind, parent_id FROM lineage WHERE child_kind = 'fact' AND child_id = %(id)s"
            " ORDER BY parent_kind, parent_id",
            id=fact_id,
        )
    ]


def test_facts_happy_path_exact_rows_lineage_and_rerun(cstore, server, model):
    alice = seed(cstore, "/t", ALICE)
    bob = seed(cstore, "/t", BOB)
    report = runner.run_stage(cstore, "/t", "facts")
    assert report.status == "ok"
    assert (report.rows_in, report.rows_written, report.items_failed) == (3, 2, 0)
    assert (report.cursor_from, report.cursor_to) == (0, bob[0])
    assert report.model_calls == 1  # both clusters in one call
    got = _facts(cstore)
    assert [(f["entity"], f["property"], f["value"], float(f["confidence"]), f["origin"]) for f in got] == [
        ("Alice", "lives", "Paris", 0.65, "synthesis"),
        ("Bob", "deploys", "Kubernetes", 0.5333, "synthesis"),
    ]
    assert got[0]["content"].startswith("Alice is noted as: ")
    assert _fact_parents(cstore, got[0]["id"]) == [("episode", alice[0]), ("episode", alice[1])]
    assert _fact_parents(cstore, got[1]["id"]) == [("episode", bob[0])]
    calls = rows(cstore, "SELECT stage, run_id, ok, prompt_tokens > 0 AS tokens FROM model_calls")
    assert [(c["stage"], c["ok"], c["tokens"]) for c in calls] == [("facts", True, True)]

    again = runner.run_stage(cstore, "/t", "facts")
    assert again.status == "idle" and again.model_calls == 0
    assert _facts(cstore) == got
    assert rows(cstore, "SELECT cursor FROM stage_checkpoints WHERE stage = 'facts'")[0]["cursor"] == bob[0]


def test_dedup_reinforces_and_replacement_supersedes(cstore, server, model):
    seed(cstore, "/t", ALICE + BOB)
    runner.run_stage(cstore, "/t", "facts")
    before = {f["entity"]: f for f in _facts(cstore)}
    again = seed(cstore, "/t", BOB)  # the same observation again → reinforce, no new fact
    moved = seed(cstore, "/t", ["Alice lives in Berlin since the spring"])
    report = runner.run_stage(cstore, "/t", "facts")
    assert report.details["facts_reinforced"] == 1
    assert report.details["facts_created"] == 1
    assert report.details["superseded"] == 1
    after = _facts(cstore)
    bob = next(f for f in after if f["id"] == before["Bob"]["id"])
    assert bob["reinforcements"] == 1 and float(bob["confidence"]) > float(before["Bob"]["confidence"])
    assert ("episode", again[0]) in _fact_parents(cstore, bob["id"])
    berlin = next(f for f in after if f["value"] == "Berlin")
    paris = next(f for f in after if f["value"] == "Paris")
    assert paris["retired"] and paris["superseded_by"] == berlin["id"]
    assert _fact_parents(cstore, berlin["id"]) == [("episode", moved[0])]
    contra = rows(cstore, "SELECT * FROM contradictions")
    assert len(contra) == 1
    c = contra[0]
    assert (c["old_fact_id"], c["new_fact_id"], c["classification"], c["method"], c["resolved"], c["resolution"]) == (
        paris["id"], berlin["id"], "replacement", "auto", True, "superseded"
    )
    assert c["explanation"]
    edges = rows(cstore, "SELECT parent_id FROM lineage WHERE child_kind = 'contradiction' ORDER BY parent_id")
    assert [e["parent_id"] for e in edges] == sorted([paris["id"], berlin["id"]])
    assert model.calls["contradictions"] == 1


def test_low_confidence_contradiction_stays_unresolved(cstore, server, model):
    model.contradiction_class = "contradiction"
    model.contradiction_confidence = 0.7
    seed(cstore, "/t", ALICE)
    runner.run_stage(cstore, "/t", "facts")
    seed(cstore, "/t", ["Alice lives in Berlin since the spring"])
    runner.run_stage(cstore, "/t", "facts")
    contra = rows(cstore, "SELECT classification, method, resolved FROM contradictions")
    assert contra == [{"classification": "contradiction", "method": "structured", "resolved": False}]
    assert not any(f["retired"] for f in _facts(cstore))


def test_grounding_rejects_invented_entities_and_numbers():
    sources = ["Alice uses Python for data work"]
    bad = FactDraft(cluster=1, entity="Bob", property="owns", value="42 elephants", summary="Bob owns 42 elephants")
    problems = facts_stage.validate(bad, sources)
    assert any("'Bob'" in p for p in problems)
    assert any("'42'" in p for p in problems)
    good = FactDraft(cluster=1, entity="Alice", property="uses", value="Python",
                     summary="Alice relies on Python when doing data work")
    assert facts_stage.validate(good, sources) == []
    copy = FactDraft(cluster=1, entity="Alice", summary="Alice uses Python for data work")
    assert "summary copies a source verbatim" in facts_stage.validate(copy, sources)


def test_invented_fact_is_dead_lettered_and_cursor_moves(cstore, server, model):
    ids = seed(cstore, "/t", ["Alice uses Python for data work"])
    model.inject("facts", "invent", times=10)
    report = runner.run_stage(cstore, "/t", "facts")
    assert (report.items_failed, report.rows_written, report.cursor_to) == (1, 0, ids[0])
    letters = rows(cstore, "SELECT item_kind, item_id, attempts, status, last_error FROM dead_letters")
    assert [(d["item_kind"], d["item_id"], d["attempts"], d["status"]) for d in letters] == [
        ("episode", ids[0], 1, "pending")
    ]
    assert "'Bob'" in letters[0]["last_error"]
    assert _facts(cstore) == []


@pytest.mark.parametrize("fault", ["think", "fence"])
def test_tolerant_parsing_think_and_fences(cstore, server, model, fault):
    seed(cstore, "/t", BOB)
    model.inject("facts", fault)
    report = runner.run_stage(cstore, "/t", "facts")
    assert (report.rows_written, report.items_failed, report.model_calls) == (1, 0, 1)


def test_clustering_does_not_depend_on_input_order():
    import random

    from stash_pipeline.embedding.hashing import HashEmbedder

    texts = [
        "Alice lives in Paris near the river Seine", "Alice lives in Paris near the river",
        "Alice lives in Paris near the river today", "Bob deploys Kubernetes clusters every Friday",
        "Bob deploys Kubernetes clusters every Friday night", "Carol writes Rust code for the Nimbus project",
    ]
    embedder = HashEmbedder(384)
    items = [{"id": i + 1, "content": t, "embedding": v} for i, (t, v) in enumerate(zip(texts, embedder.embed(texts), strict=True))]

    def groups(order):
        return sorted(sorted(r["id"] for r in c) for c in facts_stage.cluster(order, 0.85))

    expected = groups(items)
    assert expected == [[1, 2, 3], [4, 5], [6]]
    rng = random.Random(3)
    for _ in range(10):
        shuffled = items[:]
        rng.shuffle(shuffled)
        assert groups(shuffled) == expected


def test_a_cluster_asked_alone_with_nothing_to_derive_is_done_not_dead(cstore, server, model):
    """Chatter: the model leaves the only cluster out; the episode is processed, no fact, no dead letter."""
    chatter = seed(cstore, "/t", ["brb, coffee"])
    model.inject("facts", "nothing")
    report = runner.run_stage(cstore, "/t", "facts")
    assert (report.status, report.rows_written, report.items_failed) == ("ok", 0, 0)
    assert report.cursor_to == chatter[0]
    assert rows(cstore, "SELECT * FROM dead_letters") == []
    assert _facts(cstore) == []


def test_a_cluster_left_out_among_several_goes_back_for_a_call_of_its_own(cstore, server, model):
    """Among several clusters an omission may be a slip: retried alone, where an empty answer settles it."""
    seed(cstore, "/t", ALICE + BOB)
    model.inject("facts", "nothing")
    first = runner.run_stage(cstore, "/t", "facts")
    assert first.items_failed == 3 and _facts(cstore) == []  # counted per episode
    pending = rows(cstore, "SELECT status FROM dead_letters ORDER BY item_id")
    assert [r["status"] for r in pending] == ["pending"] * 3
    model.inject("facts", "nothing", times=2)
    second = runner.run_stage(cstore, "/t", "facts")
    assert second.items_failed == 0 and second.model_calls == 2  # one call per cluster
    assert {r["status"] for r in rows(cstore, "SELECT status FROM dead_letters")} == {"retried"}
