"""Consolidation tools: consolidate (start the stages now), consolidation_status.

Declared in ``stash_pipeline.operations.consolidation``; the library side is
``stash_pipeline.consolidation.runner``. ``consolidate`` never waits on a model: the
server's runs (``stash_serve.runs.BackgroundJobs``, the calls' ``Scope.runs``) submit one
Dagster run per namespace when Dagster runs, else start a background job, and answer at once.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from stash_pipeline.operations import consolidation
from stash_serve.mcp.calls import ToolCalls
from stash_serve.mcp.derive import register_all


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the consolidation tools to ``server``."""
    register_all(server, calls, consolidation.OPERATIONS)
