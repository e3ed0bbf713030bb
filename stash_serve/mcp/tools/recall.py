"""The recall tool: current facts and episodes ranked together.

The library side is ``stash_pipeline.memory.recall``; ``recall_result`` is the one place
its hits are shaped into the tool's answer.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

import stash_pipeline.memory.recall
from stash_pipeline.models import RecallHit
from stash_serve.mcp.calls import Scope, ToolCalls
from stash_serve.mcp.params import READ, Namespaces, Timestamp


class RecallItem(BaseModel):
    """One recall result; fields that do not apply to its kind are null."""

    kind: Literal["fact", "episode"]
    id: int
    namespace: str
    content: str
    score: float
    score_parts: dict[str, float | None] | None = None
    confidence: float | None = None
    occurred_at: str | None = None
    valid_from: str | None = None
    valid_until: str | None = None
    source_episode_ids: list[int] | None = None
    metadata: dict[str, Any] | None = None
    current: bool | None = None


class RecallResult(BaseModel):
    """Facts and episodes, best first."""

    results: list[RecallItem]


def recall_result(hits: list[RecallHit]) -> RecallResult:
    """The tool's answer from the library's hits: every field of each hit, timestamps as ISO text."""
    return RecallResult(results=[RecallItem.model_validate(hit.to_json()) for hit in hits])


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the recall tool to ``server``."""
    store = calls.store

    @server.tool(annotations=READ)
    async def recall(
        query: Annotated[str, Field(description="What you want to know, in natural language.")],
        namespaces: Namespaces = None,
        limit: Annotated[int, Field(description="Results to return.", ge=1, le=100)] = 10,
        as_of: Timestamp = None,
        include_history: Annotated[
            bool, Field(description="Also return retired (superseded, expired, withdrawn) facts.")
        ] = False,
        max_tokens: Annotated[
            int | None,
            Field(description="Stop adding results past about this many tokens.", ge=1),
        ] = None,
        ctx: Context | None = None,
    ) -> RecallResult:
        """Search memory: current facts and episodes ranked together (semantic + full text)."""

        def work(s: Scope) -> Any:
            hits = stash_pipeline.memory.recall.recall(
                store,
                query,
                s.read(namespaces),
                limit=limit,
                as_of=as_of,
                include_history=include_history,
                max_tokens=max_tokens,
            )
            return recall_result(hits)

        return await calls.run(ctx, work)
