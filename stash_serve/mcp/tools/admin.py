"""The stats tool: counts of everything in the namespace trees.

The library side is ``stash_pipeline.memory.admin``.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer

from stash_pipeline.memory import admin
from stash_serve.mcp.calls import Scope, ToolCalls
from stash_serve.mcp.params import READ, Namespaces


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the stats tool to ``server``."""
    store = calls.store

    @server.tool(annotations=READ)
    async def stats(namespaces: Namespaces = None, ctx: Context | None = None) -> dict[str, Any]:
        """Counts of each kind of record (episodes, facts, goals…) in the namespace trees."""

        def work(s: Scope) -> Any:
            return admin.stats(store, s.read(namespaces))

        return await calls.run(ctx, work)
