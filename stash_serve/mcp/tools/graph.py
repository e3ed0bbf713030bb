"""Graph tools: query_relationships, query_patterns, list_causal_links, create_causal_link,
trace_causal_chain, delete_causal_link.

Declared in ``stash_pipeline.operations.graph``; the library side is
``stash_pipeline.memory.graph``.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from stash_pipeline.operations import graph
from stash_serve.mcp.calls import ToolCalls
from stash_serve.mcp.derive import register_all


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the relationship, pattern and causal-link tools to ``server``."""
    register_all(server, calls, graph.OPERATIONS)
