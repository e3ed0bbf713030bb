"""Hypothesis tools: propose, test, refine, confirm or reject, list, show, delete.

The library side is ``stash_pipeline.memory.hypotheses``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from stash_pipeline.memory import hypotheses, validate
from stash_serve.mcp.calls import Scope, ToolCalls
from stash_serve.mcp.params import (
    DESTRUCTIVE_IDEMPOTENT,
    READ,
    WRITE,
    WRITE_IDEMPOTENT,
    Confidence,
    IdList,
    Limit,
    Namespaces,
    Offset,
    Page,
    RecordId,
    RootNamespace,
    page,
)


def register(server: MCPServer, calls: ToolCalls) -> None:
    """Add the hypothesis tools to ``server``."""
    store = calls.store
    tool = server.tool

    @tool(annotations=READ)
    async def list_hypotheses(
        namespaces: Namespaces = None,
        status: Annotated[
            Literal["proposed", "testing", "confirmed", "rejected"] | None,
            Field(description="Only this status."),
        ] = None,
        limit: Limit = 100,
        offset: Offset = 0,
        ctx: Context | None = None,
    ) -> Page:
        """Hypotheses, most recently updated first."""

        def work(s: Scope) -> Any:
            rows = hypotheses.list_(store, s.read(namespaces), status=status, limit=limit, offset=offset)
            return page(rows, limit, offset)

        return await calls.run(ctx, work)

    @tool(annotations=WRITE)
    async def create_hypothesis(
        content: Annotated[str, Field(description="The belief to test, as one statement.")],
        verification_plan: Annotated[
            str, Field(description="How it will be confirmed or refuted (required).")
        ],
        confidence: Confidence = 0.5,
        namespace: RootNamespace = "/",
        source_fact_ids: IdList = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Propose a hypothesis; then test_hypothesis → confirm_hypothesis or reject_hypothesis."""

        def work(s: Scope) -> Any:
            return hypotheses.create(
                store,
                s.write(namespace),
                content,
                verification_plan,
                confidence=confidence,
                # the field name in errors stays "id", as clients have always seen it
                source_fact_ids=validate.record_ids(source_fact_ids, "id"),
            )

        return await calls.run(ctx, work)

    @tool(annotations=READ)
    async def show_hypothesis(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """One hypothesis with its evidence log."""

        def work(s: Scope) -> Any:
            return hypotheses.show(store, id, namespaces=s.by_id("read"))

        return await calls.run(ctx, work)

    @tool(annotations=WRITE_IDEMPOTENT)
    async def test_hypothesis(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """Start testing a hypothesis (proposed → testing); needed before confirm_hypothesis."""

        def work(s: Scope) -> Any:
            return hypotheses.test(store, id, namespaces=s.by_id("write"))

        return await calls.run(ctx, work)

    @tool(annotations=WRITE)
    async def refine_hypothesis(
        id: RecordId,
        content: Annotated[str | None, Field(description="New wording.")] = None,
        verification_plan: Annotated[str | None, Field(description="New plan.")] = None,
        confidence: Annotated[float | None, Field(description="New confidence 0-1.", ge=0, le=1)] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Reword a hypothesis, its plan or confidence (a testing one goes back to proposed)."""

        def work(s: Scope) -> Any:
            return hypotheses.refine(
                store,
                id,
                content=content,
                verification_plan=verification_plan,
                confidence=confidence,
                namespaces=s.by_id("write"),
            )

        return await calls.run(ctx, work)

    @tool(annotations=WRITE)
    async def confirm_hypothesis(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """Confirm a hypothesis under test; it becomes a fact (origin hypothesis). Returns both."""

        def work(s: Scope) -> Any:
            return hypotheses.confirm(store, id, namespaces=s.by_id("write"))

        return await calls.run(ctx, work)

    @tool(annotations=WRITE)
    async def reject_hypothesis(
        id: RecordId,
        reason: Annotated[
            str | None, Field(description="Why it is false; keeps it from being re-proposed.")
        ] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Reject a proposed or testing hypothesis (final)."""

        def work(s: Scope) -> Any:
            return hypotheses.reject(store, id, reason=reason, namespaces=s.by_id("write"))

        return await calls.run(ctx, work)

    @tool(annotations=DESTRUCTIVE_IDEMPOTENT)
    async def delete_hypothesis(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """Delete a hypothesis."""

        def work(s: Scope) -> Any:
            return hypotheses.delete(store, id, namespaces=s.by_id("write"))

        return await calls.run(ctx, work)
