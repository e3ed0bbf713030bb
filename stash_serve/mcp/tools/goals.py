"""Goal tools: multi-session outcomes with sub-goals and progress notes.

list_goals, create_goal, show_goal, update_goal, complete_goal, abandon_goal, delete_goal.
The library side is ``stash_pipeline.memory.goals``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from stash_pipeline.memory import goals
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
    """Add the goal tools to ``server``."""
    store = calls.store
    tool = server.tool

    @tool(annotations=READ)
    async def list_goals(
        namespaces: Namespaces = None,
        status: Annotated[
            Literal["active", "completed", "abandoned"] | None, Field(description="Only this status.")
        ] = None,
        parent_id: Annotated[
            int | None, Field(description="Only direct sub-goals of this goal.", ge=1)
        ] = None,
        top_level_only: Annotated[bool, Field(description="Only goals without a parent.")] = False,
        limit: Limit = 100,
        offset: Offset = 0,
        ctx: Context | None = None,
    ) -> Page:
        """Goals (sub-goals included unless top_level_only), highest priority first, then oldest."""

        def work(s: Scope) -> Any:
            rows = goals.list_(
                store,
                s.read(namespaces),
                status=status,
                parent_id=parent_id,
                top_level_only=top_level_only,
                limit=limit,
                offset=offset,
            )
            return page(rows, limit, offset)

        return await calls.run(ctx, work)

    @tool(annotations=WRITE)
    async def create_goal(
        content: Annotated[str, Field(description="The outcome to reach (spans several sessions).")],
        parent_id: Annotated[
            int | None, Field(description="Parent goal (same namespace tree).", ge=1)
        ] = None,
        priority: Annotated[int, Field(description="Higher comes first.", ge=-1000, le=1000)] = 0,
        namespace: RootNamespace = "/",
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Create a goal, optionally under a parent goal."""

        def work(s: Scope) -> Any:
            return goals.create(store, s.write(namespace), content, parent_id=parent_id, priority=priority)

        return await calls.run(ctx, work)

    @tool(annotations=READ)
    async def show_goal(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """One goal with its sub-goal counts and notes."""

        def work(s: Scope) -> Any:
            return goals.show(store, id, namespaces=s.by_id("read"))

        return await calls.run(ctx, work)

    @tool(annotations=WRITE)
    async def update_goal(
        id: RecordId,
        content: Annotated[str | None, Field(description="New wording.")] = None,
        priority: Annotated[
            int | None, Field(description="New priority (0 allowed).", ge=-1000, le=1000)
        ] = None,
        note: Annotated[str | None, Field(description="A progress note to append.")] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Change a goal's text or priority, or append a progress note."""

        def work(s: Scope) -> Any:
            return goals.update(
                store, id, content=content, priority=priority, note=note, namespaces=s.by_id("write")
            )

        return await calls.run(ctx, work)

    @tool(annotations=WRITE)
    async def complete_goal(
        id: RecordId,
        note: Annotated[
            str | None, Field(description="Optional closing note (appended, never overwrites).")
        ] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Complete an active goal; a parent whose sub-goals are all done completes too."""

        def work(s: Scope) -> Any:
            return goals.complete(store, id, note=note, namespaces=s.by_id("write"))

        return await calls.run(ctx, work)

    @tool(annotations=WRITE)
    async def abandon_goal(
        id: RecordId,
        note: Annotated[str | None, Field(description="Why it was abandoned (appended as a note).")] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Abandon an active goal (sub-goals are not touched)."""

        def work(s: Scope) -> Any:
            return goals.abandon(store, id, note=note, namespaces=s.by_id("write"))

        return await calls.run(ctx, work)

    @tool(annotations=DESTRUCTIVE_IDEMPOTENT)
    async def delete_goal(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """Delete a goal and its sub-goals."""

        def work(s: Scope) -> Any:
            return goals.delete(store, id, namespaces=s.by_id("write"))

        return await calls.run(ctx, work)
