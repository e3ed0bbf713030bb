"""The Prometheus registry of the Stash service and its counters.

One registry for the process: the MCP server records tool calls into it, the HTTP app
records refused requests into it and serves it at ``/metrics``. It lives here, below
both, so neither has to import the other to reach it.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

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
    "MCP HTTP requests answered 503 busy by admission control, by why (queue_full, expected_wait, waited).",
    ["reason"],
    registry=METRICS,
)
RUNNING = Gauge(
    "stash_http_requests_running",
    "MCP HTTP requests holding a place (STASH_HTTP_MAX_CONCURRENT per process).",
    registry=METRICS,
    multiprocess_mode="livesum",
)
WAITING = Gauge(
    "stash_http_requests_waiting",
    "MCP HTTP requests waiting for a place (at most STASH_HTTP_MAX_QUEUE per process).",
    registry=METRICS,
    multiprocess_mode="livesum",
)


__all__ = [
    "AUTH_FAILURES",
    "BUSY",
    "METRICS",
    "RUNNING",
    "TOOL_CALLS",
    "TOOL_ERRORS",
    "TOOL_LATENCY",
    "WAITING",
]
