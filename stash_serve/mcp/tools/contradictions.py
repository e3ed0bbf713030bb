"""Contradiction tools: list_contradictions, resolve_contradiction.

Declared in ``stash_pipeline.operations.contradictions``; the library side is
``stash_pipeline.memory.contradictions``.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from stash_pipeline.operations import contradictions
from stash_serve.mcp.calls import ToolCalls
from stash_serve.mcp.derive import register_all


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the contradiction tools to ``server``."""
    register_all(server, calls, contradictions.OPERATIONS)
