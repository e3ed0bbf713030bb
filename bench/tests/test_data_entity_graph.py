"""The committed entity set (bench/data/entity_graph.py) has the promised shape.

No database: every question's relevant and stale keys are facts of the set, a stale fact
is an earlier ``works_on`` of the same person, one-hop answers sit on the person's
current project, aliases never collide, splits are by person, and the seeded generator
reproduces the committed files byte for byte.
"""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from bench.data import entity_graph

DATA = Path(entity_graph.__file__).parent


@pytest.fixture(scope="module")
def data() -> dict[str, list[dict]]:
    return entity_graph.load(DATA)


def test_aliases_name_one_entity_each(data: dict[str, list[dict]]) -> None:
    names = [n.lower() for r in data["graph"] if r["record"] == "entity" for n in [r["name"], *r["aliases"]]]
    assert len(names) == len(set(names))


def test_questions_point_at_real_facts_and_both_splits_have_both_types(data: dict[str, list[dict]]) -> None:
    facts = {r["key"]: r for r in data["graph"] if r["record"] == "fact"}
    works_on = {r["fact"]: r for r in data["graph"] if r["record"] == "relationship" and r["relation"] == "works_on"}
    counts = collections.Counter((q["type"], q["split"]) for q in data["questions"])
    assert all(counts[(t, s)] >= 12 for t in ("alias", "one_hop") for s in ("dev", "test"))
    splits: dict[str, set[str]] = collections.defaultdict(set)
    for q in data["questions"]:
        splits[q["subject"]].add(q["split"])
        current = facts[q["relevant"][0]]
        assert current["entity"] == q["subject"] and current["property"] == "works_on"
        for key in q["stale"]:
            assert facts[key]["entity"] == q["subject"] and facts[key]["property"] == "works_on"
            assert facts[key]["value"] != current["value"]
        if q["type"] == "one_hop":
            answer = facts[q["relevant"][1]]
            assert answer["entity"] == works_on[q["relevant"][0]]["to"] == current["value"]
    assert all(len(s) == 1 for s in splits.values())


def test_generator_reproduces_the_committed_files(tmp_path: Path) -> None:
    entity_graph.write(entity_graph.build(), tmp_path)
    for name in (entity_graph.GRAPH_FILE, entity_graph.QUESTIONS_FILE):
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), name
