"""How one tool call runs: the caller's scope, a worker thread, errors as results.

Every tool body is a small ``work(scope)`` function, and every tool runs it through
``ToolCalls.run``, which finds the caller's token (put in the request scope by
``stash_serve.http``; if its check is still running, waits for it to pass), runs ``work`` in a
worker thread so the event loop never waits on PostgreSQL, and turns a ``StashError``
into a tool error result ``{"error": code, "message": ...}``.

An error result carries that JSON in its text block and under ``_meta["stash/error"]``,
never as ``structuredContent``: a client validates structured content against the tool's
output schema (the TypeScript SDK's client does, and throws "Structured content does not
match the tool's output schema"), and the schema describes the answer, not the error.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
import pydantic_core
from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, TextContent

from stash_pipeline import errors
from stash_pipeline.auth import TokenInfo
from stash_pipeline.config import Settings
from stash_pipeline.store import Store
from stash_serve.limits import SlidingWindow
from stash_serve.mcp import next_steps
from stash_serve.runs import BackgroundJobs

#: the ``_meta`` key of an error result's ``{"error": code, "message": ...}``
ERROR_META_KEY = "stash/error"
#: the ASGI scope key under which stash_serve.http stores the authenticated TokenInfo
TOKEN_SCOPE_KEY = "stash.token"
#: the ASGI scope key of a token check still running alongside the request
#: (``stash_serve.token_check.Verification``): a tool's work waits for it to pass
VERIFICATION_SCOPE_KEY = "stash.token_check"


@dataclass(frozen=True)
class Scope:
    """The caller's reach: unrestricted (stdio, --no-auth) or one token's trees and rights,
    with the per-token allowance of namespaces created an hour (``CallLimits``) and the
    server's consolidation runs (``stash_serve.runs``)."""

    token: TokenInfo | None
    namespaces_created: SlidingWindow | None = None
    runs: BackgroundJobs | None = None

    def read(self, namespaces: list[str] | None) -> list[str]:
        """The read paths (as an arguments model checked them; None: the caller's default):
        without a token any path, with one only inside its trees."""
        if self.token is None:
            return namespaces or ["/"]
        if not namespaces:
            self.token.require("read")
            return list(self.token.namespaces)
        self.token.require("read", namespaces)
        return namespaces

    def write(self, namespace: str, right: str = "write") -> str:
        """The exact namespace (as an arguments model checked it) if the caller may write to it."""
        if self.token is not None:
            self.token.require(right, [namespace])
        return namespace

    def by_id(self, right: str) -> list[str] | None:
        """The ``namespaces=`` scope for by-id operations (None = unrestricted)."""
        if self.token is None:
            return None
        self.token.require(right)
        return list(self.token.namespaces)


def _request_scope(ctx: Context | None) -> dict[str, Any]:
    if ctx is None:
        return {}
    try:
        request = ctx.request_context.request
    except ValueError:
        return {}
    scope = getattr(request, "scope", None)
    return scope if isinstance(scope, dict) else {}


def token_of(ctx: Context | None) -> TokenInfo | None:
    """The TokenInfo that stash_serve.http attached to this request, if any."""
    token = _request_scope(ctx).get(TOKEN_SCOPE_KEY)
    return token if isinstance(token, TokenInfo) else None


async def verified(ctx: Context | None) -> bool:
    """False if this request's token check, still running when the call began, failed."""
    check = _request_scope(ctx).get(VERIFICATION_SCOPE_KEY)
    return check is None or await check.passed()


def to_json(value: Any) -> Any:
    """Plain JSON values (models, datetimes…) as the tools answer them."""
    return pydantic_core.to_jsonable_python(value)


def error_result(exc: errors.StashError) -> CallToolResult:
    """A tool error result carrying the error's code and message (no traceback).

    No ``structuredContent``: it would be checked against the tool's output schema (see the
    module docstring); the text block and ``_meta`` carry the code for programs.
    """
    body = next_steps.error_body(exc)
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(body, ensure_ascii=False))],
        meta={ERROR_META_KEY: body},
        is_error=True,
    )


def error_code(result: Any) -> str:
    """The error code of a tool error result built by ``error_result`` ("error" otherwise)."""
    body = (getattr(result, "meta", None) or {}).get(ERROR_META_KEY)
    return str(body.get("error", "error")) if isinstance(body, dict) else "error"


class CallLimits:
    """Per-process limits on what one token may do (see ``stash_serve.limits``)."""

    def __init__(self, settings: Settings) -> None:
        self.namespaces_created = SlidingWindow(settings.namespaces_per_token_per_hour, 3600.0)


@dataclass(frozen=True)
class ToolCalls:
    """What every tool needs: the store it works on, whether callers need a token, limits,
    and the consolidations this server runs in the background (without Dagster)."""

    store: Store
    auth: bool
    limits: CallLimits = field(init=False)
    jobs: BackgroundJobs = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "limits", CallLimits(self.store.settings))
        object.__setattr__(self, "jobs", BackgroundJobs())

    async def run(self, ctx: Context | None, work: Callable[[Scope], Any]) -> Any:
        """Run ``work(scope)`` in a worker thread; StashError → tool error result."""
        token = token_of(ctx)
        if self.auth and token is None:
            return error_result(errors.AccessDenied("access denied: a valid bearer token is required"))
        if not await verified(ctx):  # nothing runs for a token that turned out revoked
            return error_result(errors.AccessDenied("access denied: unknown or revoked token"))
        try:
            value = await anyio.to_thread.run_sync(work, Scope(token, self.limits.namespaces_created, self.jobs))
        except errors.StashError as exc:
            return error_result(exc)
        return self.result(value)

    def result(self, value: Any) -> Any:
        """The tool result, serialised once and refused when over STASH_MAX_RESULT_BYTES.

        The JSON text block (for clients that ignore structured content) is the one
        ``json.dumps`` of the answer; its size is what the cap measures. Left to itself
        the SDK would dump the answer again, pretty-printed, and validate it once more.
        """
        body = to_json(value)
        if not isinstance(body, dict):  # a non-object answer: the SDK wraps it as {"result": ...}
            return body
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        size = len(text.encode("utf-8", errors="surrogatepass"))
        limit = self.store.settings.max_result_bytes
        if size > limit:
            return error_result(
                errors.ResultTooLarge(
                    f"the answer is {size} bytes of JSON; the limit is {limit} (STASH_MAX_RESULT_BYTES): "
                    "ask for fewer items (a lower limit or a narrower namespace)"
                )
            )
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=body)


__all__ = [
    "ERROR_META_KEY",
    "TOKEN_SCOPE_KEY",
    "VERIFICATION_SCOPE_KEY",
    "Scope",
    "ToolCalls",
    "error_code",
    "error_result",
    "to_json",
    "token_of",
    "verified",
]
