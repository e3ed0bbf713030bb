"""Serving Stash over MCP: stdio (local, trusted, no token) or HTTP until Ctrl-C / SIGTERM.

``stash serve mcp`` (and so ``stash up``) calls ``run``. HTTP is ``stash_serve.http``:
streamable HTTP at ``/mcp``, SSE at ``/sse``, bearer tokens, health and metrics. Either
way the process also runs the pending-vector worker (``stash_pipeline.embedding.pending``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import sys
import uuid
from typing import Any

import anyio

from stash_pipeline import errors
from stash_pipeline.config import Settings
from stash_pipeline.db.budget import check_budget
from stash_pipeline.db.server import check as check_server
from stash_pipeline.embedding.pending import start_worker
from stash_pipeline.recall.statement import prepare_on_connect
from stash_pipeline.store import Store
from stash_serve.http import build_app, is_loopback
from stash_serve.mcp.server import build_server
from stash_serve.mcp.toolsets import select as select_toolsets
from stash_serve.stdio import run_stdio
from stash_serve.warmup import Warmup

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


def _configure_logging(settings: Settings) -> None:
    # stderr only: in stdio mode stdout carries the protocol and nothing else.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
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
) -> None:
    """Serve MCP over stdio or HTTP until Ctrl-C / SIGTERM; one Store (one pool) per process.

    ``toolsets`` (else ``STASH_TOOLSETS``) names the tools offered (``stash_serve.mcp.toolsets``).
    """
    spec = settings.toolsets if toolsets is None else toolsets
    select_toolsets(spec)  # a bad spec stops the start here, before the database is opened
    if transport not in ("stdio", "http"):
        raise errors.ConfigurationError(f"unknown transport {transport!r}; use stdio or http")
    if transport == "http" and no_auth and not is_loopback(host):
        raise errors.ConfigurationError(
            f"--no-auth is only allowed on a loopback host (127.0.0.0/8, ::1, localhost), not {host!r}; "
            "create a token with `stash token create` instead"
        )
    _configure_logging(settings)
    store = Store.open(settings)
    # each pooled connection prepares the recall statements as it opens, not on a request
    prepare_on_connect(store)
    with contextlib.suppress(errors.DatabaseUnavailable):  # a server still starting: the warm-up waits
        check_server(store.db.dsn)  # an unsupported one: refuse to start, saying why
        check_budget(store.db, settings)  # a deployment past max_connections: warn, saying by how much
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
            import uvicorn  # only HTTP needs it

            from stash_serve.http_edge import uvicorn_options

            server = build_server(store, auth=not no_auth, toolsets=spec)
            app = build_app(store, server, auth=not no_auth, host=host, warmup=warmup)
            # the address is news, not a problem; serving without authentication is one
            log.log(
                logging.WARNING if no_auth else logging.INFO,
                "Stash MCP on http://%s:%d/mcp (SSE: /sse)%s",
                host,
                port,
                "" if not no_auth else " — authentication DISABLED (--no-auth)",
            )
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
            # uvicorn shuts down gracefully on SIGINT/SIGTERM and then re-raises the signal
            # to the handler that was installed before it; a no-op handler here turns that
            # into a normal return (exit status 0) after the store is closed.
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, lambda *_: None)
            uvicorn.Server(config).run()
    finally:
        warmup.stop()
        worker.stop()
        store.close()


__all__ = ["ClientDisconnects", "RedactSessionIds", "quiet_client_disconnects", "redact_session_ids", "run"]
