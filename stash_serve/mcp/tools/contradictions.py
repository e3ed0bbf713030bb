"""Contradiction tools: list_contradictions, resolve_contradiction.

The library side is ``stash_pipeline.memory.contradictions``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from stash_pipeline.memory import contradictions
from stash_serve.mcp.calls import Scope, ToolCalls
from stash_serve.mcp.params import (
    DESTRUCTIVE,
    READ,
    Limit,
    Namespaces,
    Offset,
    Page,
    RecordId,
    page,
)

#: the reference's resolution names, accepted as synonyms of the library's actions
RESOLUTION_SYNONYMS = {
    "new_value_correct": "keep_new",
    "old_value_correct": "keep_old",
    "both_correct": "keep_both",
    "neither_correct": "neither",
}


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the contradiction tools to ``server``."""
    store = calls.store
    tool = server.tool

    @tool(annotations=READ)
    async def list_contradictions(
        namespaces: Namespaces = None,
        include_resolved: Annotated[bool, Field(description="Also list resolved ones.")] = False,
        limit: Limit = 100,
        offset: Offset = 0,
        ctx: Context | None = None,
    ) -> Page:
        """Contradictions between facts, newest first (unresolved only by default)."""

        def work(s: Scope) -> Any:
            rows = contradictions.list_(
                store, s.read(namespaces), include_resolved=include_resolved, limit=limit, offset=offset
            )
            return page(rows, limit, offset)

        return await calls.run(ctx, work)

    @tool(annotations=DESTRUCTIVE)
    async def resolve_contradiction(
        id: RecordId,
        resolution: Annotated[
            Literal[
                "keep_new",
                "keep_old",
                "keep_both",
                "neither",
                "new_value_correct",
                "old_value_correct",
                "both_correct",
                "neither_correct",
            ],
            Field(
                description="keep_new retires the old fact, keep_old the new one; neither withdraws both "
                "(*_correct: older synonyms)."
            ),
        ],
        note: Annotated[str | None, Field(description="Why; kept with the resolution.")] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Resolve a contradiction by acting on its two facts."""
        action = RESOLUTION_SYNONYMS.get(resolution, resolution)

        def work(s: Scope) -> Any:
            return contradictions.resolve(store, id, action, note=note, namespaces=s.by_id("write"))

        return await calls.run(ctx, work)
