"""Context tools: set_context, get_context, clear_context.

Declared in ``stash_pipeline.operations.context``; the library side is
``stash_pipeline.memory.context``.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from stash_pipeline.operations import context
from stash_serve.mcp.calls import ToolCalls
from stash_serve.mcp.derive import register_all


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the context tools to ``server``."""
    register_all(server, calls, context.OPERATIONS)
