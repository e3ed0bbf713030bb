"""Serving Stash over MCP: stdio (local, trusted, no token) or HTTP until Ctrl-C / SIGTERM.

``stash serve mcp`` (and so ``stash up``) calls ``run``. HTTP is ``stash_serve.http``:
streamable HTTP at ``/mcp``, SSE at ``/sse``, bearer tokens, health and metrics, served
by one process or by several worker processes on the same port (``stash_serve.workers``,
each running ``serve_worker``). Every serving process also runs the pending-vector worker
(``stash_pipeline.memory.pending``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import re
import signal
import socket
import sys
import threading
import uuid
from typing import Any

import anyio

from stash_pipeline import errors
from stash_pipeline.config import Settings
from stash_pipeline.db.budget import read_budget
from stash_pipeline.db.server import check as check_server
from stash_pipeline.memory.pending import start_worker
from stash_pipeline.recall.statement import prepare_on_connect
from stash_pipeline.store import Store
from stash_serve.http import build_app, is_loopback
from stash_serve.mcp.server import build_server
from stash_serve.mcp.toolsets import select as select_toolsets
from stash_serve.stdio import run_stdio
from stash_serve.warmup import Warmup
from stash_serve.workers import Peers, WorkerOptions, choose_workers, serve_workers, watch_parent

log = logging.getLogger("stash.mcp")


class RedactSessionIds(logging.Filter):
    """Hide SSE session ids in log lines: ``/messages/?session_id=…`` in the access log and
    the UUIDs the MCP SDK's SSE transport names in its warnings.

    A session id is a capability for the stream it names; a log reader should not get one.
    """

    PATTERNS = (
        (re.compile(r"(session_id=)[^&\s\"]+"), r"\1[redacted]"),
        (re.compile(r"\b[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}\b"), "[redacted]"),
    )

    def _redact(self, value: object) -> object:
        if not isinstance(value, str | uuid.UUID):
            return value
        value = str(value)
        for pattern, replacement in self.PATTERNS:
            value = pattern.sub(replacement, value)
        return value

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(self._redact(arg) for arg in record.args)
        record.msg = self._redact(record.msg)
        return True


class ClientDisconnects(logging.Filter):
    """One line, not a traceback, for a client that hung up before its request was read.

    The MCP SDK logs any failure reading a POST body with ``logger.exception``; a client
    going away mid-request (a closed laptop, a cancelled call) is routine, not a server
    error, and its traceback buried the lines that mattered.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        from starlette.requests import ClientDisconnect

        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, ClientDisconnect):
            record.msg, record.args, record.exc_info, record.exc_text = (
                "a client disconnected before its request was read", None, None, None
            )
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


#: loggers that log a client hanging up as an error with a traceback
DISCONNECT_LOGGERS = ("mcp.server.streamable_http", "mcp.server.sse")


def quiet_client_disconnects() -> None:
    """Install ``ClientDisconnects`` on the loggers that need it (idempotent)."""
    for name in DISCONNECT_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, ClientDisconnects) for f in logger.filters):
            logger.addFilter(ClientDisconnects())


#: loggers whose lines may carry a session id
SESSION_LOGGERS = ("uvicorn.access", "mcp.server.sse")


def redact_session_ids() -> None:
    """Install the session-id redaction on the loggers that name sessions (idempotent)."""
    for name in SESSION_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactSessionIds) for f in logger.filters):
            logger.addFilter(RedactSessionIds())


def _configure_logging(settings: Settings, worker: int | None = None) -> None:
    # stderr only: in stdio mode stdout carries the protocol and nothing else.
    handler = logging.StreamHandler(sys.stderr)
    # the workers of one server log into one stream: each line says whose it is
    who = "" if worker is None else f" [worker {worker}]"
    handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s %(name)s{who}: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())


def run(
    settings: Settings,
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8080,
    no_auth: bool = False,
    toolsets: str | None = None,
    workers: int | None = None,
) -> None:
    """Serve MCP over stdio or HTTP until Ctrl-C / SIGTERM; one Store (one pool) per process.

    ``toolsets`` (else ``STASH_TOOLSETS``) names the tools offered (``stash_serve.mcp.toolsets``).
    ``workers`` (else ``STASH_HTTP_WORKERS``, else as many as ``choose_workers`` picks) is
    the number of HTTP worker processes (``stash_serve.workers``); stdio serves one client.
    """
    spec = settings.toolsets if toolsets is None else toolsets
    select_toolsets(spec)  # a bad spec stops the start here, before the database is opened
    if transport not in ("stdio", "http"):
        raise errors.ConfigurationError(f"unknown transport {transport!r}; use stdio or http")
    if transport == "stdio" and workers not in (None, 1):
        raise errors.ConfigurationError("--workers is for --transport http: stdio serves the one client that started it")
    if workers is not None and workers < 1:
        raise errors.ConfigurationError(f"--workers must be at least 1, not {workers}")
    if transport == "http" and no_auth and not is_loopback(host):
        raise errors.ConfigurationError(
            f"--no-auth is only allowed on a loopback host (127.0.0.0/8, ::1, localhost), not {host!r}; "
            "create a token with `stash token create` instead"
        )
    _configure_logging(settings)
    store = Store.open(settings)
    # each pooled connection prepares the recall statements as it opens, not on a request
    prepare_on_connect(store)
    requested = (settings.http_workers if workers is None else workers) if transport == "http" else 1
    try:
        count = _check_database(store, settings, requested)
    except BaseException:
        store.close()
        raise
    if count > 1:
        store.close()  # each worker opens its own
        _log_address(host, port, no_auth, count)
        serve_workers(settings, count, host=host, port=port, no_auth=no_auth, toolsets=spec)
        return
    warmup = Warmup(store).start()
    # embeds episodes committed before their vector (this process's and any other's)
    worker = start_worker(store)
    try:
        if transport == "stdio":
            server = build_server(store, auth=False, toolsets=spec)

            def _stop(signum: int, frame: Any) -> None:
                # Leave at once. Every answered call committed before its answer was
                # written, so nothing acknowledged is lost, and PostgreSQL rolls back what
                # was in flight. Raising KeyboardInterrupt instead lands in whichever task
                # happens to run and could surface as a traceback from asyncio's shutdown.
                logging.shutdown()
                os._exit(0)

            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, _stop)
            # the SDK's stdio transport, answering an undecodable line with a parse error
            # where the SDK answers nothing (stash_serve/stdio.py)
            anyio.run(run_stdio, server)
        else:
            _log_address(host, port, no_auth, 1)
            _serve_http(store, warmup, host=host, port=port, no_auth=no_auth, toolsets=spec)
    finally:
        warmup.stop()
        worker.stop()
        store.close()


def _check_database(store: Store, settings: Settings, requested: int | None) -> int:
    """Check the server and the connection budget; return how many HTTP workers to start.

    A server still starting is not checked (the warm-up waits for it), and the workers are
    then counted without the budget.
    """
    budget = None
    with contextlib.suppress(errors.DatabaseUnavailable):
        check_server(store.db.dsn)  # an unsupported one: refuse to start, saying why
        budget = read_budget(store.db, settings)
    count, note = choose_workers(requested, budget)
    if note:
        log.warning(note)
    if budget is not None:  # a deployment past max_connections: warn, saying by how much
        budget = budget.with_workers(count)
        log.log(logging.INFO if budget.fits else logging.WARNING, budget.describe())
    return count


def _log_address(host: str, port: int, no_auth: bool, workers: int) -> None:
    # the address is news, not a problem; serving without authentication is one
    log.log(
        logging.WARNING if no_auth else logging.INFO,
        "Stash MCP on http://%s:%d/mcp (SSE: /sse)%s%s",
        host,
        port,
        f", {workers} worker processes" if workers > 1 else "",
        "" if not no_auth else " — authentication DISABLED (--no-auth)",
    )


def _serve_http(
    store: Store,
    warmup: Warmup,
    *,
    host: str,
    port: int,
    no_auth: bool,
    toolsets: str,
    peers: Peers | None = None,
    sockets: list[socket.socket] | None = None,
    stopping: threading.Event | None = None,
) -> None:
    """Serve the HTTP app with uvicorn until a signal: bound here, or on ``sockets`` (a worker
    of ``stash_serve.workers``, stopping early once ``stopping`` is set)."""
    import uvicorn  # only HTTP needs it

    from stash_serve.http_edge import uvicorn_options

    settings = store.settings
    server = build_server(store, auth=not no_auth, toolsets=toolsets)
    app = build_app(store, server, auth=not no_auth, host=host, warmup=warmup, peers=peers)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=settings.log_level,
        lifespan="on",
        timeout_graceful_shutdown=10,
        **uvicorn_options(settings),  # header cap, read timeouts, proxies believed
    )
    redact_session_ids()  # after uvicorn.Config, which configures its loggers
    quiet_client_disconnects()
    if stopping is None:
        # uvicorn shuts down gracefully on SIGINT/SIGTERM and then re-raises the signal
        # to the handler that was installed before it; a no-op handler here turns that
        # into a normal return (exit status 0) after the store is closed.
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: None)
    _uvicorn_server(config, stopping).run(sockets=sockets)


def _uvicorn_server(config: Any, stopping: threading.Event | None) -> Any:
    """uvicorn's server, stopping at once if ``stopping`` was set before its own signal
    handlers were in place (a worker asked to stop while it started)."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            if stopping is not None and stopping.is_set():
                self.should_exit = True
            await super().startup(sockets=sockets)

    return Server(config)


def worker_main() -> None:
    """A worker process's main (``stash_serve.workers``): its options, pickled on stdin, then
    ``serve_worker`` until SIGTERM (or SIGINT)."""
    options, index, supervisor = pickle.load(sys.stdin.buffer)
    sys.stdin.close()
    stopping = threading.Event()

    def stop(signum: int, frame: Any) -> None:
        stopping.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop)
    # started with both blocked (``Supervisor.start``): one sent meanwhile arrives now
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    watch_parent(supervisor)
    serve_worker(options, index, stopping)


def serve_worker(options: WorkerOptions, index: int, stopping: threading.Event) -> None:
    """One worker of ``stash_serve.workers``: its own store, warm-up and pending-vector worker,
    serving the shared sockets (and its own Unix socket, for SSE messages passed on)."""
    settings = options.settings
    _configure_logging(settings, worker=index)
    peers = Peers(index, options.count, options.rundir)
    sockets = [socket.socket(fileno=fd) for fd in options.fds]
    sockets.append(peers.bind_own_socket())
    store = Store.open(settings)
    prepare_on_connect(store)
    warmup = Warmup(store, on_ready=peers.mark_ready).start()
    worker = start_worker(store)
    try:
        _serve_http(store, warmup, host=options.host, port=options.port, no_auth=options.no_auth,
                    toolsets=options.toolsets, peers=peers, sockets=sockets, stopping=stopping)
    finally:
        warmup.stop()
        worker.stop()
        store.close()
        peers.socket_path(index).unlink(missing_ok=True)


__all__ = [
    "ClientDisconnects",
    "RedactSessionIds",
    "quiet_client_disconnects",
    "redact_session_ids",
    "run",
    "serve_worker",
    "worker_main",
]
