"""Graph tools: relationships, patterns and causal links found by consolidation or asserted.

query_relationships, query_patterns, list_causal_links, create_causal_link,
trace_causal_chain, delete_causal_link. The library side is ``stash_pipeline.memory.graph``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from stash_pipeline.memory import graph
from stash_serve.mcp.calls import Scope, ToolCalls
from stash_serve.mcp.params import (
    DESTRUCTIVE_IDEMPOTENT,
    READ,
    WRITE,
    AsOf,
    Confidence,
    KnownAt,
    Limit,
    Namespaces,
    Offset,
    Page,
    RecordId,
    RootNamespace,
    page,
)


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the relationship, pattern and causal-link tools to ``server``."""
    store = calls.store
    tool = server.tool

    @tool(annotations=READ)
    async def query_relationships(
        namespaces: Namespaces = None,
        entity: Annotated[
            str | None, Field(description="Only those with this entity at either end.")
        ] = None,
        relation_type: Annotated[
            str | None, Field(description="Only this relation, e.g. depends_on.")
        ] = None,
        include_withdrawn: Annotated[bool, Field(description="Include withdrawn ones.")] = False,
        as_of: AsOf = None,
        known_at: KnownAt = None,
        limit: Limit = 100,
        offset: Offset = 0,
        ctx: Context | None = None,
    ) -> Page:
        """Entity relationships (from --type--> to)."""

        def work(s: Scope) -> Any:
            rows = graph.query_relationships(
                store,
                s.read(namespaces),
                entity=entity,
                relation_type=relation_type,
                include_withdrawn=include_withdrawn,
                as_of=as_of,
                known_at=known_at,
                limit=limit,
                offset=offset,
            )
            return page(rows, limit, offset)

        return await calls.run(ctx, work)

    @tool(annotations=READ)
    async def query_patterns(
        namespaces: Namespaces = None,
        include_withdrawn: Annotated[bool, Field(description="Include withdrawn patterns.")] = False,
        limit: Limit = 100,
        offset: Offset = 0,
        ctx: Context | None = None,
    ) -> Page:
        """Recurring patterns found by consolidation, with the fact and relationship ids each one cites."""

        def work(s: Scope) -> Any:
            rows = graph.query_patterns(
                store, s.read(namespaces), include_withdrawn=include_withdrawn, limit=limit, offset=offset
            )
            return page(rows, limit, offset)

        return await calls.run(ctx, work)

    @tool(annotations=READ)
    async def list_causal_links(
        namespaces: Namespaces = None,
        include_withdrawn: Annotated[bool, Field(description="Include withdrawn links.")] = False,
        as_of: AsOf = None,
        known_at: KnownAt = None,
        limit: Limit = 100,
        offset: Offset = 0,
        ctx: Context | None = None,
    ) -> Page:
        """Causal links (cause fact → effect fact or failure)."""

        def work(s: Scope) -> Any:
            rows = graph.list_causal_links(
                store, s.read(namespaces), include_withdrawn=include_withdrawn, as_of=as_of, known_at=known_at,
                limit=limit, offset=offset,
            )
            return page(rows, limit, offset)

        return await calls.run(ctx, work)

    @tool(annotations=WRITE)
    async def create_causal_link(
        cause_id: Annotated[int, Field(description="Id of the cause fact.", ge=1)],
        effect_id: Annotated[
            int | None, Field(description="Id of the effect fact (or give effect_failure_id).", ge=1)
        ] = None,
        effect_failure_id: Annotated[int | None, Field(description="Id of the effect failure.", ge=1)] = None,
        confidence: Confidence = 0.8,
        namespace: RootNamespace = "/",
        rationale: Annotated[str | None, Field(description="Why you believe it.")] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Assert that a fact causes another fact or a failure; both current, in the namespace's tree."""

        def work(s: Scope) -> Any:
            return graph.create_causal_link(
                store,
                s.write(namespace),
                cause_id,
                effect_id=effect_id,
                effect_failure_id=effect_failure_id,
                confidence=confidence,
                rationale=rationale,
            )

        return await calls.run(ctx, work)

    @tool(annotations=READ)
    async def trace_causal_chain(
        fact_id: Annotated[int, Field(description="Fact to start from.", ge=1)],
        direction: Annotated[
            Literal["forward", "backward"],
            Field(description="forward = effects; backward = causes."),
        ] = "forward",
        max_depth: Annotated[int, Field(description="Max chain length.", ge=1, le=25)] = 10,
        namespaces: Namespaces = None,
        as_of: AsOf = None,
        known_at: KnownAt = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Follow causal links from or into a fact (cycle-safe, within its tree)."""

        def work(s: Scope) -> Any:
            paths = None if (s.token is None and namespaces in (None, "", [])) else s.read(namespaces)
            steps = graph.trace_causal_chain(
                store, fact_id, direction=direction, max_depth=max_depth, namespaces=paths, as_of=as_of,
                known_at=known_at,
            )
            return {"fact_id": fact_id, "direction": direction, "steps": steps}

        return await calls.run(ctx, work)

    @tool(annotations=DESTRUCTIVE_IDEMPOTENT)
    async def delete_causal_link(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """Delete a causal link."""

        def work(s: Scope) -> Any:
            return graph.delete_causal_link(store, id, s.by_id("write"))

        return await calls.run(ctx, work)
