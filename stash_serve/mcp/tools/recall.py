"""The recall tool: current facts and episodes ranked together.

The library side is ``stash_pipeline.memory.recall``: ``recall_results`` shapes the hits
once into the lean answer agents get (no null or empty fields, ``score_parts`` only on
request, ``max_tokens`` counted on the serialised result; a fact carries its source
episodes as ``sources``, and with score parts what was folded into it as ``grouped``);
the models here only publish that shape as the tool's output schema.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

import stash_pipeline.memory.recall
from stash_serve.mcp.calls import Scope, ToolCalls
from stash_serve.mcp.params import READ, AsOf, KnownAt, Namespaces


class ContextTurn(BaseModel):
    """A neighbouring turn of the same session, in order."""

    id: int
    content: str


class SourceTurn(BaseModel):
    """An episode the fact rests on."""

    id: int
    occurred_at: str | None = None
    excerpt: str
    score: float | None = None

    @model_serializer(mode="wrap")
    def _without_nulls(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {key: value for key, value in handler(self).items() if value is not None}


class GroupedHit(BaseModel):
    """Folded into this result."""

    kind: Literal["fact", "episode"]
    id: int
    score: float


class RecallItem(BaseModel):
    """One result; fields that do not apply are left out."""

    kind: Literal["fact", "episode"]
    id: int
    namespace: str
    content: str
    score: float
    relevance: float
    score_parts: dict[str, float] | None = None
    confidence: float | None = None
    occurred_at: str | None = None
    valid_from: str | None = None
    valid_until: str | None = None
    source_episode_ids: list[int] | None = None
    metadata: dict[str, Any] | None = None
    current: bool | None = None
    sources: list[SourceTurn] | None = None
    grouped: list[GroupedHit] | None = None
    context: list[ContextTurn] | None = None

    @model_serializer(mode="wrap")
    def _without_nulls(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # the answer leaves out what does not apply instead of sending nulls
        return {key: value for key, value in handler(self).items() if value is not None}


class RecallResult(BaseModel):
    """Facts and episodes, best first."""

    results: list[RecallItem]


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the recall tool to ``server``."""
    store = calls.store

    @server.tool(annotations=READ)
    async def recall(
        query: Annotated[str, Field(description="What you want to know, in natural language.")],
        namespaces: Namespaces = None,
        limit: Annotated[int, Field(description="Results to return.", ge=1, le=100)] = 10,
        as_of: AsOf = None,
        known_at: KnownAt = None,
        include_history: Annotated[
            bool, Field(description="Also return retired (superseded, expired, withdrawn) facts.")
        ] = False,
        max_tokens: Annotated[
            int | None,
            Field(description="Stop adding results past about this many tokens of the answer.", ge=1),
        ] = None,
        context: Annotated[
            int,
            Field(
                description="Turns of the same session to include around each episode hit.",
                ge=0,
                le=stash_pipeline.memory.recall.CONTEXT_MAX,
            ),
        ] = stash_pipeline.memory.recall.CONTEXT_DEFAULT,
        include_score_parts: Annotated[
            bool, Field(description="Also return each result's score parts and what it groups.")
        ] = False,
        ctx: Context | None = None,
    ) -> RecallResult:
        """Search memory: current facts and episodes ranked together (semantic + full text).
        Each result has a relevance in [0, 1]; below 0.3 it is probably off topic."""

        def work(s: Scope) -> Any:
            return stash_pipeline.memory.recall.recall_results(
                store,
                query,
                s.read(namespaces),
                limit=limit,
                as_of=as_of,
                known_at=known_at,
                include_history=include_history,
                max_tokens=max_tokens,
                context=context,
                score_parts=include_score_parts,
            )

        return await calls.run(ctx, work)
