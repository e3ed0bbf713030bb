"""Consolidation tools: consolidate (run the stages now), consolidation_status.

The library side is ``stash_pipeline.consolidation`` (the stage runner).
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from stash_pipeline import consolidation, errors
from stash_pipeline.stages import STAGE_NAMES
from stash_serve.mcp.calls import Scope, ToolCalls
from stash_serve.mcp.params import READ, WRITE, Namespaces


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the consolidation tools to ``server``."""
    store = calls.store
    tool = server.tool

    @tool(annotations=WRITE)
    async def consolidate(
        namespaces: Namespaces = None,
        stage: Annotated[
            str | None, Field(description=f"Only this stage (default: all): {', '.join(STAGE_NAMES)}.")
        ] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Run consolidation now over the namespace trees: episodes become facts, links, patterns…"""

        def work(s: Scope) -> Any:
            if stage is not None and stage not in STAGE_NAMES:
                raise errors.InvalidInput(
                    f"unknown stage {stage[:64]!r}; use one of {', '.join(STAGE_NAMES)}"
                )
            paths = s.read(namespaces)
            if s.token is not None:
                s.token.require("write", paths)
            # a tree inside another selected tree is already covered by it
            roots = [
                p for p in paths if not any(q != p and (q == "/" or p.startswith(q + "/")) for q in paths)
            ]
            stages = {"stages": [stage]} if stage else {}
            reports: list[Any] = []
            for path in roots:
                reports.extend(consolidation.run_tree(store, path, **stages))
            return {"reports": reports}

        return await calls.run(ctx, work)

    @tool(annotations=READ)
    async def consolidation_status(
        namespaces: Namespaces = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Per namespace and stage: cursor, backlog, last run and dead letters."""

        def work(s: Scope) -> Any:
            return {"items": consolidation.status(store, s.read(namespaces))}

        return await calls.run(ctx, work)
