"""Failure tools: list_failures, create_failure, show_failure, delete_failure.

The library side is ``stash_pipeline.memory.failures``.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from stash_pipeline.memory import failures
from stash_serve.mcp.calls import Scope, ToolCalls
from stash_serve.mcp.params import (
    DESTRUCTIVE_IDEMPOTENT,
    READ,
    WRITE,
    Limit,
    Namespaces,
    Offset,
    Page,
    RecordId,
    RootNamespace,
    page,
)


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the failure tools to ``server``."""
    store = calls.store
    tool = server.tool

    @tool(annotations=READ)
    async def list_failures(
        namespaces: Namespaces = None,
        goal_id: Annotated[int | None, Field(description="Only failures of this goal.", ge=1)] = None,
        limit: Limit = 100,
        offset: Offset = 0,
        ctx: Context | None = None,
    ) -> Page:
        """Recorded failures, newest first."""

        def work(s: Scope) -> Any:
            rows = failures.list_(store, s.read(namespaces), goal_id=goal_id, limit=limit, offset=offset)
            return page(rows, limit, offset)

        return await calls.run(ctx, work)

    @tool(annotations=WRITE)
    async def create_failure(
        content: Annotated[str, Field(description="What was tried and failed.")],
        reason: Annotated[str, Field(description="Why it failed.")],
        lesson: Annotated[str, Field(description="What to do differently next time.")],
        goal_id: Annotated[int | None, Field(description="Goal it belongs to.", ge=1)] = None,
        namespace: RootNamespace = "/",
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Record a failed approach with its reason and lesson."""

        def work(s: Scope) -> Any:
            return failures.create(store, s.write(namespace), content, reason, lesson, goal_id=goal_id)

        return await calls.run(ctx, work)

    @tool(annotations=READ)
    async def show_failure(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """One failure by id."""

        def work(s: Scope) -> Any:
            return failures.show(store, id, namespaces=s.by_id("read"))

        return await calls.run(ctx, work)

    @tool(annotations=DESTRUCTIVE_IDEMPOTENT)
    async def delete_failure(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """Delete a failure (its lesson is lost; prefer keeping failures)."""

        def work(s: Scope) -> Any:
            return failures.delete(store, id, namespaces=s.by_id("write"))

        return await calls.run(ctx, work)
