"""MCP tools derived from the operation declarations (``stash_pipeline.operations``).

A tool's input schema is its operation's arguments model: the SDK builds it from the
tool function's signature, made of the model's fields (types, defaults, descriptions,
constraints), so it also checks the JSON types before the call. The model's own
validators run inside the call (``Operation.parse``), where a failure is a tool error
like any other. The description is the operation's; the annotations follow its effect;
the output schema is ``Page`` for paged operations, the result model where the operation
publishes it (``output_schema``), and a JSON object otherwise.

The SDK reads a tool's parameters with ``inspect.signature``, which returns a function's
``__signature__`` when it has one: ``tool`` sets it, the one place Stash leans on how the
SDK reads a function. ``tests/mcp/test_tool_surface.py`` fails if an SDK stops honouring it.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
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


def tool(op: Operation, calls: ToolCalls) -> Tool:
    """The tool of ``op``, of the same name, bound to ``calls``."""

    async def run(ctx: Context | None = None, **values: Any) -> Any:
        def work(scope: Scope) -> Any:
            found = op.invoke(calls.store, scope, op.parse(values))
            return page(found, values["limit"], values["offset"]) if op.paged else found

        return await calls.run(ctx, work)

    run.__signature__ = signature(op)  # type: ignore[attr-defined]
    run.__name__ = run.__qualname__ = op.name
    return Tool.from_function(
        run, name=op.name, description=op.description, context_kwarg="ctx", annotations=ANNOTATIONS[op.effect]
    )


__all__ = ["ANNOTATIONS", "signature", "tool", "wire_annotation"]
