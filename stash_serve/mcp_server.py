"""The Stash MCP server: every memory operation as a tool, over stdio or HTTP.

``build_server(store, auth=...)`` returns an ``MCPServer`` whose tools call the memory
library (``stash_pipeline.memory.*``) in a worker thread, so the event loop never waits
on PostgreSQL. ``run(settings, transport=...)`` serves it: stdio (local, trusted, no
token) or HTTP (``stash_serve.http``: streamable HTTP at ``/mcp``, SSE at ``/sse``,
bearer tokens, health and metrics).

Every tool answers structured JSON (snake_case, no vectors). A bad input, an unknown
id, a namespace outside the token's scope — any ``StashError`` — becomes a tool error
result (``isError``) whose text and structured content are ``{"error": code, "message":
...}``. Argument validation failures get the code ``invalid_input``; anything
unexpected is logged with its traceback on stderr and answered as ``internal_error``
without details. Nothing an agent sends can stop the server.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import anyio
import anyio.to_thread
import pydantic_core
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from stash_pipeline import errors
from stash_pipeline.auth import TokenInfo
from stash_pipeline.config import Settings
from stash_pipeline.memory import validate
from stash_pipeline.stages import STAGE_NAMES
from stash_pipeline.store import Store
from stash_serve.metrics import METRICS, TOOL_CALLS, TOOL_ERRORS, TOOL_LATENCY

log = logging.getLogger("stash.mcp")

SERVER_NAME = "stash"
#: the ASGI scope key under which stash_serve.http stores the authenticated TokenInfo
TOKEN_SCOPE_KEY = "stash.token"

INSTRUCTIONS = """\
Stash is your long-term memory across sessions. Use it so the user never has to repeat themselves.

Session protocol
1. Start: call `init` once per session (it is idempotent). Then `list_namespaces` to see what exists, \
`recall` the user's standing preferences and the topic at hand, and `recall` from /self for your own \
capabilities, limits and preferences. Call `get_context` when resuming work in a known namespace.
2. Before answering anything that may depend on earlier sessions, `recall` first. Do not guess from \
your own context window.
3. Remember durable signal only, when it happens: decisions, preferences, constraints, corrections, \
project facts, lessons. Skip narration, chit-chat, transient steps and public knowledge. Ask: will \
this matter three sessions from now? Use `remember_batch` for several items; pass an \
`idempotency_key` when a retry could duplicate a write.
4. `consolidate` after a substantial session or about ten new episodes — not after every `remember`. \
Facts, relationships, patterns and causal links exist only after consolidation; `recall` searches \
episodes and facts together right away.
5. End of session: `remember` a self-contained 2–3 sentence summary with kind "session_summary"; \
consolidate if you added a lot; `set_context` with what to pick up next if work is unfinished.

Namespaces are paths such as /users/alice or /projects/x/backend. Create one (with a description) \
before writing to it; do not dump everything into "/". Reads take one or more paths (list or comma \
string) and cover their descendants; "/" reads everything. Writes and context tools take one exact \
namespace.

/self holds your self-model: /self/capabilities (what works), /self/limits (known failure modes), \
/self/preferences (standing instructions and corrections). Write there immediately when you learn \
something about yourself, before it is lost.

Structured memory: hypotheses (create with a verification plan → test_hypothesis → confirm or \
reject; a rejection reason stops the idea coming back), goals (multi-session outcomes; completing \
all sub-goals completes the parent), failures (what failed, why, and the lesson — always include \
the lesson). resolve_contradiction acts on the facts: keep_new, keep_old, keep_both or neither. \
To forget, `recall` first and pass the stored wording to `forget` (use preview to check); purge \
erases for good.

If a tool returns an error, say so plainly, fix the input or retry once; never pretend to remember \
something you could not read or store.
"""

# --- annotations -----------------------------------------------------------------------

READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
WRITE_IDEMPOTENT = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
DESTRUCTIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)
DESTRUCTIVE_IDEMPOTENT = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)

# --- parameter types (module level: the SDK resolves annotations from module globals) ---

Namespaces = Annotated[
    list[str] | str | None,
    Field(
        description="Namespace paths to read, as a list or a comma-separated string; each covers its "
        "descendants; '/' = everything. Default: everything you may read."
    ),
]
Namespace = Annotated[str, Field(description="One exact, existing namespace path, e.g. /projects/x.")]
RootNamespace = Annotated[
    str, Field(description="One exact, existing namespace path, e.g. /projects/x (default '/', the root).")
]
Limit = Annotated[int, Field(description="Page size (1-1000).", ge=1, le=1000)]
Offset = Annotated[int, Field(description="Items to skip (for the next page use next_offset).", ge=0)]
RecordId = Annotated[int, Field(description="Record id.", ge=1)]
Confidence = Annotated[float, Field(description="Confidence between 0 and 1.", ge=0, le=1)]
OptionalText = Annotated[str | None, Field(description="Optional text.")]
Timestamp = Annotated[
    str | None, Field(description="ISO 8601 timestamp, e.g. 2026-01-31T09:00:00Z (UTC if no offset).")
]
Metadata = Annotated[
    dict[str, Any] | None, Field(description="Optional JSON object stored with the episode.")
]
IdList = Annotated[
    list[int] | str | None, Field(description="Record ids, as a list or comma-separated string.")
]


class BatchEpisode(BaseModel):
    """One episode of a remember_batch call."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(description="What happened or was learned.")
    kind: str = Field("observation", description="Episode kind, e.g. observation, decision, session_summary.")
    occurred_at: str | None = Field(None, description="ISO 8601 time it happened (default now).")
    metadata: dict[str, Any] | None = Field(None, description="Optional JSON object.")
    idempotency_key: str | None = Field(None, description="Makes a retry of this item safe.")


class Page(BaseModel):
    """A page of a list: pass ``next_offset`` as ``offset`` for the next one (null = last page)."""

    items: list[dict[str, Any]]
    limit: int
    offset: int
    next_offset: int | None


class RecallItem(BaseModel):
    """One recall result; fields that do not apply to its kind are null."""

    kind: Literal["fact", "episode"]
    id: int
    namespace: str
    content: str
    score: float
    score_parts: dict[str, float | None] | None = None
    confidence: float | None = None
    occurred_at: str | None = None
    valid_from: str | None = None
    valid_until: str | None = None
    source_episode_ids: list[int] | None = None
    metadata: dict[str, Any] | None = None
    current: bool | None = None


class RecallResult(BaseModel):
    """Facts and episodes, best first."""

    results: list[RecallItem]


# --- scope: what the caller may touch ---------------------------------------------------


@dataclass(frozen=True)
class Scope:
    """The caller's reach: unrestricted (stdio, --no-auth) or one token's trees and rights."""

    token: TokenInfo | None

    def read(self, namespaces: Any) -> list[str]:
        """Validated read paths; without a token any path, with one only inside its trees."""
        if self.token is None:
            return validate.slugs(namespaces)
        if namespaces in (None, "", []):
            self.token.require("read")
            return list(self.token.namespaces)
        paths = validate.slugs(namespaces)
        self.token.require("read", paths)
        return paths

    def write(self, namespace: Any, right: str = "write") -> str:
        """One validated exact namespace the caller may write to."""
        path = validate.slug(namespace)
        if self.token is not None:
            self.token.require(right, [path])
        return path

    def by_id(self, right: str) -> list[str] | None:
        """The ``namespaces=`` scope for by-id operations (None = unrestricted)."""
        if self.token is None:
            return None
        self.token.require(right)
        return list(self.token.namespaces)


def _token_of(ctx: Context | None) -> TokenInfo | None:
    if ctx is None:
        return None
    try:
        request = ctx.request_context.request
    except ValueError:
        return None
    scope = getattr(request, "scope", None)
    if isinstance(scope, dict):
        token = scope.get(TOKEN_SCOPE_KEY)
        if isinstance(token, TokenInfo):
            return token
    return None


# --- results ----------------------------------------------------------------------------


def _json(value: Any) -> Any:
    return pydantic_core.to_jsonable_python(value)


def error_result(exc: errors.StashError) -> CallToolResult:
    """A tool error result carrying the error's code and message (no traceback)."""
    body = exc.to_dict()
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(body, ensure_ascii=False))],
        structured_content=body,
        is_error=True,
    )


def page(items: list[Any], limit: int, offset: int) -> dict[str, Any]:
    """A paginated list result: {"items", "limit", "offset", "next_offset"}."""
    return {
        "items": _json(items),
        "limit": limit,
        "offset": offset,
        "next_offset": offset + len(items) if len(items) >= limit else None,
    }


def _validation_message(exc: ValidationError) -> str:
    # Field names and pydantic's short messages only: the rejected values are the caller's
    # data (possibly huge or binary) and would only echo back.
    parts = []
    for err in exc.errors()[:10]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "invalid arguments: " + "; ".join(parts)


class StashMCPServer(MCPServer):
    """MCPServer that turns every failure into a structured tool error and records metrics."""

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
            result = error_result(_InternalError())
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                result = error_result(errors.InvalidInput(_validation_message(exc.__cause__)))
            elif self._tool_manager.get_tool(name) is None:
                result = error_result(_UnknownTool(f"unknown tool {name[:100]!r}; call list_tools"))
            else:
                result = error_result(errors.InvalidInput(str(exc)))
        except Exception:  # the SDK should not raise anything else; never let it reach the client
            log.exception("tool %r failed unexpectedly", name)
            result = error_result(_InternalError())
        outcome = "error" if getattr(result, "is_error", False) else "ok"
        TOOL_CALLS.labels(label, outcome).inc()
        TOOL_LATENCY.labels(label).observe(time.perf_counter() - started)
        if outcome == "error":
            code = (getattr(result, "structured_content", None) or {}).get("error", "error")
            TOOL_ERRORS.labels(label, str(code)).inc()
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


class _InternalError(errors.StashError):
    """internal error: the server logged the details; try again or report it."""

    code = "internal_error"


class _UnknownTool(errors.StashError):
    """Unknown tool."""

    code = "unknown_tool"


# --- server -----------------------------------------------------------------------------


def build_server(store: Store, *, auth: bool) -> MCPServer:
    """The MCP server with every Stash tool bound to ``store``.

    With ``auth`` every tool call needs the TokenInfo that ``stash_serve.http`` puts in the
    request scope; without it (stdio, --no-auth) calls are unrestricted.
    """
    server = StashMCPServer(SERVER_NAME, title="Stash memory", instructions=INSTRUCTIONS, log_level="WARNING")

    async def call(ctx: Context | None, work: Callable[[Scope], Any]) -> Any:
        """Run ``work(scope)`` in a worker thread; StashError → tool error result."""
        token = _token_of(ctx)
        if auth and token is None:
            return error_result(errors.AccessDenied("access denied: a valid bearer token is required"))
        scope = Scope(token)
        try:
            return _json(await anyio.to_thread.run_sync(work, scope))
        except errors.StashError as exc:
            return error_result(exc)

    tool = server.tool

    # --- namespaces ---------------------------------------------------------------------
    from stash_pipeline.memory import namespaces as ns_ops

    @tool(annotations=WRITE_IDEMPOTENT)
    async def init(ctx: Context | None = None) -> dict[str, Any]:
        """Start of every session: create the /self tree (capabilities, limits, preferences) if missing. Idempotent."""

        def work(s: Scope) -> Any:
            if s.token is not None and not (s.token.has("write") and s.token.covers("/self")):
                # init opens every session, so a token without /self gets an honest answer
                # rather than an error, and nothing is written.
                return {
                    "ok": True,
                    "namespaces": [],
                    "namespaces_created": [],
                    "self_available": False,
                    "message": "this token does not cover /self with write access; the self-model is "
                    f"unavailable. You may use: {', '.join(s.token.namespaces)}",
                }
            return {**ns_ops.init_self(store), "self_available": True}

        return await call(ctx, work)

    @tool(annotations=WRITE_IDEMPOTENT)
    async def create_namespace(
        slug: Annotated[
            str, Field(description="Namespace path to create, e.g. /projects/x (parents are created too).")
        ],
        name: Annotated[str | None, Field(description="Display name (default: the path).")] = None,
        description: Annotated[str | None, Field(description="What belongs here; always give one.")] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Create a namespace and any missing parents (mkdir -p); updates name/description if it exists."""

        def work(s: Scope) -> Any:
            result = ns_ops.create(store, s.write(slug), name, description)
            namespace = result["namespace"]
            return {
                "id": namespace.id,
                "slug": namespace.slug,
                "created": result["created"],
                "namespace": namespace,
            }

        return await call(ctx, work)

    @tool(annotations=READ)
    async def list_namespaces(
        namespaces: Namespaces = None,
        limit: Limit = 100,
        offset: Offset = 0,
        ctx: Context | None = None,
    ) -> Page:
        """List namespaces (in the given trees, or all you may read), ordered by path."""

        def work(s: Scope) -> Any:
            paths = s.read(namespaces)
            return page(ns_ops.list_(store, paths, limit, offset), limit, offset)

        return await call(ctx, work)

    @tool(annotations=DESTRUCTIVE)
    async def delete_namespace(
        slug: Annotated[
            str, Field(description="Namespace path to delete, with all descendants and their records.")
        ],
        confirm: Annotated[
            # strict: a destructive switch must be a real JSON true, never "yes" or 1
            StrictBool, Field(description="False (default) only reports what would be deleted; true deletes.")
        ] = False,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Delete a namespace tree and everything in it. Call once without confirm to see the counts."""

        def work(s: Scope) -> Any:
            return ns_ops.delete(store, s.write(slug, "admin"), confirm=confirm)

        return await call(ctx, work)

    _register_memory_tools(server, store, call)
    return server


def _register_memory_tools(server: MCPServer, store: Store, call: Callable[..., Any]) -> None:
    """Episodes, recall, context, facts, graph, contradictions, hypotheses, goals, failures, admin."""
    from stash_pipeline.memory import contradictions, episodes, facts, graph

    tool = server.tool

    # --- episodes ------------------------------------------------------------------------

    @tool(annotations=WRITE)
    async def remember(
        content: Annotated[
            str, Field(description="What to remember: one durable, self-contained statement.")
        ],
        namespace: RootNamespace = "/",
        kind: Annotated[
            str,
            Field(
                description="Episode kind: observation (default), decision, preference, correction, "
                "lesson, session_summary, …"
            ),
        ] = "observation",
        metadata: Metadata = None,
        occurred_at: Timestamp = None,
        idempotency_key: Annotated[
            str | None, Field(description="Optional key; a retry with the same key returns the same episode.")
        ] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Store one episode in an exact namespace. Returns its id and whether it was new."""

        def work(s: Scope) -> Any:
            return episodes.remember(
                store,
                s.write(namespace),
                content,
                occurred_at=occurred_at,
                kind=kind,
                metadata=metadata,
                idempotency_key=idempotency_key,
            )

        return await call(ctx, work)

    @tool(annotations=WRITE)
    async def remember_batch(
        items: Annotated[list[BatchEpisode], Field(description="Episodes to store (1-1000), all or none.")],
        namespace: Namespace,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Store several episodes in one namespace atomically; one result per item, in order."""

        def work(s: Scope) -> Any:
            raw = [item.model_dump(exclude_none=True) for item in items]
            return {"results": episodes.remember_batch(store, s.write(namespace), raw)}

        return await call(ctx, work)

    @tool(annotations=READ)
    async def get_episode(
        id: RecordId,
        include_deleted: Annotated[bool, Field(description="Also return a forgotten episode.")] = False,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """One episode by id."""

        def work(s: Scope) -> Any:
            return episodes.get(store, id, s.by_id("read"), include_deleted=include_deleted)

        return await call(ctx, work)

    @tool(annotations=DESTRUCTIVE)
    async def forget(
        about: Annotated[
            str, Field(description="The stored wording of the memory to forget (recall it first).")
        ],
        namespaces: Namespaces = None,
        threshold: Annotated[
            float | None,
            Field(
                description="Minimum similarity 0-1 to match (default STASH_FORGET_THRESHOLD).", ge=0, le=1
            ),
        ] = None,
        preview: Annotated[bool, Field(description="True: only show what would be forgotten.")] = False,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Forget the one episode most similar to `about` (if similar enough); facts derived only from it are withdrawn."""

        def work(s: Scope) -> Any:
            paths = s.read(namespaces)
            if s.token is not None:
                s.token.require("write", paths)
            return episodes.forget(store, about, paths, threshold=threshold, preview=preview)

        return await call(ctx, work)

    @tool(annotations=DESTRUCTIVE_IDEMPOTENT)
    async def purge_episode(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """Erase one episode for good (row, lineage, cached embedding); derived facts are withdrawn."""

        def work(s: Scope) -> Any:
            return episodes.purge(store, id, s.by_id("write"))

        return await call(ctx, work)

    # --- recall --------------------------------------------------------------------------

    @tool(annotations=READ)
    async def recall(
        query: Annotated[str, Field(description="What you want to know, in natural language.")],
        namespaces: Namespaces = None,
        limit: Annotated[int, Field(description="Results to return (1-100).", ge=1, le=100)] = 10,
        as_of: Timestamp = None,
        include_history: Annotated[
            bool, Field(description="Also return retired (superseded, expired, withdrawn) facts.")
        ] = False,
        max_tokens: Annotated[
            int | None,
            Field(description="Optional budget: stop adding results past ~this many tokens.", ge=1),
        ] = None,
        ctx: Context | None = None,
    ) -> RecallResult:
        """Search memory: current facts and episodes ranked together (semantic + full text)."""
        from stash_pipeline.memory import recall as recall_ops

        def work(s: Scope) -> Any:
            hits = recall_ops.recall(
                store,
                query,
                s.read(namespaces),
                limit=limit,
                as_of=as_of,
                include_history=include_history,
                max_tokens=max_tokens,
            )
            if isinstance(hits, dict):
                hits = hits.get("results", [])
            return {"results": [_recall_hit(h) for h in hits]}

        return await call(ctx, work)

    # --- context -------------------------------------------------------------------------

    @tool(annotations=WRITE_IDEMPOTENT)
    async def set_context(
        focus: Annotated[str, Field(description="What you are working on and what to pick up next.")],
        namespace: Namespace,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Set the current focus of one exact namespace (replaces the previous one; expires after STASH_CONTEXT_TTL)."""
        from stash_pipeline.memory import context as context_ops

        def work(s: Scope) -> Any:
            return context_ops.set_(store, s.write(namespace), focus)

        return await call(ctx, work)

    @tool(annotations=READ)
    async def get_context(namespace: Namespace, ctx: Context | None = None) -> dict[str, Any]:
        """The current, unexpired focus of one exact namespace ({"context": null} if none)."""
        from stash_pipeline.memory import context as context_ops

        def work(s: Scope) -> Any:
            path = validate.slug(namespace)
            if s.token is not None:
                s.token.require("read", [path])
            found = context_ops.get(store, path)
            return found if isinstance(found, dict) and "context" in found else {"context": found}

        return await call(ctx, work)

    @tool(annotations=DESTRUCTIVE_IDEMPOTENT)
    async def clear_context(namespace: Namespace, ctx: Context | None = None) -> dict[str, Any]:
        """Clear the focus of one exact namespace (when the work is done or the topic changes)."""
        from stash_pipeline.memory import context as context_ops

        def work(s: Scope) -> Any:
            result = context_ops.clear(store, s.write(namespace))
            return result if isinstance(result, dict) else {"ok": True, "cleared": bool(result)}

        return await call(ctx, work)

    # --- facts ---------------------------------------------------------------------------

    @tool(annotations=READ)
    async def query_facts(
        namespaces: Namespaces = None,
        entity: Annotated[
            str | None, Field(description="Only facts about this entity (case-insensitive).")
        ] = None,
        property: Annotated[str | None, Field(description="Only facts on this property.")] = None,
        origin: Annotated[
            Literal["synthesis", "hypothesis", "failure_pattern", "asserted"] | None,
            Field(description="Only facts of this origin."),
        ] = None,
        since: Timestamp = None,
        until: Timestamp = None,
        include_history: Annotated[bool, Field(description="Include retired facts.")] = False,
        as_of: Timestamp = None,
        limit: Limit = 100,
        offset: Offset = 0,
        ctx: Context | None = None,
    ) -> Page:
        """Consolidated facts, newest first; current ones only unless include_history or as_of."""

        def work(s: Scope) -> Any:
            rows = facts.query(
                store,
                s.read(namespaces),
                entity=entity,
                property=property,
                origin=origin,
                since=since,
                until=until,
                include_history=include_history,
                as_of=as_of,
                limit=limit,
                offset=offset,
            )
            return page(rows, limit, offset)

        return await call(ctx, work)

    @tool(annotations=READ)
    async def get_fact(
        id: RecordId,
        lineage: Annotated[
            bool, Field(description="Also return its sources and what was derived from it.")
        ] = False,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """One fact by id, in any state (see current, valid_until, withdrawn_at)."""

        def work(s: Scope) -> Any:
            scope = s.by_id("read")
            if lineage:
                return facts.get_with_lineage(store, id, scope)
            return facts.get(store, id, scope)

        return await call(ctx, work)

    @tool(annotations=WRITE)
    async def assert_fact(
        content: Annotated[str, Field(description="The fact, as one self-contained statement.")],
        namespace: Namespace,
        entity: Annotated[
            str | None, Field(description="Entity it is about, e.g. 'deploy pipeline'.")
        ] = None,
        property: Annotated[str | None, Field(description="Property of the entity, e.g. 'schedule'.")] = None,
        value: Annotated[str | None, Field(description="Value of the property, e.g. 'Fridays'.")] = None,
        confidence: Confidence = 1.0,
        source_episode_ids: IdList = None,
        supersede: Annotated[
            bool,
            Field(description="True: retire current facts with the same entity+property and another value."),
        ] = False,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Record a fact you know directly (origin 'asserted'), checked against current facts on the same entity/property."""

        def work(s: Scope) -> Any:
            return facts.assert_fact(
                store,
                s.write(namespace),
                content,
                entity=entity,
                property=property,
                value=value,
                confidence=confidence,
                source_episode_ids=_ids(source_episode_ids),
                supersede=supersede,
            )

        return await call(ctx, work)

    @tool(annotations=DESTRUCTIVE_IDEMPOTENT)
    async def withdraw_fact(
        id: RecordId,
        reason: Annotated[str, Field(description="Why it is wrong or no longer true.")],
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Withdraw a fact (kept as history, never served as current); what was derived only from it is withdrawn too."""

        def work(s: Scope) -> Any:
            return facts.withdraw(store, id, reason, s.by_id("write"))

        return await call(ctx, work)

    @tool(annotations=DESTRUCTIVE_IDEMPOTENT)
    async def purge_fact(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """Erase a fact for good (row, lineage, cached embedding); its dependents are withdrawn."""

        def work(s: Scope) -> Any:
            return facts.purge(store, id, s.by_id("write"))

        return await call(ctx, work)

    # --- relationships, patterns, causal links --------------------------------------------

    @tool(annotations=READ)
    async def query_relationships(
        namespaces: Namespaces = None,
        entity: Annotated[
            str | None, Field(description="Only relationships with this entity at either end.")
        ] = None,
        relation_type: Annotated[
            str | None, Field(description="Only this relation, e.g. depends_on.")
        ] = None,
        include_withdrawn: Annotated[bool, Field(description="Include withdrawn relationships.")] = False,
        limit: Limit = 100,
        offset: Offset = 0,
        ctx: Context | None = None,
    ) -> Page:
        """Entity relationships (from --type--> to) found by consolidation."""

        def work(s: Scope) -> Any:
            rows = graph.query_relationships(
                store,
                s.read(namespaces),
                entity=entity,
                relation_type=relation_type,
                include_withdrawn=include_withdrawn,
                limit=limit,
                offset=offset,
            )
            return page(rows, limit, offset)

        return await call(ctx, work)

    @tool(annotations=READ)
    async def query_patterns(
        namespaces: Namespaces = None,
        include_withdrawn: Annotated[bool, Field(description="Include withdrawn patterns.")] = False,
        limit: Limit = 100,
        offset: Offset = 0,
        ctx: Context | None = None,
    ) -> Page:
        """Recurring patterns found by consolidation, with the fact and relationship ids each one cites."""

        def work(s: Scope) -> Any:
            rows = graph.query_patterns(
                store, s.read(namespaces), include_withdrawn=include_withdrawn, limit=limit, offset=offset
            )
            return page(rows, limit, offset)

        return await call(ctx, work)

    @tool(annotations=READ)
    async def list_causal_links(
        namespaces: Namespaces = None,
        include_withdrawn: Annotated[bool, Field(description="Include withdrawn links.")] = False,
        limit: Limit = 100,
        offset: Offset = 0,
        ctx: Context | None = None,
    ) -> Page:
        """Causal links (cause fact → effect fact or failure), oldest first."""

        def work(s: Scope) -> Any:
            rows = graph.list_causal_links(
                store, s.read(namespaces), include_withdrawn=include_withdrawn, limit=limit, offset=offset
            )
            return page(rows, limit, offset)

        return await call(ctx, work)

    @tool(annotations=WRITE)
    async def create_causal_link(
        cause_id: Annotated[int, Field(description="Id of the cause fact.", ge=1)],
        effect_id: Annotated[
            int | None, Field(description="Id of the effect fact (or give effect_failure_id).", ge=1)
        ] = None,
        effect_failure_id: Annotated[int | None, Field(description="Id of the effect failure.", ge=1)] = None,
        confidence: Confidence = 0.8,
        namespace: RootNamespace = "/",
        rationale: OptionalText = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Assert that one fact causes another fact or a failure; both must be current and in the namespace's tree."""

        def work(s: Scope) -> Any:
            return graph.create_causal_link(
                store,
                s.write(namespace),
                cause_id,
                effect_id=effect_id,
                effect_failure_id=effect_failure_id,
                confidence=confidence,
                rationale=rationale,
            )

        return await call(ctx, work)

    @tool(annotations=READ)
    async def trace_causal_chain(
        fact_id: Annotated[int, Field(description="Fact to start from.", ge=1)],
        direction: Annotated[
            Literal["forward", "backward"],
            Field(description="forward = effects of the fact; backward = its causes."),
        ] = "forward",
        max_depth: Annotated[int, Field(description="Maximum chain length (1-25).", ge=1, le=25)] = 10,
        namespaces: Namespaces = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Follow causal links from a fact (cycle-safe, depth-capped, within the namespace tree)."""

        def work(s: Scope) -> Any:
            paths = None if (s.token is None and namespaces in (None, "", [])) else s.read(namespaces)
            steps = graph.trace_causal_chain(
                store, fact_id, direction=direction, max_depth=max_depth, namespaces=paths
            )
            return {"fact_id": fact_id, "direction": direction, "steps": steps}

        return await call(ctx, work)

    @tool(annotations=DESTRUCTIVE_IDEMPOTENT)
    async def delete_causal_link(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """Delete a causal link."""

        def work(s: Scope) -> Any:
            return graph.delete_causal_link(store, id, s.by_id("write"))

        return await call(ctx, work)

    # --- contradictions ------------------------------------------------------------------

    @tool(annotations=READ)
    async def list_contradictions(
        namespaces: Namespaces = None,
        include_resolved: Annotated[bool, Field(description="Also list resolved ones.")] = False,
        limit: Limit = 100,
        offset: Offset = 0,
        ctx: Context | None = None,
    ) -> Page:
        """Contradictions between facts, newest first (unresolved only by default)."""

        def work(s: Scope) -> Any:
            rows = contradictions.list_(
                store, s.read(namespaces), include_resolved=include_resolved, limit=limit, offset=offset
            )
            return page(rows, limit, offset)

        return await call(ctx, work)

    @tool(annotations=DESTRUCTIVE)
    async def resolve_contradiction(
        id: RecordId,
        resolution: Annotated[
            Literal[
                "keep_new",
                "keep_old",
                "keep_both",
                "neither",
                "new_value_correct",
                "old_value_correct",
                "both_correct",
                "neither_correct",
            ],
            Field(
                description="keep_new (old fact retired), keep_old (new fact retired), keep_both, or neither "
                "(both withdrawn). The reference's *_correct names are accepted too."
            ),
        ],
        note: OptionalText = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Resolve a contradiction by acting on its two facts."""
        action = _RESOLUTIONS.get(resolution, resolution)

        def work(s: Scope) -> Any:
            return contradictions.resolve(store, id, action, note=note, namespaces=s.by_id("write"))

        return await call(ctx, work)

    _register_structured_tools(server, store, call)


_RESOLUTIONS = {
    "new_value_correct": "keep_new",
    "old_value_correct": "keep_old",
    "both_correct": "keep_both",
    "neither_correct": "neither",
}


def _register_structured_tools(server: MCPServer, store: Store, call: Callable[..., Any]) -> None:
    """Hypotheses, goals, failures, consolidation and stats."""
    tool = server.tool

    # --- hypotheses ----------------------------------------------------------------------

    def hyp() -> Any:
        from stash_pipeline.memory import hypotheses

        return hypotheses

    @tool(annotations=READ)
    async def list_hypotheses(
        namespaces: Namespaces = None,
        status: Annotated[
            Literal["proposed", "testing", "confirmed", "rejected"] | None,
            Field(description="Only this status."),
        ] = None,
        limit: Limit = 100,
        offset: Offset = 0,
        ctx: Context | None = None,
    ) -> Page:
        """Hypotheses, most recently updated first."""

        def work(s: Scope) -> Any:
            return page(
                hyp().list_(store, s.read(namespaces), status=status, limit=limit, offset=offset),
                limit,
                offset,
            )

        return await call(ctx, work)

    @tool(annotations=WRITE)
    async def create_hypothesis(
        content: Annotated[str, Field(description="The belief to test, as one statement.")],
        verification_plan: Annotated[
            str, Field(description="How it will be confirmed or refuted (required).")
        ],
        confidence: Confidence = 0.5,
        namespace: RootNamespace = "/",
        source_fact_ids: IdList = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Propose a hypothesis (status proposed). Then test_hypothesis → confirm_hypothesis or reject_hypothesis."""

        def work(s: Scope) -> Any:
            return hyp().create(
                store,
                s.write(namespace),
                content,
                verification_plan,
                confidence=confidence,
                source_fact_ids=_ids(source_fact_ids),
            )

        return await call(ctx, work)

    @tool(annotations=READ)
    async def show_hypothesis(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """One hypothesis with its evidence log."""

        def work(s: Scope) -> Any:
            return hyp().show(store, id, namespaces=s.by_id("read"))

        return await call(ctx, work)

    @tool(annotations=WRITE_IDEMPOTENT)
    async def test_hypothesis(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """Start testing a hypothesis (proposed → testing); needed before confirm_hypothesis."""

        def work(s: Scope) -> Any:
            return hyp().test(store, id, namespaces=s.by_id("write"))

        return await call(ctx, work)

    @tool(annotations=WRITE)
    async def refine_hypothesis(
        id: RecordId,
        content: OptionalText = None,
        verification_plan: OptionalText = None,
        confidence: Annotated[float | None, Field(description="New confidence 0-1.", ge=0, le=1)] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Reword a hypothesis, its plan or confidence (a testing one goes back to proposed)."""

        def work(s: Scope) -> Any:
            return hyp().refine(
                store,
                id,
                content=content,
                verification_plan=verification_plan,
                confidence=confidence,
                namespaces=s.by_id("write"),
            )

        return await call(ctx, work)

    @tool(annotations=WRITE)
    async def confirm_hypothesis(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """Confirm a hypothesis under test; it becomes a fact (origin hypothesis). Returns both."""

        def work(s: Scope) -> Any:
            return hyp().confirm(store, id, namespaces=s.by_id("write"))

        return await call(ctx, work)

    @tool(annotations=WRITE)
    async def reject_hypothesis(
        id: RecordId,
        reason: Annotated[
            str | None, Field(description="Why it is false; keeps it from being re-proposed.")
        ] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Reject a proposed or testing hypothesis (final)."""

        def work(s: Scope) -> Any:
            return hyp().reject(store, id, reason=reason, namespaces=s.by_id("write"))

        return await call(ctx, work)

    @tool(annotations=DESTRUCTIVE_IDEMPOTENT)
    async def delete_hypothesis(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """Delete a hypothesis."""

        def work(s: Scope) -> Any:
            return hyp().delete(store, id, namespaces=s.by_id("write"))

        return await call(ctx, work)

    # --- goals ---------------------------------------------------------------------------

    def goals() -> Any:
        from stash_pipeline.memory import goals as goal_ops

        return goal_ops

    @tool(annotations=READ)
    async def list_goals(
        namespaces: Namespaces = None,
        status: Annotated[
            Literal["active", "completed", "abandoned"] | None, Field(description="Only this status.")
        ] = None,
        parent_id: Annotated[
            int | None, Field(description="Only direct sub-goals of this goal.", ge=1)
        ] = None,
        top_level_only: Annotated[bool, Field(description="Only goals without a parent.")] = False,
        limit: Limit = 100,
        offset: Offset = 0,
        ctx: Context | None = None,
    ) -> Page:
        """Goals (sub-goals included unless top_level_only), highest priority first, then oldest."""

        def work(s: Scope) -> Any:
            rows = goals().list_(
                store,
                s.read(namespaces),
                status=status,
                parent_id=parent_id,
                top_level_only=top_level_only,
                limit=limit,
                offset=offset,
            )
            return page(rows, limit, offset)

        return await call(ctx, work)

    @tool(annotations=WRITE)
    async def create_goal(
        content: Annotated[str, Field(description="The outcome to reach (spans several sessions).")],
        parent_id: Annotated[
            int | None, Field(description="Parent goal (same namespace tree).", ge=1)
        ] = None,
        priority: Annotated[int, Field(description="Higher comes first.", ge=-1000, le=1000)] = 0,
        namespace: RootNamespace = "/",
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Create a goal, optionally under a parent goal."""

        def work(s: Scope) -> Any:
            return goals().create(store, s.write(namespace), content, parent_id=parent_id, priority=priority)

        return await call(ctx, work)

    @tool(annotations=READ)
    async def show_goal(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """One goal with its sub-goal counts and notes."""

        def work(s: Scope) -> Any:
            return goals().show(store, id, namespaces=s.by_id("read"))

        return await call(ctx, work)

    @tool(annotations=WRITE)
    async def update_goal(
        id: RecordId,
        content: OptionalText = None,
        priority: Annotated[
            int | None, Field(description="New priority (0 allowed).", ge=-1000, le=1000)
        ] = None,
        note: Annotated[str | None, Field(description="A progress note to append.")] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Change a goal's text or priority, or append a progress note."""

        def work(s: Scope) -> Any:
            return goals().update(
                store, id, content=content, priority=priority, note=note, namespaces=s.by_id("write")
            )

        return await call(ctx, work)

    @tool(annotations=WRITE)
    async def complete_goal(
        id: RecordId,
        notes: Annotated[
            str | None, Field(description="Optional closing note (appended, never overwrites).")
        ] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Complete an active goal; a parent whose sub-goals are all done completes too."""

        def work(s: Scope) -> Any:
            return goals().complete(store, id, note=notes, namespaces=s.by_id("write"))

        return await call(ctx, work)

    @tool(annotations=WRITE)
    async def abandon_goal(
        id: RecordId,
        notes: Annotated[str | None, Field(description="Why it was abandoned (appended as a note).")] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Abandon an active goal (sub-goals are not touched)."""

        def work(s: Scope) -> Any:
            return goals().abandon(store, id, note=notes, namespaces=s.by_id("write"))

        return await call(ctx, work)

    @tool(annotations=DESTRUCTIVE_IDEMPOTENT)
    async def delete_goal(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """Delete a goal and its sub-goals."""

        def work(s: Scope) -> Any:
            return goals().delete(store, id, namespaces=s.by_id("write"))

        return await call(ctx, work)

    # --- failures ------------------------------------------------------------------------

    def failures() -> Any:
        from stash_pipeline.memory import failures as failure_ops

        return failure_ops

    @tool(annotations=READ)
    async def list_failures(
        namespaces: Namespaces = None,
        goal_id: Annotated[int | None, Field(description="Only failures of this goal.", ge=1)] = None,
        limit: Limit = 100,
        offset: Offset = 0,
        ctx: Context | None = None,
    ) -> Page:
        """Recorded failures, newest first."""

        def work(s: Scope) -> Any:
            rows = failures().list_(store, s.read(namespaces), goal_id=goal_id, limit=limit, offset=offset)
            return page(rows, limit, offset)

        return await call(ctx, work)

    @tool(annotations=WRITE)
    async def create_failure(
        content: Annotated[str, Field(description="What was tried and failed.")],
        reason: Annotated[str, Field(description="Why it failed.")],
        lesson: Annotated[str, Field(description="What to do differently next time.")],
        goal_id: Annotated[int | None, Field(description="Goal it belongs to.", ge=1)] = None,
        namespace: RootNamespace = "/",
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Record a failed approach with its reason and lesson."""

        def work(s: Scope) -> Any:
            return failures().create(store, s.write(namespace), content, reason, lesson, goal_id=goal_id)

        return await call(ctx, work)

    @tool(annotations=READ)
    async def show_failure(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """One failure by id."""

        def work(s: Scope) -> Any:
            return failures().show(store, id, namespaces=s.by_id("read"))

        return await call(ctx, work)

    @tool(annotations=DESTRUCTIVE_IDEMPOTENT)
    async def delete_failure(id: RecordId, ctx: Context | None = None) -> dict[str, Any]:
        """Delete a failure (its lesson is lost; prefer keeping failures)."""

        def work(s: Scope) -> Any:
            return failures().delete(store, id, namespaces=s.by_id("write"))

        return await call(ctx, work)

    # --- consolidation, stats ------------------------------------------------------------

    @tool(annotations=WRITE)
    async def consolidate(
        namespaces: Namespaces = None,
        stage: Annotated[
            str | None, Field(description=f"Run only this stage (default: all): {', '.join(STAGE_NAMES)}.")
        ] = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Run consolidation now over the namespace trees (turns episodes into facts, links, patterns…)."""

        def work(s: Scope) -> Any:
            if stage is not None and stage not in STAGE_NAMES:
                raise errors.InvalidInput(
                    f"unknown stage {stage[:64]!r}; use one of {', '.join(STAGE_NAMES)}"
                )
            consolidation = _consolidation()
            paths = s.read(namespaces)
            if s.token is not None:
                s.token.require("write", paths)
            # a tree inside another selected tree is already covered by it
            roots = [
                p for p in paths if not any(q != p and (q == "/" or p.startswith(q + "/")) for q in paths)
            ]
            kwargs = {"stages": [stage]} if stage else {}
            reports: list[Any] = []
            for path in roots:
                reports.extend(consolidation.run_tree(store, path, **kwargs))
            return {"reports": reports}

        return await call(ctx, work)

    @tool(annotations=READ)
    async def consolidation_status(
        namespaces: Namespaces = None,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Per namespace and stage: cursor, backlog, last run and dead letters."""

        def work(s: Scope) -> Any:
            result = _consolidation().status(store, s.read(namespaces))
            return result if isinstance(result, dict) else {"items": result}

        return await call(ctx, work)

    @tool(annotations=READ)
    async def stats(namespaces: Namespaces = None, ctx: Context | None = None) -> dict[str, Any]:
        """Counts of episodes, facts, links, hypotheses, goals, failures… in the namespace trees."""
        from stash_pipeline.memory import admin

        def work(s: Scope) -> Any:
            return admin.stats(store, s.read(namespaces))

        return await call(ctx, work)


def _consolidation() -> Any:
    try:
        from stash_pipeline import consolidation
    except ImportError:
        raise errors.ConfigurationError("consolidation not available yet in this build") from None
    return consolidation


def _ids(value: Any) -> list[int] | None:
    if value in (None, "", []):
        return None
    items = value.split(",") if isinstance(value, str) else value
    return [validate.record_id(item.strip() if isinstance(item, str) else item, "id") for item in items]


_RECALL_KEYS = (
    "kind",
    "id",
    "namespace",
    "content",
    "score",
    "confidence",
    "occurred_at",
    "valid_from",
    "valid_until",
    "source_episode_ids",
    "metadata",
)


def _recall_hit(hit: Any) -> dict[str, Any]:
    """One recall result in the documented shape (absent fields null, extra parts kept)."""
    data = _json(hit)
    out = {key: data.get(key) for key in _RECALL_KEYS}
    for key, value in data.items():
        if key not in out and key != "embedding":
            out[key] = value
    return out


# --- running ----------------------------------------------------------------------------


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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
) -> None:
    """Serve MCP over stdio or HTTP until Ctrl-C / SIGTERM; one Store (one pool) per process."""
    if transport not in ("stdio", "http"):
        raise errors.ConfigurationError(f"unknown transport {transport!r}; use stdio or http")
    if transport == "http" and no_auth and not _is_loopback(host):
        raise errors.ConfigurationError(
            f"--no-auth is only allowed on a loopback host (127.0.0.1, ::1, localhost), not {host!r}; "
            "create a token with `stash token create` instead"
        )
    _configure_logging(settings)
    store = Store.open(settings)
    try:
        if transport == "stdio":
            server = build_server(store, auth=False)

            def _terminate(signum: int, frame: Any) -> None:
                raise KeyboardInterrupt

            signal.signal(signal.SIGTERM, _terminate)
            try:
                anyio.run(server.run_stdio_async)
            except KeyboardInterrupt:
                pass
        else:
            import uvicorn

            from stash_serve.http import build_app

            server = build_server(store, auth=not no_auth)
            app = build_app(store, server, auth=not no_auth, host=host)
            log.warning(
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
            )
            # uvicorn shuts down gracefully on SIGINT/SIGTERM and then re-raises the signal
            # to the handler that was installed before it; a no-op handler here turns that
            # into a normal return (exit status 0) after the store is closed.
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, lambda *_: None)
            uvicorn.Server(config).run()
    finally:
        store.close()


def main(argv: list[str] | None = None) -> None:
    """`python -m stash_serve.mcp_server [stdio|http] [--host H] [--port P] [--no-auth]` (the CLI wraps this)."""
    import argparse

    from stash_pipeline.config import load_settings

    parser = argparse.ArgumentParser(prog="python -m stash_serve.mcp_server", description=main.__doc__)
    parser.add_argument("transport", nargs="?", default="stdio", choices=["stdio", "http"])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--no-auth", action="store_true")
    args = parser.parse_args(argv)
    try:
        run(load_settings(), transport=args.transport, host=args.host, port=args.port, no_auth=args.no_auth)
    except errors.StashError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt:  # interrupted while starting, before the signal handlers were set
        raise SystemExit(130) from None


if __name__ == "__main__":
    # Run the imported module, not this __main__ copy: stash_serve.http reads the metrics
    # registry of stash_serve.mcp_server, which must be the one the tools record into.
    from stash_serve.mcp_server import main as _main

    _main()


__all__ = ["INSTRUCTIONS", "METRICS", "Scope", "build_server", "error_result", "run"]
