"""Namespace tools: init, create_namespace, list_namespaces, delete_namespace.

Declared in ``stash_pipeline.operations.namespaces``; the library side is
``stash_pipeline.memory.namespaces``. ``init`` and ``create_namespace`` get the caller's
whole scope: its token and the per-token allowance of namespaces created an hour
(``stash_serve.mcp.calls.CallLimits``).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from stash_pipeline.operations import namespaces
from stash_serve.mcp.calls import ToolCalls
from stash_serve.mcp.derive import register_all


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the namespace tools to ``server``."""
    register_all(server, calls, namespaces.OPERATIONS)
