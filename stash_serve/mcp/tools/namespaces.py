"""Namespace tools: init, create_namespace, list_namespaces, delete_namespace.

The library side is ``stash_pipeline.memory.namespaces``.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field, StrictBool

from stash_pipeline import errors
from stash_pipeline.auth import TokenInfo
from stash_pipeline.memory.namespaces import create, delete, init_self, list_
from stash_serve.mcp.calls import Scope, ToolCalls
from stash_serve.mcp.params import (
    DESTRUCTIVE,
    READ,
    WRITE_IDEMPOTENT,
    Limit,
    Namespaces,
    Offset,
    Page,
    page,
)


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the namespace tools to ``server``."""
    store = calls.store
    tool = server.tool

    @tool(annotations=WRITE_IDEMPOTENT)
    async def init(ctx: Context | None = None) -> dict[str, Any]:
        """Start of every session: create the /self tree (capabilities, limits, preferences) if missing."""

        def work(s: Scope) -> Any:
            if s.token is not None and not (s.token.has("write") and s.token.covers("/self")):
                # init opens every session, so a token without /self gets an honest answer
                # rather than an error, and nothing is written.
                return {
                    "ok": True,
                    "namespaces": [],
                    "namespaces_created": [],
                    "self_available": False,
                    "message": "this token does not cover /self with write access; the self-model is "
                    f"unavailable. You may use: {', '.join(s.token.namespaces)}",
                }
            return {**init_self(store), "self_available": True}

        return await calls.run(ctx, work)

    @tool(annotations=WRITE_IDEMPOTENT)
    async def create_namespace(
        namespace: Annotated[
            str, Field(description="Namespace path to create, e.g. /projects/x (parents are created too).")
        ],
        name: Annotated[str | None, Field(description="Display name (default: the path).")] = None,
        description: Annotated[str | None, Field(description="What belongs here; always give one.")] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Create a namespace and any missing parents (mkdir -p); updates name/description if it exists."""

        def work(s: Scope) -> Any:
            path = s.write(namespace)
            if s.token is None:
                result = create(store, path, name, description)
            else:
                result = _create_as_token(calls, s.token, path, name, description)
            record = result["namespace"]
            return {
                "id": record.id,
                "slug": record.slug,
                "created": result["created"],
                "namespace": record,
            }

        return await calls.run(ctx, work)

    @tool(annotations=READ)
    async def list_namespaces(
        namespaces: Namespaces = None,
        limit: Limit = 100,
        offset: Offset = 0,
        ctx: Context | None = None,
    ) -> Page:
        """List namespaces, ordered by path."""

        def work(s: Scope) -> Any:
            return page(list_(store, s.read(namespaces), limit, offset), limit, offset)

        return await calls.run(ctx, work)

    @tool(annotations=DESTRUCTIVE)
    async def delete_namespace(
        namespace: Annotated[
            str, Field(description="Namespace path to delete, with all descendants and their records.")
        ],
        confirm: Annotated[
            # strict: a destructive switch must be a real JSON true, never "yes" or 1
            StrictBool, Field(description="False (default) only reports what would be deleted; true deletes.")
        ] = False,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Delete a namespace tree and everything in it. Call once without confirm to see the counts."""

        def work(s: Scope) -> Any:
            return delete(store, s.write(namespace, "admin"), confirm=confirm)

        return await calls.run(ctx, work)


def _create_as_token(
    calls: ToolCalls, token: TokenInfo, path: str, name: str | None, description: str | None
) -> dict[str, Any]:
    """``create`` for a token: ancestors outside its trees must exist, and it creates at most
    STASH_NAMESPACES_PER_TOKEN_PER_HOUR namespaces an hour (updating one counts nothing)."""
    store, window = calls.store, calls.limits.namespaces_created
    if not window.acquire(token.id):
        if store.db.one("get_namespace_by_slug", slug=path) is None:
            raise errors.RateLimited(
                f"this token created {window.limit} namespaces in the last hour "
                "(STASH_NAMESPACES_PER_TOKEN_PER_HOUR); retry later"
            )
        return create(store, path, name, description, may_create=lambda _: False)
    try:
        result = create(store, path, name, description, may_create=token.covers)
    except BaseException:
        window.release(token.id)
        raise
    made = int(result["created"]) + int(result["ancestors_created"])
    if made == 0:
        window.release(token.id)
    elif made > 1:
        window.record(token.id, made - 1)
    return result
