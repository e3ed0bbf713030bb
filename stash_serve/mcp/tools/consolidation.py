"""Consolidation tools: consolidate (start the stages now), consolidation_status.

The library side is ``stash_pipeline.consolidation.runner`` (the stage runner). ``consolidate``
never waits on a model: with Dagster running it submits one run per namespace and
returns their ids; without, it starts a background job and returns its handle
(``stash_serve.runs``). It is written here, not declared: ``stash consolidate run`` runs
the stages in the terminal instead, with other options and another answer.
``consolidation_status`` shows both kinds of run; it is declared in
``stash_pipeline.operations.consolidation``.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from stash_pipeline import errors
from stash_pipeline.consolidation import runner
from stash_pipeline.memory.namespaces import resolve_trees
from stash_pipeline.operations.consolidation import CONSOLIDATION_STATUS
from stash_pipeline.stages import STAGE_NAMES
from stash_serve.mcp.calls import Scope, ToolCalls
from stash_serve.mcp.derive import add_tool
from stash_serve.mcp.params import WRITE, Namespaces
from stash_serve.runs import DagsterRuns, Job, require_reasoner


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the consolidation tools to ``server``."""
    store = calls.store
    tool = server.tool
    jobs = calls.jobs  # consolidation_status lists them

    @tool(annotations=WRITE)
    async def consolidate(
        namespaces: Namespaces = None,
        stage: Annotated[
            str | None, Field(description=f"Only this stage (default: all): {', '.join(STAGE_NAMES)}.")
        ] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Consolidate the namespace trees (episodes into facts, links, patterns…).
        Returns at once: Dagster run ids or a job handle; then consolidation_status."""

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
            with store.db.transaction() as tx:
                slugs = sorted(set().union(*(resolve_trees(tx, path).values() for path in roots)))
            require_reasoner(store.settings, [stage] if stage else None)  # no run id for work that cannot run
            dagster = DagsterRuns.find(store.settings)
            if dagster is not None:
                selected = [stage] if stage else list(STAGE_NAMES)
                runs = [
                    {"namespace": slug, "run_id": dagster.launch(slug, selected, trigger="mcp"), "stages": selected}
                    for slug in slugs
                ]
                return {"mode": "dagster", "runs": runs, "dagster_url": dagster.url}

            def background(job: Job) -> list[dict[str, Any]]:
                reports: list[dict[str, Any]] = []
                for path in roots:
                    reports.extend(r.to_json() for r in runner.run_tree(store, path, stages=[stage] if stage else None))
                    job.reports = list(reports)  # progress, tree by tree
                return reports

            return {"mode": "background", "job": jobs.start(roots, stage, background).view()}

        return await calls.run(ctx, work)

    add_tool(server, calls, CONSOLIDATION_STATUS)
