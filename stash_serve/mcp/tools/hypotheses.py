"""Hypothesis tools: list_hypotheses, create_hypothesis, show_hypothesis, test_hypothesis,
refine_hypothesis, confirm_hypothesis, reject_hypothesis, delete_hypothesis.

Declared in ``stash_pipeline.operations.hypotheses``; the library side is
``stash_pipeline.memory.hypotheses``.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from stash_pipeline.operations import hypotheses
from stash_serve.mcp.calls import ToolCalls
from stash_serve.mcp.derive import register_all


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the hypothesis tools to ``server``."""
    register_all(server, calls, hypotheses.OPERATIONS)
