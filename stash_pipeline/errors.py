"""Every failure a caller of Stash can act on, as one small class each.

    StashError
    ├── InvalidInput                 bad argument; nothing was changed
    │   ├── InvalidNamespace         slug breaks the path rules
    │   ├── EmptyContent             content/query is empty or whitespace
    │   ├── ContentTooLarge          content or metadata over STASH_MAX_CONTENT_BYTES / _METADATA_BYTES
    │   ├── ResultTooLarge           an answer over STASH_MAX_RESULT_BYTES; ask for fewer items
    │   ├── BadRow                   an imported row (table, row, column) breaks a rule
    │   └── InvalidTransition        illegal state change (hypothesis, goal, contradiction)
    ├── NotFound
    │   ├── NamespaceNotFound
    │   └── RecordNotFound           a row of some kind, or one in another namespace
    ├── Conflict                     a unique rule would be broken (duplicate)
    ├── AccessDenied                 token missing, revoked, or outside its scope
    ├── RateLimited                  too many of one action in a window; retry later
    ├── ConfigurationError           settings invalid, embedder lock mismatch, …
    │   ├── EmbeddingModelMismatch   stored vectors come from another model/dimension
    │   ├── UnsupportedServer        PostgreSQL or pgvector too old (``db/server.py``)
    │   └── ReasonerNotConfigured    a model stage ran without STASH_REASONER_MODEL
    ├── DatabaseUnavailable          cannot reach PostgreSQL (transient)
    ├── StageBusy                    another runner holds the (namespace, stage) lock
    └── ModelError
        ├── ModelUnavailable         timeouts, 5xx, 429 after retries (transient, run-level)
        ├── ModelSetupRejected       the endpoint refuses the setup: model name, key, route, format (run-level)
        ├── ModelResponseInvalid     output failed parsing/validation after retries (item-level)
        │   └── ModelRequestRejected one request refused (400/413/422) while the endpoint takes others
        └── TokenBudgetExceeded      the run's token budget is spent

The docstring of each class is its default message. Driver errors are translated in
one place (``stash_pipeline.db.translate_errors``); the MCP server and the CLI turn
these into clear messages and never show a traceback to an agent.

Messages never name a command of one surface: an error that has an obvious remedy
carries it as a ``NextStep`` (an operation and its arguments), and each surface names it
in its own terms (the MCP server the tool, ``create_namespace``; the CLI the command,
``stash namespace create /x``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: the operations a NextStep may name, with the arguments each takes; every surface that
#: renders errors has a name for each (its tests check that)
NEXT_STEP_ACTIONS: dict[str, tuple[str, ...]] = {
    "create_namespace": ("namespace",),
    "test_hypothesis": ("id",),
}


@dataclass(frozen=True)
class NextStep:
    """What the caller should do before trying again, independent of the surface in use."""

    action: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        expected = NEXT_STEP_ACTIONS.get(self.action)
        if expected is None or set(self.arguments) != set(expected):
            raise ValueError(f"unknown next step {self.action!r} with arguments {sorted(self.arguments)}")


class StashError(Exception):
    """Stash failed."""

    #: short machine-readable code used by the MCP and CLI surfaces
    code = "stash_error"
    #: whether retrying the same call later may succeed
    transient = False

    def __init__(self, message: str | None = None, *, next_step: NextStep | None = None, **details: Any) -> None:
        self.message = message or (self.__doc__ or "").strip()
        self.details = details
        #: the remedy, when there is one; surfaces append it to the message in their own terms
        self.next_step = next_step
        super().__init__(self.message)

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, **({"details": self.details} if self.details else {})}


class InvalidInput(StashError):
    """The input is not valid; nothing was changed."""

    code = "invalid_input"


class InvalidNamespace(InvalidInput):
    """Namespace paths start with '/' and use segments of [a-z0-9][a-z0-9_-]{0,63}."""

    code = "invalid_namespace"


class EmptyContent(InvalidInput):
    """Content must not be empty."""

    code = "empty_content"


class ContentTooLarge(InvalidInput):
    """Content is larger than the configured limit (STASH_MAX_CONTENT_BYTES)."""

    code = "content_too_large"


class ResultTooLarge(InvalidInput):
    """The answer is larger than STASH_MAX_RESULT_BYTES; ask for fewer items (a lower limit)."""

    code = "result_too_large"


class BadRow(InvalidInput):
    """An imported row breaks a rule of the live write path; nothing of it was written."""

    code = "bad_row"

    def __init__(self, table: str, row: str, column: str | None, why: str) -> None:
        # one line naming where, never quoting the row's content
        where = f"{table} {row}" + (f" column {column}" if column else "")
        super().__init__(f"{where}: {why}", table=table, row=row, column=column)
        self.why = why


class InvalidTransition(InvalidInput):
    """That state change is not allowed from the current state."""

    code = "invalid_transition"


class NotFound(StashError):
    """Not found."""

    code = "not_found"


class NamespaceNotFound(NotFound):
    """Namespace not found; create it first."""

    code = "namespace_not_found"

    @classmethod
    def create_first(cls, namespace: str) -> NamespaceNotFound:
        """A write's exact namespace is missing: the remedy is to create it."""
        return cls(
            f"namespace {namespace!r} not found; create it first",
            next_step=NextStep("create_namespace", {"namespace": namespace}),
            namespace=namespace,
        )


class RecordNotFound(NotFound):
    """No such record in the given namespace."""

    code = "record_not_found"


class Conflict(StashError):
    """That would duplicate an existing record."""

    code = "conflict"


class AccessDenied(StashError):
    """Access denied: the token is missing, revoked, or does not cover that namespace or right."""

    code = "access_denied"


class RateLimited(StashError):
    """Too many requests of this kind; retry later."""

    code = "rate_limited"
    transient = True


class ConfigurationError(StashError):
    """Stash is not configured correctly."""

    code = "configuration_error"


class EmbeddingModelMismatch(ConfigurationError):
    """Stored embeddings were made with another model or dimension; run `stash reembed`."""

    code = "embedding_model_mismatch"


class UnsupportedServer(ConfigurationError):
    """The PostgreSQL server or its pgvector is older than Stash supports."""

    code = "unsupported_server"


class ReasonerNotConfigured(ConfigurationError):
    """reasoner not configured: set STASH_REASONER_MODEL and STASH_OPENAI_BASE_URL to enable model stages."""

    code = "reasoner_not_configured"


class DatabaseUnavailable(StashError):
    """The database cannot be reached; is it running? (stash db status)"""

    code = "database_unavailable"
    transient = True


class StageBusy(StashError):
    """Another runner is consolidating this namespace and stage right now."""

    code = "stage_busy"
    transient = True


class ModelError(StashError):
    """The reasoning model failed."""

    code = "model_error"


class ModelUnavailable(ModelError):
    """The model endpoint is unavailable (timeouts, rate limits or server errors after retries)."""

    code = "model_unavailable"
    transient = True


class ModelSetupRejected(ModelError):
    """The model endpoint refuses the setup (model name, API key, base URL or output format); every request would fail."""

    code = "model_setup_rejected"


class ModelResponseInvalid(ModelError):
    """The model's answer could not be parsed or validated after the allowed attempts."""

    code = "model_response_invalid"


class ModelRequestRejected(ModelResponseInvalid):
    """The model endpoint rejected this request (e.g. its prompt is too long) while it takes others."""

    code = "model_request_rejected"


class ModelOutputTruncated(ModelResponseInvalid):
    """The model's answer was cut off at its max_tokens limit (finish_reason "length")."""

    code = "model_output_truncated"


class TokenBudgetExceeded(ModelError):
    """The token budget for this run is spent."""

    code = "token_budget_exceeded"
