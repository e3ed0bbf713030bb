"""Goal tools: list_goals, create_goal, show_goal, update_goal, complete_goal, abandon_goal,
delete_goal.

Declared in ``stash_pipeline.operations.goals``; the library side is
``stash_pipeline.memory.goals``.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from stash_pipeline.operations import goals
from stash_serve.mcp.calls import ToolCalls
from stash_serve.mcp.derive import register_all


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the goal tools to ``server``."""
    register_all(server, calls, goals.OPERATIONS)
