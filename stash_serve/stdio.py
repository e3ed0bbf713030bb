"""MCP over stdio, with an answer for every line: the SDK's transport, plus parse errors.

The SDK's stdio transport reads a line, and when the line is no JSON-RPC message (not
JSON, cut off, or holding a lone surrogate such as ``"\\ud800"``, which is JSON text but
no string the JSON reader accepts) it passes the exception to the server, which logs it
at debug level and answers nothing: the client waits forever for an answer to its
request. Over HTTP the same input gets ``-32700``. ``run_stdio`` sits between the two: an
exception from the transport is answered on stdout with a JSON-RPC error whose id is null
(the id could not be read), ``-32700 Parse error`` for a line that is no JSON and
``-32600 Invalid Request`` for JSON that is no JSON-RPC message; the server goes on
reading. Input is never echoed in the message.
"""

from __future__ import annotations

import logging

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from mcp_types import ErrorData, JSONRPCError
from pydantic import ValidationError

log = logging.getLogger("stash.mcp")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def error_for(exc: Exception) -> JSONRPCError:
    """The JSON-RPC error (id null) answering a line the transport could not read."""
    details = exc.errors(include_input=False) if isinstance(exc, ValidationError) else []
    if details and all(d["type"] != "json_invalid" for d in details):
        code, reason = INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message"
    else:
        detail = details[0]["msg"] if details else type(exc).__name__
        code, reason = PARSE_ERROR, f"Parse error: {detail}"
    return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=code, message=reason))


async def run_stdio(server: MCPServer) -> None:
    """``server.run_stdio_async``, answering every undecodable line with a JSON-RPC error."""
    lowlevel = server._lowlevel_server  # what run_stdio_async runs; the SDK has no public name for it
    async with stdio_server() as (read_stream, write_stream):
        checked_writer, checked = create_context_streams[SessionMessage | Exception](0)

        async def answer_what_cannot_be_read() -> None:
            async with checked_writer:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        log.info("answered an undecodable stdio line with a JSON-RPC error")
                        await write_stream.send(SessionMessage(error_for(item)))
                    else:
                        await checked_writer.send(item)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(answer_what_cannot_be_read)
            await lowlevel.run(checked, write_stream, lowlevel.create_initialization_options())
            tasks.cancel_scope.cancel()


__all__ = ["error_for", "run_stdio"]
