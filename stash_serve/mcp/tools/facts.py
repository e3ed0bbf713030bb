"""Fact tools: query_facts, get_fact, assert_fact, withdraw_fact, purge_fact.

The library side is ``stash_pipeline.memory.facts``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from stash_pipeline.memory import facts, validate
from stash_serve.mcp.calls import Scope, ToolCalls
from stash_serve.mcp.params import (
    DESTRUCTIVE_IDEMPOTENT,
    READ,
    WRITE,
    AsOf,
    Confidence,
    IdList,
    KnownAt,
    Limit,
    Namespace,
    Namespaces,
    Offset,
    Page,
    RecordId,
    Timestamp,
    page,
)


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the fact tools to ``server``."""
    store = calls.store
    tool = server.tool

    @tool(annotations=READ)
    async def query_facts(
        namespaces: Namespaces = None,
        entity: Annotated[
            str | None, Field(description="Only facts about this entity (case-insensitive).")
        ] = None,
        property: Annotated[str | None, Field(description="Only facts on this property.")] = None,
        origin: Annotated[
            Literal["synthesis", "hypothesis", "failure_pattern", "asserted"] | None,
            Field(description="Only facts of this origin."),
        ] = None,
        since: Timestamp = None,
        until: Timestamp = None,
        include_history: Annotated[bool, Field(description="Include retired facts.")] = False,
        as_of: AsOf = None,
        known_at: KnownAt = None,
        limit: Limit = 100,
        offset: Offset = 0,
        ctx: Context | None = None,
    ) -> Page:
        """Consolidated facts, newest first; current ones only unless include_history, as_of or known_at."""

        def work(s: Scope) -> Any:
            rows = facts.query(
                store,
                s.read(namespaces),
                entity=entity,
                property=property,
                origin=origin,
                since=since,
                until=until,
                include_history=include_history,
                as_of=as_of,
                known_at=known_at,
                limit=limit,
                offset=offset,
            )
            return page(rows, limit, offset)

        return await calls.run(ctx, work)

    @tool(annotations=READ)
    async def get_fact(
        id: RecordId,
        include_lineage: Annotated[
            bool, Field(description="Also return its sources and what was derived from it.")
        ] = False,
        as_of: AsOf = None,
        known_at: KnownAt = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """One fact by id, in any state (see current, valid_until, withdrawn_at)."""

        def work(s: Scope) -> Any:
            scope = s.by_id("read")
            if include_lineage:
                return facts.get_with_lineage(store, id, scope, as_of=as_of, known_at=known_at)
            return facts.get(store, id, scope, as_of=as_of, known_at=known_at)

        return await calls.run(ctx, work)

    @tool(annotations=WRITE)
    async def assert_fact(
        content: Annotated[str, Field(description="The fact, as one self-contained statement.")],
        namespace: Namespace,
        entity: Annotated[
            str | None, Field(description="Entity it is about, e.g. 'deploy pipeline'.")
        ] = None,
        property: Annotated[str | None, Field(description="Property of the entity, e.g. 'schedule'.")] = None,
        value: Annotated[str | None, Field(description="Value of the property, e.g. 'Fridays'.")] = None,
        confidence: Confidence = 1.0,
        source_episode_ids: IdList = None,
        supersede: Annotated[
            bool,
            Field(description="True: retire current facts with the same entity+property and another value."),
        ] = False,
        valid_from: Annotated[str | None, Field(description="ISO 8601, default now.")] = None,
        valid_until: Annotated[str | None, Field(description="ISO 8601, default none.")] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Record a fact you know directly (origin 'asserted'); checked against current facts on its entity/property."""

        def work(s: Scope) -> Any:
            return facts.assert_fact(
                store,
                s.write(namespace),
                content,
                entity=entity,
                property=property,
                value=value,
                confidence=confidence,
                # the field name in errors stays "id", as clients have always seen it
                source_episode_ids=validate.record_ids(source_episode_ids, "id"),
                supersede=supersede,
                valid_from=valid_from,
                valid_until=valid_until,
            )

        return await calls.run(ctx, work)

    @tool(annotations=DESTRUCTIVE_IDEMPOTENT)
    async def withdraw_fact(
        id: RecordId,
        reason: Annotated[str, Field(description="Why it is wrong or no longer true.")],
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Withdraw a fact (kept as history, never served as current) and what was derived only from it."""

        def work(s: Scope) -> Any:
            return facts.withdraw(store, id, reason, s.by_id("write"))

        return await calls.run(ctx, work)

    @tool(annotations=DESTRUCTIVE_IDEMPOTENT)
    async def purge_fact(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """Erase a fact for good (row, lineage, cached embedding); its dependents are withdrawn."""

        def work(s: Scope) -> Any:
            return facts.purge(store, id, s.by_id("write"))

        return await calls.run(ctx, work)
