"""Fact tools: query_facts, get_fact, assert_fact, withdraw_fact, purge_fact.

Declared in ``stash_pipeline.operations.facts``; the library side is
``stash_pipeline.memory.facts``.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from stash_pipeline.operations import facts
from stash_serve.mcp.calls import ToolCalls
from stash_serve.mcp.derive import register_all


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the fact tools to ``server``."""
    register_all(server, calls, facts.OPERATIONS)
