"""MCP tools derived from the operation declarations (``stash_pipeline.operations``).

A tool's input schema is its operation's arguments model: the SDK builds it from a
signature made of the model's fields (types, defaults, descriptions, constraints), so it
also checks the JSON types before the call. The model's own validators run inside the
call (``Operation.parse``), where a failure is a tool error like any other. The
description is the operation's; the annotations follow its effect; the output schema is
``Page`` for paged operations, the result model where the operation publishes it
(``output_schema``), and a JSON object otherwise.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field
from pydantic.fields import FieldInfo

from stash_pipeline.operations.base import Operation
from stash_serve.mcp.calls import Scope, ToolCalls
from stash_serve.mcp.params import (
    DESTRUCTIVE,
    DESTRUCTIVE_IDEMPOTENT,
    READ,
    WRITE,
    WRITE_IDEMPOTENT,
    Page,
    page,
    without_validators,
)

ANNOTATIONS = {
    "read": READ,
    "write": WRITE,
    "write_idempotent": WRITE_IDEMPOTENT,
    "destructive": DESTRUCTIVE,
    "destructive_idempotent": DESTRUCTIVE_IDEMPOTENT,
}


def wire_annotation(info: FieldInfo) -> Any:
    """The field as the SDK should see it: type, constraints, description and schema extras
    (a description written when the schema is built: ``consolidate``'s stage names), without
    the model's validators (they run in ``Operation.parse``, where their errors are tool errors)."""
    extra: dict[str, Any] = {"description": info.description} if info.description else {}
    if info.json_schema_extra is not None:
        extra["json_schema_extra"] = info.json_schema_extra
    return without_validators(Annotated[(info.annotation, *info.metadata, Field(**extra))])


def signature(op: Operation) -> inspect.Signature:
    """The tool function's signature: one keyword per argument, then the request context."""
    params = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if info.is_required() else info.default,
            annotation=wire_annotation(info),
        )
        for name, info in op.arguments.model_fields.items()
    ]
    params.append(inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Context | None))
    answer: Any = Page if op.paged else op.result if op.output_schema else dict[str, Any]
    return inspect.Signature(params, return_annotation=answer)


def add_tool(server: MCPServer, calls: ToolCalls, op: Operation) -> None:
    """Register ``op`` as the tool of the same name."""

    async def tool(ctx: Context | None = None, **values: Any) -> Any:
        def work(scope: Scope) -> Any:
            found = op.invoke(calls.store, scope, op.parse(values))
            return page(found, values["limit"], values["offset"]) if op.paged else found

        return await calls.run(ctx, work)

    sig = signature(op)
    tool.__signature__ = sig  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in sig.parameters.values()} | {"return": sig.return_annotation}
    tool.__name__ = tool.__qualname__ = op.name
    server.add_tool(tool, name=op.name, description=op.description, annotations=ANNOTATIONS[op.effect])


def register_all(server: MCPServer, calls: ToolCalls, operations: tuple[Operation, ...]) -> None:
    """Add one tool per operation, in the given order."""
    for op in operations:
        add_tool(server, calls, op)


__all__ = ["ANNOTATIONS", "add_tool", "register_all", "signature", "wire_annotation"]
