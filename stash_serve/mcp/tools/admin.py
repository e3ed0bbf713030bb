"""The stats tool: counts of everything in the namespace trees.

Declared in ``stash_pipeline.operations.admin``; the library side is
``stash_pipeline.memory.admin``.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from stash_pipeline.operations import admin
from stash_serve.mcp.calls import ToolCalls
from stash_serve.mcp.derive import register_all


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the stats tool to ``server``."""
    register_all(server, calls, admin.OPERATIONS)
