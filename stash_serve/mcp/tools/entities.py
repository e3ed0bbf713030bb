"""Entity tools: get_entity, merge_entities, split_entity.

The library side is ``stash_pipeline.memory.entities``. Descriptions are terse on
purpose: every character is sent to every agent with the tool list, under the budget
``tests/mcp/test_tool_surface.py`` holds. merge_entities is undone by split_entity with
the merged aliases (the merged entity comes back), a split by merging the two again.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from stash_pipeline.memory import entities
from stash_serve.mcp.calls import Scope, ToolCalls
from stash_serve.mcp.params import READ, WRITE, AsOf, KnownAt, Namespaces

EntityId = Annotated[int, Field(description="Entity id.", ge=1)]
Why = Annotated[str | None, Field(description="Why.")]


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the entity tools to ``server``."""
    store = calls.store
    tool = server.tool

    @tool(annotations=READ)
    async def get_entity(
        id: Annotated[int | None, Field(description="Entity id.", ge=1)] = None,
        name: Annotated[str | None, Field(description="Or a name.")] = None,
        namespaces: Namespaces = None,
        as_of: AsOf = None,
        known_at: KnownAt = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Entity: aliases, facts, links, timeline."""

        def work(s: Scope) -> Any:
            scope = s.read(namespaces) if namespaces not in (None, "", []) else s.by_id("read")
            return entities.get_entity(store, id, name=name, namespaces=scope, as_of=as_of, known_at=known_at)

        return await calls.run(ctx, work)

    @tool(annotations=WRITE)
    async def merge_entities(
        id: Annotated[int, Field(description="Kept.", ge=1)],
        merge_id: Annotated[int, Field(description="Merged.", ge=1)],
        note: Why = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Merge merge_id into id."""

        def work(s: Scope) -> Any:
            return entities.merge_entities(store, id, merge_id, note=note, namespaces=s.by_id("write"))

        return await calls.run(ctx, work)

    @tool(annotations=WRITE)
    async def split_entity(
        id: EntityId,
        aliases: Annotated[list[str], Field(description="Its names to move.")],
        note: Why = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Move aliases to another entity."""

        def work(s: Scope) -> Any:
            return entities.split_entity(store, id, aliases, note=note, namespaces=s.by_id("write"))

        return await calls.run(ctx, work)
