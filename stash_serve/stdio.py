"""MCP over stdio on the event loop: no worker thread per message.

The MCP SDK's stdio transport reads and writes through ``anyio.wrap_file``: every line
read, every message written and every flush is a hop to a worker thread and back, three
per tool call, each a wake-up of another thread, which a loaded machine pays in
milliseconds. Here the protocol's pipes are read and written by the event loop itself
(``connect_read_pipe`` / ``connect_write_pipe``); messages are parsed and serialised
exactly as the SDK does (one JSON-RPC message per line, UTF-8, ``by_alias`` and
``exclude_unset``).

As in the SDK, while serving fd 0 reads the null device and fd 1 writes to stderr, so a
stray ``print`` or a child process cannot corrupt the protocol; both are restored on
exit. Only pipes and sockets can be read by the event loop: with a terminal or a file on
stdin or stdout, ``stdio_streams`` returns None and the SDK's transport serves instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import stat
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import SessionMessage

#: longest line read: a message larger than this is a broken client, not a request
LINE_LIMIT = 1 << 30
#: bytes queued for a client that is not reading before writing waits for it
WRITE_HIGH_WATER = 1 << 20


def _loop_can_serve(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _Writer(asyncio.Protocol):
    """The write side's protocol: waits while the pipe is full, notices the reader leave."""

    def __init__(self) -> None:
        self.writable = asyncio.Event()
        self.writable.set()
        self.lost = False

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.writable.set()


@contextlib.contextmanager
def _claimed_standard_streams() -> Any:
    """Private duplicates of fd 0 and 1 for the protocol; fd 0 → null device, fd 1 → stderr."""
    sys.stdout.flush()
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
    finally:
        os.close(null)
    try:
        yield wire_in, wire_out
    finally:
        for fd, wire in ((0, wire_in), (1, wire_out)):
            with contextlib.suppress(OSError):
                os.set_blocking(wire, True)  # the pipe may outlive this process
                os.dup2(wire, fd)


@contextlib.asynccontextmanager
async def stdio_streams() -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]] | None
]:
    """The server's (read, write) message streams over stdin/stdout, or None (use the SDK's)."""
    if not (_loop_can_serve(0) and _loop_can_serve(1)):
        yield None
        return
    loop = asyncio.get_running_loop()
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    with _claimed_standard_streams() as (wire_in, wire_out):
        reader = asyncio.StreamReader(limit=LINE_LIMIT)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", buffering=0, closefd=False)
        )
        write_transport, writer = await loop.connect_write_pipe(
            _Writer, os.fdopen(wire_out, "wb", buffering=0, closefd=False)
        )

        async def read_messages() -> None:
            async with read_send:
                while line := await reader.readline():
                    try:
                        # decoded as the SDK does: a broken byte becomes U+FFFD, not an error
                        message = mcp_types.jsonrpc_message_adapter.validate_json(
                            line.decode("utf-8", errors="replace"), by_name=False
                        )
                    except Exception as exc:  # the server answers a malformed line
                        await read_send.send(exc)
                        continue
                    await read_send.send(SessionMessage(message))

        async def write_messages() -> None:
            async with write_receive:
                async for session_message in write_receive:
                    text = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    if writer.lost:
                        continue  # the client is gone; keep draining so the server can finish
                    write_transport.write(text.encode("utf-8") + b"\n")
                    if write_transport.get_write_buffer_size() > WRITE_HIGH_WATER:
                        await writer.writable.wait()

        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(read_messages)
                tasks.start_soon(write_messages)
                try:
                    yield read_receive, write_send
                finally:
                    await write_send.aclose()  # the writer hands over what is queued, then ends
                    with anyio.move_on_after(5):  # let the pipe take the last answers
                        while write_transport.get_write_buffer_size() and not writer.lost:
                            await anyio.sleep(0.01)
                    tasks.cancel_scope.cancel()
        finally:
            read_transport.close()
            write_transport.close()


async def serve(server: MCPServer) -> None:
    """Serve ``server`` over stdio from the event loop, or with the SDK's transport if it cannot."""
    async with stdio_streams() as streams:
        if streams is None:
            await MCPServer.run_stdio_async(server)
            return
        read, write = streams
        # what MCPServer.run_stdio_async does with the SDK's thread-backed streams
        lowlevel = server._lowlevel_server
        await lowlevel.run(read, write, lowlevel.create_initialization_options())


__all__ = ["serve", "stdio_streams"]
