"""Context tools: set_context, get_context, clear_context (a namespace's current focus).

The library side is ``stash_pipeline.memory.context``.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from stash_pipeline.memory import context, validate
from stash_serve.mcp.calls import Scope, ToolCalls
from stash_serve.mcp.params import DESTRUCTIVE_IDEMPOTENT, READ, WRITE_IDEMPOTENT, Namespace


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the context tools to ``server``."""
    store = calls.store
    tool = server.tool

    @tool(annotations=WRITE_IDEMPOTENT)
    async def set_context(
        focus: Annotated[str, Field(description="What you are working on and what to pick up next.")],
        namespace: Namespace,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Set a namespace's current focus (replaces the last; expires after STASH_CONTEXT_TTL)."""

        def work(s: Scope) -> Any:
            return context.set_(store, s.write(namespace), focus)

        return await calls.run(ctx, work)

    @tool(annotations=READ)
    async def get_context(namespace: Namespace, ctx: Context | None = None) -> dict[str, Any]:
        """A namespace's current, unexpired focus ({"context": null} if none)."""

        def work(s: Scope) -> Any:
            path = validate.slug(namespace)
            if s.token is not None:
                s.token.require("read", [path])
            return {"context": context.get(store, path)}

        return await calls.run(ctx, work)

    @tool(annotations=DESTRUCTIVE_IDEMPOTENT)
    async def clear_context(namespace: Namespace, ctx: Context | None = None) -> dict[str, Any]:
        """Clear a namespace's focus (when the work is done or the topic changes)."""

        def work(s: Scope) -> Any:
            return {"ok": True, "cleared": context.clear(store, s.write(namespace))}

        return await calls.run(ctx, work)
