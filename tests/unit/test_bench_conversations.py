"""The committed conversational set (bench/data/conversations.py) has the promised shape.

No database: reads the JSONL files, checks sizes, the chat-history shape of every turn,
the question kinds per split and that evidence points at real turns (multi-hop evidence
in two or more sessions), and re-runs the seeded generator to compare byte for byte.
"""

from __future__ import annotations

import collections
import re
from pathlib import Path

import pytest

from bench.data import conversations

DATA = Path(conversations.__file__).parent
KINDS = {"single_hop", "multi_hop", "temporal", "inferential"}


@pytest.fixture(scope="module")
def data() -> dict[str, list[dict]]:
    return conversations.load(DATA)


def test_ten_or_more_long_conversations(data: dict[str, list[dict]]) -> None:
    by_namespace: dict[str, list[dict]] = collections.defaultdict(list)
    for turn in data["turns"]:
        by_namespace[turn["namespace"]].append(turn)
    assert len(by_namespace) >= 10
    for turns in by_namespace.values():
        assert len({t["speaker"] for t in turns}) == 2
        sessions = collections.Counter(t["dia_id"].split(":")[0] for t in turns)
        assert len(sessions) >= 15
        assert min(sessions.values()) >= 15


def test_turns_look_like_an_imported_chat(data: dict[str, list[dict]]) -> None:
    dates: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
    for turn in data["turns"]:
        assert turn["content"].startswith(turn["speaker"] + ": ")
        assert re.fullmatch(r"D\d+:\d+", turn["dia_id"])
        dates[(turn["namespace"], turn["dia_id"].split(":")[0])].add(turn["occurred_at"])
    assert all(len(d) == 1 for d in dates.values())  # one date per session


def test_questions_have_every_kind_in_both_splits_and_real_evidence(data: dict[str, list[dict]]) -> None:
    turns = {(t["namespace"], t["dia_id"]) for t in data["turns"]}
    counts = collections.Counter((q["kind"], q["split"]) for q in data["questions"])
    for kind in KINDS:
        assert counts[(kind, "dev")] >= 40 and counts[(kind, "test")] >= 40, kind
    split_of_namespace: dict[str, set[str]] = collections.defaultdict(set)
    for q in data["questions"]:
        split_of_namespace[q["namespace"]].add(q["split"])
        assert q["evidence"] and all((q["namespace"], d) in turns for d in q["evidence"]), q["id"]
        if q["kind"] == "multi_hop":
            assert len({d.split(":")[0] for d in q["evidence"]}) >= 2, q["id"]
    assert all(len(s) == 1 for s in split_of_namespace.values())  # a conversation never spans splits


def test_generator_reproduces_the_committed_files(tmp_path: Path) -> None:
    conversations.write(conversations.build(), tmp_path)
    for name in (conversations.TURNS_FILE, conversations.QUESTIONS_FILE):
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), name
