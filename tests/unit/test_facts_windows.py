"""How the facts stage tells conversation threads from other episodes, and cuts windows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from stash_pipeline.stages import conversations

T0 = datetime(2023, 3, 1, 12, 0, tzinfo=UTC)


def _row(i, content, minutes=0, **metadata):
    return {"id": i, "content": content, "occurred_at": T0 + timedelta(minutes=minutes), "metadata": metadata}


def _ids(found):
    return [(thread, [r["id"] for r in run]) for thread, run in found]


def test_threads_by_metadata_dia_id_and_time_proximity():
    rows = [
        _row(1, "Deploy failed with Postgres timeout"),
        _row(2, "Ana: hi", session_id="s1"),
        _row(3, "Ben: hello", dia_id="D4:1"),
        _row(4, "Ana: how are you", session_id="s1"),
        _row(5, "Ben: good", dia_id="D4:2"),
        _row(6, "Cleo: morning", minutes=1),
        _row(7, "Dan: hey Cleo", minutes=2),
        _row(8, "Cleo: later!", minutes=200),  # past the gap: a new thread, one speaker only
        _row(9, "Error: disk full", minutes=400),  # a log line that looks like a speaker
        _row(10, "text", speaker="Eve", thread_id=7),
        _row(11, "Ben: next session", dia_id="D5:1"),
    ]
    found, rest = conversations.threads(rows)
    # time threads of one speaker (8, 9) are decided with the turns before them (windows)
    assert _ids(found) == [
        ("session_id=s1", [2, 4]), ("dia_id=D4", [3, 5]), ("time", [6, 7]), ("time", [8]), ("time", [9]),
        ("thread_id=7", [10]), ("dia_id=D5", [11]),
    ]
    assert [r["id"] for r in rest] == [1]
    assert conversations.text(rows[9]) == "Eve: text"
    assert conversations.participants(rows[5:7]) == ["Cleo", "Dan"]
    assert conversations.participants([_row(1, "Ana: hi", participants=["Ana", "Ben"])]) == ["Ana", "Ben"]


def test_windows_are_nearly_equal_parts_of_bounded_size():
    run = list(range(45))
    parts = conversations.split(run, 20)
    assert [len(p) for p in parts] == [15, 15, 15] and [x for p in parts for x in p] == run
    assert conversations.split(list(range(20)), 20) == [list(range(20))]
    # short windows share a call up to one full window's turns (and per_call windows)
    assert conversations.pack([0, 1, 2, 3, 4], [30, 4, 8, 20, 2], 8) == [[0], [1, 2], [3, 4]]
    assert conversations.pack([0, 1, 2], [1, 1, 1], 2) == [[0, 1], [2]]
    group = conversations.Group(new=[_row(i, f"Ana: {i}") for i in range(1, 5)], context=[_row(0, "Ben: 0")],
                                participants=["Ana", "Ben"], thread="time")
    first, second = conversations.halves(group)
    assert [r["id"] for r in first.new] == [1, 2] and [r["id"] for r in first.context] == [0]
    assert [r["id"] for r in second.new] == [3, 4] and [r["id"] for r in second.context] == [0, 1, 2]


def test_grounding_against_a_window_and_its_participants():
    from stash_pipeline.stages.grounding import validate
    from stash_pipeline.stages.prompts import FactDraft

    window = ["Caroline: I started a knitting class at the community center.",
              "Caroline: Oh yeah, a scarf with way too many holes. I love them anyway."]
    names = ["Jolene", "Caroline"]

    def problems(summary, value=None):
        return validate(FactDraft(cluster=1, entity="Caroline", summary=summary, value=value), window, names)

    # a participant's name is grounded (she is "you" in the turns); a paraphrase may abstract
    assert problems("Caroline told Jolene about her knitting class") == []
    assert problems("Caroline happily treasures her imperfect handmade scarf", value="yes") == []
    assert problems("Caroline organises a knitting class", value="organizing") == []  # -ise / -ize
    # a name or a number nobody in the window mentions, or a summary mostly of other words, is not
    assert any("'Priscilla'" in p for p in problems("Priscilla teaches Caroline to knit"))
    assert any("'12'" in p for p in problems("Caroline knitted 12 scarves at the class"))
    assert any("absent from the sources" in p for p in problems("Caroline breeds exotic elephants professionally"))
    assert any("'Paris'" in p for p in problems("Caroline knits", value="Paris"))
