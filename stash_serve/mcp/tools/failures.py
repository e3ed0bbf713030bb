"""Failure tools: list_failures, create_failure, show_failure, delete_failure.

Declared in ``stash_pipeline.operations.failures``; the library side is
``stash_pipeline.memory.failures``.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from stash_pipeline.operations import failures
from stash_serve.mcp.calls import ToolCalls
from stash_serve.mcp.derive import register_all


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the failure tools to ``server``."""
    register_all(server, calls, failures.OPERATIONS)
