"""The two SDK internals ``stash_serve.stdio`` relies on are still there, by name and shape.

``run_stdio`` runs the MCP SDK's low-level server itself (``MCPServer._lowlevel_server``)
between the stdio transport and a stream of its own (``mcp.shared._context_streams``),
to answer lines the transport cannot decode. Neither has a public name; an SDK upgrade
that renames or reshapes them fails here, by name, before any transport test hangs.
"""

from __future__ import annotations

import inspect

from mcp.server.mcpserver import MCPServer


def test_the_low_level_server_runs_on_two_streams_with_its_options() -> None:
    lowlevel = MCPServer("contract")._lowlevel_server
    run = inspect.signature(lowlevel.run)
    assert list(run.parameters)[:3] == ["read_stream", "write_stream", "initialization_options"], run
    assert callable(lowlevel.create_initialization_options)


def test_context_streams_are_created_with_a_buffer_size() -> None:
    from mcp.shared._context_streams import create_context_streams

    writer, reader = create_context_streams[object](0)
    assert hasattr(writer, "send") and hasattr(reader, "receive")
