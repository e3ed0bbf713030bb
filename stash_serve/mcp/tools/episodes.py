"""Episode tools: remember, remember_batch, get_episode, forget, purge_episode.

Declared in ``stash_pipeline.operations.episodes``; the library side is
``stash_pipeline.memory.episodes``.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from stash_pipeline.operations import episodes
from stash_serve.mcp.calls import ToolCalls
from stash_serve.mcp.derive import register_all


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the episode tools to ``server``."""
    register_all(server, calls, episodes.OPERATIONS)
