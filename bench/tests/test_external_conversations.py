"""bench/external_conversations.py: a LoCoMo-format file becomes the conversational set's
turns, questions and facts."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from bench import external_conversations as external


def _sample(sample_id: str) -> dict:
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": "Caroline", "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1", "text": "I went to a support group yesterday."},
                {"speaker": "Melanie", "dia_id": "D1:2", "text": "Look at this!", "blip_caption": "a photo of a lake"},
            ],
            "session_2_date_time": "10:37 am on 27  June, 2023",
            "session_2": [{"speaker": "Caroline", "dia_id": "D2:1", "text": "I signed up for pottery."}],
        },
        "qa": [
            {"question": "When did Caroline go to the support group?", "answer": "7 May 2023", "evidence": ["D1:1"],
             "category": 2},
            {"question": "What does Caroline do?", "answer": "support group, pottery", "evidence": ["D1:1; D2:01"],
             "category": 1},
            {"question": "What did Caroline say about cats?", "adversarial_answer": "x", "evidence": ["D1:2"],
             "category": 5},
            {"question": "Who is Bob?", "answer": "?", "evidence": ["D9:9"], "category": 4},
        ],
        "observation": {
            "session_1_observation": {"Caroline": [["Caroline attended a support group.", "D1:1"]],
                                      "Melanie": [["Melanie saw a lake.", ["D1:2", "D7:7"]], ["No turn.", "D7:7"]]},
            "session_2_observation": {"Caroline": [["Caroline signed up for pottery.", "D2:1"]]},
        },
    }


def test_a_conversation_becomes_turns_questions_and_facts():
    data = external.convert([_sample("conv-1"), _sample("conv-2")])
    first = [t for t in data["turns"] if t["namespace"] == "/external/conv-1"]
    assert [t["dia_id"] for t in first] == ["D1:1", "D1:2", "D2:1"]
    assert first[1]["content"] == "Melanie: Look at this! [shares a photo: a photo of a lake]"
    assert first[0]["occurred_at"] == "2023-05-08T13:56:00+00:00"
    assert first[2]["occurred_at"] == "2023-06-27T10:37:00+00:00"  # a doubled space read too

    questions = [q for q in data["questions"] if q["namespace"] == "/external/conv-1"]
    # the adversarial question and the one citing no turn of the conversation are left out
    assert [(q["kind"], q["evidence"], q["shape"]) for q in questions] == [
        ("temporal", ["D1:1"], "single"), ("multi_hop", ["D1:1", "D2:1"], "list")]
    assert {q["split"] for q in data["questions"] if q["namespace"] == "/external/conv-2"} == {"test"}
    assert {q["split"] for q in questions} == {"dev"}

    facts = [f for f in data["facts"] if f["namespace"] == "/external/conv-1"]
    assert [(f["content"], f["entity"], f["evidence"]) for f in facts] == [
        ("Caroline attended a support group.", "Caroline", ["D1:1"]),
        ("Melanie saw a lake.", "Melanie", ["D1:2"]),  # the id of no turn dropped, the fact citing none too
        ("Caroline signed up for pottery.", "Caroline", ["D2:1"])]
    assert facts[2]["valid_from"] == "2023-06-27T10:37:00+00:00"


def test_evidence_ids_are_read_however_they_are_written():
    assert external.turn_ids("D8:6; D9:17") == ["D8:6", "D9:17"]
    assert external.turn_ids(["D1:03", "D2:1,D2:2"]) == ["D1:3", "D2:1", "D2:2"]
    assert external.turn_ids("") == []


def test_a_file_it_cannot_read_says_why(tmp_path: Path):
    bad = _sample("conv-1")
    bad["conversation"]["session_1_date_time"] = "yesterday"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([bad]))
    with pytest.raises(SystemExit, match="session time"):
        external.main([str(path)])
    with pytest.raises(SystemExit, match=r"missing\.json"):
        external.main([str(tmp_path / "missing.json")])
    with pytest.raises(SystemExit, match="conversation 1 is not in the LoCoMo format"):
        external.convert([_sample("conv-1"), {"sample_id": "conv-2", "qa": []}])


def _flat(sample: dict) -> dict:
    """A conversation as the release's per-conversation files hold it: every key at the top."""
    return sample["conversation"] | {"qa": sample["qa"]} | sample["observation"]


def test_the_release_zip_and_a_directory_read_as_the_list_file(tmp_path):
    listed = [_sample("conv-2"), _sample("conv-10")]
    (tmp_path / "locomo10.json").write_text(json.dumps(listed))
    folder = tmp_path / "locomo10_v2"
    folder.mkdir()
    with zipfile.ZipFile(tmp_path / "locomo10.zip", "w") as archive:
        for number, sample in ((10, listed[1]), (2, listed[0])):  # stored out of order
            archive.writestr(f"data/locomo10_v2/{number}.json", json.dumps(_flat(sample)))
            (folder / f"{number}.json").write_text(json.dumps(_flat(sample)))
    expected = external.convert(external.read_conversations(tmp_path / "locomo10.json"))
    for path in (tmp_path / "locomo10.zip", folder):
        assert external.convert(external.read_conversations(path)) == expected


def test_an_unreadable_release_says_which_file(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("[{")
    with pytest.raises(SystemExit, match=r"broken\.json"):
        external.read_conversations(broken)
