"""The agent loop every framework runs against Stash, and what its answers must show.

A loop: create a namespace, remember an episode (with metadata: the open object), recall
it with a question worded unlike it, answer from the tool results. An error: recall from
a namespace that does not exist; Stash's error code and message must reach the model.
"""

from __future__ import annotations

from scripted_model import ANSWER, SEPARATOR, Call, error_code

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


def _last_result(answer: str, results: int) -> str:
    """The last tool result the model quoted, once it quoted every call's."""
    parts = answer.split(SEPARATOR)
    assert parts[0] == ANSWER and len(parts) == results + 1, answer
    return parts[-1]


def check_loop(answer: str) -> None:
    recalled = _last_result(answer, 3)
    assert FACT.rstrip(".") in recalled and error_code(recalled) is None, f"the recall did not return the fact: {recalled}"


def check_error(answer: str) -> None:
    failed = _last_result(answer, 1)
    assert error_code(failed) == "namespace_not_found", f"the model did not see Stash's error: {failed}"
    assert "missing" in failed, f"the error does not name the namespace: {failed}"
