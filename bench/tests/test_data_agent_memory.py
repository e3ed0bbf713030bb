"""The committed retrieval-quality set (bench/data) is what bench/README.md describes.

No database: these read the JSONL files, check sizes, question types and splits, and that
every label points at an existing episode or fact. They also re-run the seeded generator
and compare, so a hand edit of the JSONL (or a generator change without regenerating) fails.
"""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from bench.data import generate

DATA = Path(generate.__file__).parent
TYPES = {"paraphrase", "identifier", "temporal", "updated", "distractor"}


@pytest.fixture(scope="module")
def data() -> dict[str, list[dict]]:
    return generate.load(DATA)


def test_sizes_meet_the_issue(data: dict[str, list[dict]]) -> None:
    assert len(data["episodes"]) >= 2000
    assert len(data["questions"]) >= 200
    assert len({e["namespace"] for e in data["episodes"]}) >= 4
    total = sum((DATA / f"{name}.jsonl").stat().st_size for name in ("episodes", "facts", "questions"))
    assert total < 3_000_000


def test_every_type_is_in_both_splits(data: dict[str, list[dict]]) -> None:
    counts = collections.Counter((q["type"], q["split"]) for q in data["questions"])
    assert {q["type"] for q in data["questions"]} == TYPES
    for qtype in TYPES:
        assert counts[(qtype, "dev")] >= 10, qtype
        assert counts[(qtype, "test")] >= 10, qtype
    assert {q["split"] for q in data["questions"]} == {"dev", "test"}


def test_labels_point_at_existing_records(data: dict[str, list[dict]]) -> None:
    keys = {e["key"] for e in data["episodes"]} | {f["key"] for f in data["facts"]}
    assert len(keys) == len(data["episodes"]) + len(data["facts"])  # keys are unique
    ids = [q["id"] for q in data["questions"]]
    assert len(ids) == len(set(ids))
    for q in data["questions"]:
        assert q["relevant"], q["id"]
        assert set(q["relevant"]) <= keys, q["id"]
        assert set(q["stale"]) <= keys, q["id"]
        assert not set(q["relevant"]) & set(q["stale"]), q["id"]
    for fact in data["facts"]:
        assert set(fact["sources"]) <= {e["key"] for e in data["episodes"]}


def test_updated_questions_have_a_stale_value_and_some_superseded_facts(data: dict[str, list[dict]]) -> None:
    updated = [q for q in data["questions"] if q["type"] == "updated"]
    assert all(q["stale"] for q in updated)
    facts = {f["key"]: f for f in data["facts"]}
    superseding = 0
    for q in updated:
        stale_facts = [facts[k] for k in q["stale"] if k in facts]
        new_facts = [facts[k] for k in q["relevant"] if k in facts]
        for old, new in zip(stale_facts, new_facts, strict=True):
            # same entity+property, another value, asserted later: assert_fact(supersede=True) retires the old
            assert (old["entity"], old["property"]) == (new["entity"], new["property"])
            assert old["value"] != new["value"]
            assert int(old["key"].split("-")[1]) < int(new["key"].split("-")[1])
            superseding += 1
    assert superseding >= 20


def test_episode_fields_are_loadable(data: dict[str, list[dict]]) -> None:
    for episode in data["episodes"]:
        assert episode["content"].strip()
        assert episode["namespace"].startswith("/")
        assert episode["occurred_at"].endswith("Z")
        assert len(episode["content"].encode()) <= 10_000


def test_generator_reproduces_the_committed_files(tmp_path: Path) -> None:
    generate.write(generate.build(), tmp_path)
    for name in ("episodes", "facts", "questions"):
        assert (tmp_path / f"{name}.jsonl").read_bytes() == (DATA / f"{name}.jsonl").read_bytes(), name


def test_distractors_answer_no_question(data: dict[str, list[dict]]) -> None:
    extra = generate.distractors(600)
    assert len(extra) == 600 and len({e["key"] for e in extra}) == 600
    assert extra == generate.distractors(600)  # deterministic
    texts = " ".join(e["content"] for e in extra)
    for q in data["questions"]:
        if q["type"] == "identifier" and q["query"].startswith("INC-"):
            assert q["query"] + ":" not in texts
    for service in generate.SERVICES:
        assert f"{service} returned" not in texts  # no incident on a service a question asks about
    assert {e["namespace"] for e in extra} <= {e["namespace"] for e in data["episodes"]}


def test_metrics_count_relevant_hits_and_stale_wins() -> None:
    from bench.retrieval_quality import score_question

    # each result is the set of what it shows: its hit (and, for a fact, the source turns it carries)
    ranked = [{("episode", 9)}, {("fact", 3)}, {("episode", 1)}, *[{("episode", 100 + i)} for i in range(10)]]
    scores = score_question(ranked, relevant={("episode", 1), ("fact", 7)}, stale={("fact", 3)})
    assert scores["r@5"] == 0.5 and scores["r@10"] == 0.5
    assert scores["mrr"] == 1 / 3
    assert scores["stale_wins"] == 1.0  # the stale fact (rank 2) outranks the answer (rank 3)
    missed = score_question([{("episode", 100 + i)} for i in range(12)], {("episode", 1)}, set())
    assert missed == {"r@5": 0.0, "r@10": 0.0, "mrr": 0.0}
    # a fact result that carries the relevant turn finds it, at the fact's rank
    carried = score_question([{("fact", 5), ("episode", 1)}, *[{("episode", 100 + i)} for i in range(11)]],
                             {("episode", 1)}, set())
    assert carried["r@5"] == 1.0 and carried["mrr"] == 1.0
