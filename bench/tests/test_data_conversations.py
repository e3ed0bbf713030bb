"""The committed conversational set (bench/data/conversations.py) has the promised shape.

No database: reads the JSONL files, checks sizes, the chat-history shape of every turn,
the question kinds per split and that evidence points at real turns (multi-hop evidence
in two or more sessions), the list questions, the derived facts (real evidence, session
dates, third person, not copies of turns, shaped like a model's), and re-runs the seeded generator to compare byte for byte.
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


def test_list_questions_gather_several_sessions_in_both_splits(data: dict[str, list[dict]]) -> None:
    lists = [q for q in data["questions"] if q["shape"] == "list"]
    assert {q["shape"] for q in data["questions"]} == {"single", "list"}
    for split in ("dev", "test"):
        assert sum(q["split"] == split and q["kind"] == "multi_hop" for q in lists) >= 30, split
        assert sum(q["split"] == split and q["kind"] == "inferential" for q in lists) >= 5, split
    for q in lists:
        assert len({d.split(":")[0] for d in q["evidence"]}) >= 2, q["id"]
        assert q["subject"] in q["query"]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def test_derived_facts_cite_real_turns_of_their_session_and_restate_them(data: dict[str, list[dict]]) -> None:
    turns = {(t["namespace"], t["dia_id"]): t for t in data["turns"]}
    split_of = {q["namespace"]: q["split"] for q in data["questions"]}
    facts = data["facts"]
    assert len(facts) >= 500 and len({f["key"] for f in facts}) == len(facts)
    sessions_with_facts = collections.defaultdict(set)
    for fact in facts:
        cited = [turns[(fact["namespace"], d)] for d in fact["evidence"]]
        latest = max(cited, key=lambda t: int(t["dia_id"][1:].split(":")[0]))
        assert fact["valid_from"] == latest["occurred_at"], fact["key"]
        assert fact["session"] == int(latest["dia_id"][1:].split(":")[0])
        assert fact["split"] == split_of[fact["namespace"]]
        assert fact["entity"] and fact["property"] and fact["value"]
        assert not fact["content"].lower().startswith(("i ", "my ", "we ")), fact["key"]
        # written from the planted truth, not a copy of a turn: no cited turn contains it
        assert all(fact["content"].lower() not in t["content"].lower() for t in cited), fact["key"]
        sessions_with_facts[fact["namespace"]].add(fact["session"])
    # shaped like a model's per-session facts: about 0.4 per turn, one turn each, most about
    # things no question asks, and a fifth of the question evidence cited by no fact
    assert 0.38 <= len(facts) / len(turns) <= 0.48
    assert sum(len(f["evidence"]) for f in facts) / len(facts) <= 1.05
    evidence = [(q["namespace"], d) for q in data["questions"] for d in q["evidence"]]
    cited = {(f["namespace"], d) for f in facts for d in f["evidence"]}
    assert 0.75 <= sum(e in cited for e in evidence) / len(evidence) <= 0.85
    assert sum((f["namespace"], f["evidence"][0]) not in set(evidence) for f in facts) / len(facts) >= 0.6
    # first person planted text ("sprained my ankle") is restated in the third person
    assert not [f["key"] for f in facts if _words(f["content"]) & {"i", "my", "me"}]
    sessions = collections.defaultdict(set)
    for t in data["turns"]:
        sessions[t["namespace"]].add(int(t["dia_id"][1:].split(":")[0]))
    for namespace, numbers in sessions.items():
        assert len(sessions_with_facts[namespace]) >= 0.8 * len(numbers), namespace


def test_generator_reproduces_the_committed_files(tmp_path: Path) -> None:
    conversations.write(conversations.build(), tmp_path)
    for name in (conversations.TURNS_FILE, conversations.QUESTIONS_FILE, conversations.FACTS_FILE):
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), name
