"""Entity tools: get_entity, merge_entities, split_entity.

Declared in ``stash_pipeline.operations.entities``; the library side is
``stash_pipeline.memory.entities``.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from stash_pipeline.operations import entities
from stash_serve.mcp.calls import ToolCalls
from stash_serve.mcp.derive import register_all


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the entity tools to ``server``."""
    register_all(server, calls, entities.OPERATIONS)
