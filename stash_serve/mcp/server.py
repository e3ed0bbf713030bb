"""The Stash MCP server: ``build_server(store, auth=...)`` and its error mapping.

Every tool answers structured JSON (snake_case, no vectors). A bad input, an unknown
id, a namespace outside the token's scope — any ``StashError`` — becomes a tool error
result (``isError``) whose text is ``{"error": code, "message": ...}`` (also under
``_meta["stash/error"]``; never as structured content, which clients check against the
tool's output schema). Argument validation failures get the code ``invalid_input``; anything
unexpected is logged with its traceback on stderr and answered as ``internal_error``
without details. Nothing an agent sends can stop the server.

The tools are derived from the operation declarations (``stash_serve.mcp.derive``), the
toolsets a spec turns on (``stash_serve.mcp.toolsets``); serving the server over stdio or
HTTP is ``stash_serve.serve``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp_types import Tool as MCPTool
from pydantic import ValidationError

from stash_pipeline import __version__, errors
from stash_pipeline.operations.base import Operation, missing_argument
from stash_pipeline.store import Store
from stash_serve.mcp import derive
from stash_serve.mcp.calls import TOKEN_SCOPE_KEY, ToolCalls, error_code, error_result
from stash_serve.mcp.schemas import portable
from stash_serve.mcp.toolsets import ALL, every_operation, select, unknown_tool_message
from stash_serve.metrics import TOOL_CALLS, TOOL_ERRORS, TOOL_LATENCY

log = logging.getLogger("stash.mcp")

SERVER_NAME = "stash"

#: the instructions, a paragraph each; one naming tools is sent when every tool it names is offered
INSTRUCTION_PARTS: tuple[tuple[tuple[str, ...], str], ...] = (
    ((), "Stash is your long-term memory across sessions, so the user never has to repeat themselves."),
    (
        ("init", "list_namespaces", "recall", "get_context"),
        "Session: call `init` once at the start, then `list_namespaces`, `recall` the user's preferences and "
        "the topic at hand, and `recall` from /self; `get_context` when resuming work in a namespace. Before "
        "answering anything that may depend on earlier sessions, `recall`; do not guess.",
    ),
    (
        ("remember", "set_context", "consolidate"),
        "Remember durable signal only: decisions, preferences, constraints, corrections, project facts, "
        "lessons; not narration, transient steps or public knowledge. At the end, `remember` a 2-3 sentence "
        'summary (kind "session_summary") and `set_context` with what to pick up next. `consolidate` after a '
        "substantial session (~10 new episodes), not after every write: facts and links exist only after it; "
        "`recall` finds episodes at once.",
    ),
    (
        ("create_namespace",),
        "Namespaces are paths like /users/alice; `create_namespace` (with a description) before writing there. "
        "Arguments mean the same in every tool: `namespace` is one exact namespace (writes, context); "
        '`namespaces` are the trees a read covers (list or comma string, descendants included, "/" = all; '
        "default: all you may read); `id` is the record the tool acts on, `<role>_id` another record; times "
        "are ISO 8601: as_of = when it was true, known_at = when Stash knew it (default now). Lists page: pass "
        "`next_offset` as `offset` (null = last page).",
    ),
    ((), "/self holds your self-model (capabilities, limits, preferences): keep it current."),
    (
        ("create_hypothesis", "test_hypothesis"),
        "Hypotheses: create with a verification plan, `test_hypothesis`, confirm or reject with a reason.",
    ),
    (("create_failure",), "Failures: record the lesson."),
    (
        ("recall", "forget"),
        "To forget, `recall` first and pass the stored wording to `forget` (preview first); purge erases for good.",
    ),
    (
        (),
        "On an error, say so, fix the input or retry once; never pretend to remember what you could not read "
        "or store.",
    ),
)


def instructions(offered: tuple[Operation, ...]) -> str:
    """The server instructions for the tools ``offered``: what they cannot use is left out."""
    names = {op.name for op in offered}
    return "\n\n".join(text for needs, text in INSTRUCTION_PARTS if set(needs) <= names) + "\n"


#: the instructions of the full surface
INSTRUCTIONS = instructions(every_operation())


def build_server(store: Store, *, auth: bool, toolsets: str = ALL) -> StashMCPServer:
    """The MCP server with the tools of the ``toolsets`` spec (``stash_serve.mcp.toolsets``;
    every tool unless told: ``stash serve mcp`` passes STASH_TOOLSETS) bound to ``store``.

    With ``auth`` every tool call needs the TokenInfo that ``stash_serve.http`` puts in the
    request scope; without it (stdio, --no-auth) calls are unrestricted. A bad spec is a
    ``ConfigurationError`` naming the valid toolsets.
    """
    offered = select(toolsets)
    calls = ToolCalls(store, auth)
    server = StashMCPServer(
        SERVER_NAME,
        title="Stash memory",
        version=__version__,
        instructions=instructions(offered),
        tools=[derive.tool(op, calls) for op in offered],
        log_level="WARNING",
    )
    server.toolsets = toolsets
    return server


class StashMCPServer(MCPServer):
    """MCPServer that turns every failure into a structured tool error, records metrics and
    lists its tools' schemas in the form every converter takes (``stash_serve.mcp.schemas``).
    ``toolsets`` is the spec it was built with: an unknown tool's answer names it."""

    _listing: list[MCPTool] | None = None
    toolsets: str = ALL

    async def list_tools(self) -> list[MCPTool]:
        if self._listing is None:  # the tools are fixed once the server is built
            self._listing = [
                tool.model_copy(
                    update={
                        "input_schema": portable(tool.input_schema),
                        "output_schema": portable(tool.output_schema) if tool.output_schema else None,
                    }
                )
                for tool in await super().list_tools()
            ]
        return self._listing

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        started = time.perf_counter()
        # unknown names share one label so callers cannot grow the metric without bound
        label = name if self._tool_manager.get_tool(name) is not None else "unknown"
        try:
            unknown = self._unknown_arguments(name, arguments)
            if unknown:
                result = error_result(errors.InvalidInput(unknown))
            else:
                result = await super().call_tool(name, arguments, context)
        except MCPError:
            TOOL_CALLS.labels(label, "error").inc()
            raise
        except UnexpectedToolError:
            log.exception("tool %r failed unexpectedly", name)
            result = error_result(InternalError())
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                result = error_result(errors.InvalidInput(_validation_message(exc.__cause__)))
            elif self._tool_manager.get_tool(name) is None:
                result = error_result(UnknownTool(unknown_tool_message(str(name), self.toolsets)))
            else:
                result = error_result(errors.InvalidInput(str(exc)))
        except Exception:  # the SDK should not raise anything else; never let it reach the client
            log.exception("tool %r failed unexpectedly", name)
            result = error_result(InternalError())
        outcome = "error" if getattr(result, "is_error", False) else "ok"
        TOOL_CALLS.labels(label, outcome).inc()
        TOOL_LATENCY.labels(label).observe(time.perf_counter() - started)
        if outcome == "error":
            TOOL_ERRORS.labels(label, error_code(result)).inc()
        return result

    def _unknown_arguments(self, name: str, arguments: dict[str, Any]) -> str | None:
        """A message naming arguments the tool does not take (a misspelt ``namespace`` would
        otherwise be dropped silently and, say, widen a read to every namespace)."""
        tool = self._tool_manager.get_tool(name)
        if tool is None or not isinstance(arguments, dict):
            return None
        accepted = set(tool.parameters.get("properties", {}))
        unknown = sorted(str(key)[:64] for key in arguments if key not in accepted)
        if not unknown:
            return None
        return (
            f"unknown argument(s) {', '.join(unknown[:10])} for {name}; "
            f"it takes: {', '.join(sorted(accepted)) or 'no arguments'}"
        )


class InternalError(errors.StashError):
    """internal error: the server logged the details; try again or report it."""

    code = "internal_error"


class UnknownTool(errors.StashError):
    """Unknown tool."""

    code = "unknown_tool"


def _validation_message(exc: ValidationError) -> str:
    # Field names and pydantic's short messages only: the rejected values are the caller's
    # data (possibly huge or binary) and would only echo back.
    parts = []
    for err in exc.errors()[:10]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        parts.append(missing_argument(where) if err.get("type") == "missing" else f"{where}: {err.get('msg', 'invalid')}")
    return "invalid arguments: " + "; ".join(parts)


__all__ = ["INSTRUCTIONS", "INSTRUCTION_PARTS", "SERVER_NAME", "TOKEN_SCOPE_KEY", "StashMCPServer", "build_server", "instructions"]
