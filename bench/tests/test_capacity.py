"""bench/capacity.py and its profile: the parts that need no server.

The questions never repeat (every recall is a first sight), a step counts what answered
within its window, the targets are judged from the figures, and the profile's reading of
a stack (its state, layer and stage) is the one its tables say.
"""

from __future__ import annotations

import sys
import threading

from bench import capacity, capacity_profile, sampler


def _texts() -> capacity.Texts:
    return capacity.Texts([f"What did person {i} do?" for i in range(7)], [f"turn {i}" for i in range(5)])


def test_questions_and_notes_never_repeat() -> None:
    texts = _texts()
    combos = 7 * len(capacity.QUESTION_FRAMES) * len(capacity.QUESTION_ENDS)
    questions = [texts.question() for _ in range(combos + 50)]
    assert len(set(questions)) == len(questions)
    notes = [texts.note() for _ in range(500)]
    assert len(set(notes)) == len(notes)


def test_questions_are_unique_across_threads() -> None:
    texts = _texts()
    seen: list[str] = []

    def ask() -> None:
        seen.extend(texts.question() for _ in range(300))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(seen)) == 1200


def _step(path: str, agents: int, rows: list[tuple[str, str, float, float]]) -> capacity.Step:
    calls = capacity.Calls()
    for row in rows:
        calls.add(*row)
    return capacity.Step(path, agents, (10.0, 20.0), calls, {"client": 1.0, "server": 2.0})


def test_a_step_counts_answers_within_its_window() -> None:
    step = _step("Stash, 1 worker", 16, [
        ("recall", "ok", 9.0, 10.5),     # begun before the window: answered in it, not timed
        ("recall", "ok", 11.0, 11.2),
        ("remember", "ok", 12.0, 12.1),
        ("recall", "busy", 13.0, 13.01),
        ("recall", "timeout", 14.0, 24.0),
        ("recall", "ok", 19.9, 20.5),    # begun in it, answered after: timed, not counted
    ])
    assert step.answered() == 3
    assert step.rate() == 0.3
    assert [round(v) for v in step.latencies("recall")] == [200, 600]
    assert step.count("busy") == 1 and step.count("timeout") == 1
    assert step.over(2.0) == 1
    assert round(step.cpu_ms_per_call("server")) == 667
    assert step.cpu_ms_per_call("postgres") is None


def test_the_targets_are_judged_from_the_figures() -> None:
    fast = [("recall", "ok", 10.0 + i / 10, 10.0 + i / 10 + 0.2) for i in range(90)]
    steps = [
        _step("Stash, 1 worker", 16, fast),
        _step(capacity.EMBEDDED_FLOOR, 16, fast),
        _step("Stash, 1 worker", 256, [("recall", "busy", 11.0, 13.5)]),
    ]
    verdicts = {row[0]: row[-1] for row in capacity.judge(steps, {})}
    assert verdicts["16 agents, Stash, 1 worker"] == "met"
    assert verdicts["256 agents, Stash, 1 worker"] == "**missed**"  # refused, but after 2.5 s


def test_counts_parse() -> None:
    assert capacity.parse_counts("1,16, 256") == (1, 16, 256)


def test_the_profile_reads_a_stack() -> None:
    onnx = ["stdlib/threading.py:_bootstrap", "stash_pipeline/recall/vectors.py:query_vector",
            "stash_pipeline/embedding/minilm.py:embed", capacity_profile.NATIVE_ONNX]
    assert capacity_profile.state(onnx) == "running the ONNX graph (GIL released)"
    assert capacity_profile.layer(onnx) == "embedding: ONNX forward pass"
    assert capacity_profile.stage(onnx) == "recall: embed the question"
    waiting = ["stdlib/threading.py:_bootstrap", "psycopg_pool/pool.py:getconn", "stdlib/threading.py:wait"]
    assert capacity_profile.state(waiting) == "waiting for a pooled connection"
    idle = ["stdlib/threading.py:_bootstrap", "anyio/_backends/_asyncio.py:run", "stdlib/queue.py:get",
            "stdlib/threading.py:wait"]
    assert capacity_profile.state(idle) == "idle (waiting for work)"
    generic = ["stash_serve/mcp/calls.py:result", "stdlib/json/encoder.py:encode", "stdlib/functools.py:wrapper"]
    assert capacity_profile.layer(generic) == "JSON (encode, decode)"
    assert capacity_profile.stage(generic) == "tool result serialisation (ToolCalls.result)"


def test_the_sampler_names_frames_without_machine_paths() -> None:
    stack = sampler.collapsed(sys._getframe())
    assert stack.endswith("bench/tests/test_capacity.py:test_the_sampler_names_frames_without_machine_paths")
    assert str(sampler.ROOT) not in stack
    assert sampler.short(sampler.STDLIB + "json/encoder.py") == "stdlib/json/encoder.py"
