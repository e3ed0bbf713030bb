"""Recall tools: recall.

Declared in ``stash_pipeline.operations.recall``; the library side is
``stash_pipeline.memory.recall``.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from stash_pipeline.operations import recall
from stash_serve.mcp.calls import ToolCalls
from stash_serve.mcp.derive import register_all


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the recall tool to ``server``."""
    register_all(server, calls, recall.OPERATIONS)
