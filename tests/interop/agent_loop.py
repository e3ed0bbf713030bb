"""The agent loop every framework runs against Stash, and what its answers must show.

A loop: create a namespace, remember an episode (with metadata: the open object), recall
it with a question worded unlike it, answer from the tool results. An error: recall from
a namespace that does not exist; Stash's error code and message must reach the model.
"""

from __future__ import annotations

from scripted_model import ANSWER, Call, error_code

FACT = "The staging database moved to the Frankfurt region on 3 March."
QUESTION = "where does staging's db live now?"

#: the tools OpenAI strict conversion must leave non-strict, and why: ``remember`` and
#: ``remember_batch`` take ``metadata``, an open object, which strict mode would close to
#: no keys at all; ``init`` takes no arguments, and a closed empty object can be written
#: only as ``"additionalProperties": false``, a boolean google-genai's converter fails on
#: (every other object is closed by the strict converter itself)
LOOSE_TOOLS = {"init", "remember", "remember_batch"}


def loop_script(namespace: str) -> list[Call]:
    return [
        Call("create_namespace", {"namespace": namespace, "description": "framework interop"}),
        Call("remember", {"content": FACT, "namespace": namespace, "metadata": {"source": "interop", "turn": 1}}),
        Call("recall", {"query": QUESTION, "namespaces": namespace, "limit": 3}),
    ]


def error_script(namespace: str) -> list[Call]:
    return [Call("recall", {"query": QUESTION, "namespaces": f"{namespace}/missing"})]


def check_loop(answer: str) -> None:
    assert answer.startswith(ANSWER), answer
    assert "Frankfurt" in answer.split("staging database moved", 1)[-1], f"the recall did not return the fact: {answer}"


def check_error(answer: str) -> None:
    assert answer.startswith(ANSWER), answer
    assert error_code(answer) == "namespace_not_found", f"the model did not see Stash's error: {answer}"
    assert "missing" in answer, f"the error does not name the namespace: {answer}"
