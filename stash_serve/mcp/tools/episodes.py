"""Episode tools: remember, remember_batch, get_episode, forget, purge_episode.

The library side is ``stash_pipeline.memory.episodes``.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, ConfigDict, Field

from stash_pipeline.memory import episodes
from stash_serve.mcp.calls import Scope, ToolCalls
from stash_serve.mcp.params import (
    DESTRUCTIVE,
    DESTRUCTIVE_IDEMPOTENT,
    READ,
    WRITE,
    Metadata,
    Namespace,
    Namespaces,
    RecordId,
    RootNamespace,
    Timestamp,
)


class BatchEpisode(BaseModel):
    """One episode of a remember_batch call."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(description="What happened or was learned.")
    kind: str = Field("observation", description="Episode kind, e.g. observation, decision, session_summary.")
    occurred_at: str | None = Field(None, description="ISO 8601 time it happened (default now).")
    metadata: dict[str, Any] | None = Field(None, description="Optional JSON object.")
    idempotency_key: str | None = Field(None, description="Makes a retry of this item safe.")


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the episode tools to ``server``."""
    store = calls.store
    tool = server.tool

    @tool(annotations=WRITE)
    async def remember(
        content: Annotated[
            str, Field(description="What to remember: one durable, self-contained statement.")
        ],
        namespace: RootNamespace = "/",
        kind: Annotated[
            str,
            Field(
                description="observation, decision, preference, correction, lesson, session_summary, …"
            ),
        ] = "observation",
        metadata: Metadata = None,
        occurred_at: Timestamp = None,
        idempotency_key: Annotated[
            str | None, Field(description="A retry with the same key returns the same episode.")
        ] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Store one episode in an exact namespace. Returns its id and whether it was new."""

        def work(s: Scope) -> Any:
            return episodes.remember(
                store,
                s.write(namespace),
                content,
                occurred_at=occurred_at,
                kind=kind,
                metadata=metadata,
                idempotency_key=idempotency_key,
            )

        return await calls.run(ctx, work)

    @tool(annotations=WRITE)
    async def remember_batch(
        items: Annotated[list[BatchEpisode], Field(description="Episodes to store (1-1000), all or none.")],
        namespace: Namespace,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Store several episodes in one namespace, all or none; one result per item, in order."""

        def work(s: Scope) -> Any:
            raw = [item.model_dump(exclude_none=True) for item in items]
            return {"results": episodes.remember_batch(store, s.write(namespace), raw)}

        return await calls.run(ctx, work)

    @tool(annotations=READ)
    async def get_episode(
        id: RecordId,
        include_deleted: Annotated[bool, Field(description="Also return a forgotten episode.")] = False,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """One episode by id."""

        def work(s: Scope) -> Any:
            return episodes.get(store, id, s.by_id("read"), include_deleted=include_deleted)

        return await calls.run(ctx, work)

    @tool(annotations=DESTRUCTIVE)
    async def forget(
        about: Annotated[
            str, Field(description="The stored wording of the memory to forget (recall it first).")
        ],
        namespaces: Namespaces = None,
        threshold: Annotated[
            float | None,
            Field(
                description="Minimum similarity to match (default STASH_FORGET_THRESHOLD).", ge=0, le=1
            ),
        ] = None,
        preview: Annotated[bool, Field(description="True: only show what would be forgotten.")] = False,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Forget the one episode most similar to `about` (if similar enough); facts derived only from it are withdrawn."""

        def work(s: Scope) -> Any:
            paths = s.read(namespaces)
            if s.token is not None:
                s.token.require("write", paths)
            return episodes.forget(store, about, paths, threshold=threshold, preview=preview)

        return await calls.run(ctx, work)

    @tool(annotations=DESTRUCTIVE_IDEMPOTENT)
    async def purge_episode(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """Erase one episode for good (row, lineage, cached embedding); derived facts are withdrawn."""

        def work(s: Scope) -> Any:
            return episodes.purge(store, id, s.by_id("write"))

        return await calls.run(ctx, work)
