"""How the MCP server names an error's remedy: the tool to call and its arguments.

The library attaches a surface-neutral ``NextStep`` to errors that have an obvious remedy
(``stash_pipeline.errors``); an agent gets it both in the message and as structured
``next_step: {"tool", "arguments"}`` it can act on directly.
"""

from __future__ import annotations

import json
from typing import Any

from stash_pipeline import errors

#: NextStep action → the tool that performs it (its arguments have the same names)
TOOLS: dict[str, str] = {
    "create_namespace": "create_namespace",
    "test_hypothesis": "test_hypothesis",
}


def error_body(exc: errors.StashError) -> dict[str, Any]:
    """``{"error", "message", …}`` for a tool error result, the remedy named as a tool call."""
    body = exc.to_dict()
    step = exc.next_step
    if step is not None:
        tool = TOOLS[step.action]
        body["message"] = f"{exc.message} ({tool} {json.dumps(step.arguments, ensure_ascii=False)})"
        body["next_step"] = {"tool": tool, "arguments": step.arguments}
    return body


__all__ = ["TOOLS", "error_body"]
