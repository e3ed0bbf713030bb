"""The Prometheus registry of the Stash service and its counters.

One registry for the process: the MCP server records tool calls into it, the HTTP app
records refused requests into it and serves it at ``/metrics``. It lives here, below
both, so neither has to import the other to reach it.

With several worker processes (``stash serve mcp --workers``) each records into files of
its own under ``PROMETHEUS_MULTIPROC_DIR`` (prometheus_client's multiprocess mode, which
the supervisor turns on for its workers, ``stash_serve.workers``), and ``exposition``
answers with the sum over every worker, whichever worker a scrape reaches.
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

#: set by the worker supervisor for its workers: the directory of their metric files
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

METRICS = CollectorRegistry(auto_describe=True)

TOOL_CALLS = Counter(
    "stash_mcp_tool_calls_total",
    "MCP tool calls by tool and outcome (ok, error).",
    ["tool", "outcome"],
    registry=METRICS,
)
TOOL_ERRORS = Counter(
    "stash_mcp_tool_errors_total",
    "MCP tool errors by tool and error code.",
    ["tool", "code"],
    registry=METRICS,
)
TOOL_LATENCY = Histogram(
    "stash_mcp_tool_duration_seconds",
    "MCP tool call latency in seconds.",
    ["tool"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
    registry=METRICS,
)
AUTH_FAILURES = Counter(
    "stash_http_auth_failures_total",
    "MCP HTTP requests refused before the MCP layer, by status.",
    ["status"],
    registry=METRICS,
)
BUSY = Counter(
    "stash_http_busy_total",
    "MCP HTTP requests answered 503 busy, by why: admission control (queue_full, expected_wait, waited) "
    "or no connection for the token check in time (token_check).",
    ["reason"],
    registry=METRICS,
)
RUNNING = Gauge(
    "stash_http_requests_running",
    "MCP HTTP requests holding a place (STASH_HTTP_MAX_CONCURRENT per process), all workers.",
    registry=METRICS,
    multiprocess_mode="livesum",
)
WAITING = Gauge(
    "stash_http_requests_waiting",
    "MCP HTTP requests waiting for a place (at most STASH_HTTP_MAX_QUEUE per process), all workers.",
    registry=METRICS,
    multiprocess_mode="livesum",
)


def exposition() -> bytes:
    """The Prometheus text of this process, or of every worker in multiprocess mode."""
    directory = os.environ.get(MULTIPROC_ENV)
    if not directory:
        return generate_latest(METRICS)
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=directory)
    return generate_latest(registry)


__all__ = [
    "AUTH_FAILURES",
    "BUSY",
    "METRICS",
    "MULTIPROC_ENV",
    "RUNNING",
    "TOOL_CALLS",
    "TOOL_ERRORS",
    "TOOL_LATENCY",
    "WAITING",
    "exposition",
]
