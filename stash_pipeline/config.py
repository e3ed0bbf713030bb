"""Settings: one pydantic-settings model, prefix ``STASH_``, read at start-up only.

Values come from the environment, then a ``.env`` file in the working directory (or the
file named by ``STASH_ENV_FILE``). Nothing here is read at import time: call
``load_settings()`` where a process starts. Secrets are ``SecretStr`` and never printed.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from stash_pipeline.errors import ConfigurationError


class Settings(BaseSettings):
    """Every knob of Stash, from STASH_* variables or a .env file, with its default."""

    model_config = SettingsConfigDict(
        env_prefix="STASH_", env_file=".env", extra="ignore", frozen=True, env_ignore_empty=True
    )

    # --- storage -------------------------------------------------------------------
    database_url: str | None = Field(None, description="PostgreSQL DSN; unset = embedded server under STASH_HOME")
    home: Path = Field(Path("~/.stash"), description="data directory (embedded database, tokens, logs)")
    db_port: int = Field(54320, ge=1, le=65535, description="port of the embedded PostgreSQL on 127.0.0.1")
    db_pool_max: int = Field(10, ge=1, le=200, description="connections per process pool")
    db_timeout_s: float = Field(
        5.0, gt=0, le=300,
        description="seconds a call waits for a database connection before failing with database_unavailable",
    )
    db_budget_replicas: int = Field(
        1, ge=1, le=1000,
        description="MCP service processes sharing the database server, for the connection-budget check at start-up",
    )
    db_budget_runs: int = Field(
        8, ge=0, le=10_000,
        description="Dagster runs at once (dagster.yaml max_concurrent_runs), for the connection-budget check",
    )

    # --- embeddings ----------------------------------------------------------------
    embedder: Literal["minilm", "minilm-onnx", "minilm-int8", "minilm-static", "e5-small", "hash", "openai"] = Field(
        "minilm-int8",
        description=(
            "embedding backend: minilm-int8 (all-MiniLM-L6-v2, int8, ONNX Runtime), minilm (numpy), "
            "minilm-onnx (the numpy vectors, ONNX Runtime), minilm-static (token table), e5-small (multilingual-e5-small, "
            "4-bit, about 100 languages; the multilingual extra), hash, openai"
        ),
    )
    embedding_model: str | None = Field(None, description="model name for the openai embedder")
    vector_dim: int = Field(384, ge=1, le=2000, description="embedding dimension (HNSW allows at most 2000)")
    embedding_batch_size: int = Field(64, ge=1, le=2048)
    embed_on_write: Literal["auto", "sync", "async"] = Field(
        "auto",
        description="when a new text's vector is computed: sync = before remember commits; async = after, by "
        "the service's pending-vector worker; auto = async in the service when the embedder's forward pass "
        "exceeds STASH_EMBED_SYNC_BUDGET_MS, sync elsewhere",
    )
    embed_sync_budget_ms: float = Field(
        1.0, ge=0, le=60_000,
        description="auto: the longest warm forward pass of one short text that remember may wait for "
        "(a sync new-text remember costs about 3-4x the forward pass: tokenising, the cache write)",
    )
    embed_pending_interval_s: float = Field(
        5.0, gt=0, le=3600,
        description="seconds between the pending-vector worker's sweeps for rows no write announced "
        "(left by another or a dead process)",
    )
    embed_pending_delay_s: float = Field(
        0.0, ge=0, le=3600,
        description="seconds the pending-vector worker waits after a wake-up before embedding "
        "(gathers a bigger batch; 0 = at once)",
    )

    # --- model endpoint (OpenAI-compatible) ----------------------------------------
    openai_base_url: str | None = Field(None, description="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1")
    openai_api_key: SecretStr | None = Field(None, description="API key (any value for local servers)")
    reasoner_model: str | None = Field(None, description="chat model for consolidation; unset = model stages idle")
    reasoner_structured: Literal["auto", "json_schema", "json_object", "none"] = "auto"
    reasoner_timeout_s: float = Field(60.0, gt=0)
    reasoner_max_attempts: int = Field(2, ge=1, le=10, description="attempts per call when output is invalid")
    reasoner_max_retries: int = Field(3, ge=0, le=10, description="retries on 429/5xx/timeouts, with backoff")
    reasoner_token_budget: int | None = Field(None, ge=1, description="max tokens per consolidation run")
    reasoner_backoff_s: float = Field(1.0, ge=0, le=60, description="first retry backoff (doubles per retry)")
    reasoner_max_output_tokens: int = Field(1024, ge=16, le=65536, description="max_tokens cap of one model call")
    reasoner_concurrency: int = Field(1, ge=1, le=64, description="model requests in flight per endpoint")

    # --- reranking (optional) ------------------------------------------------------
    rerank_url: str | None = Field(
        None,
        description="a reranking endpoint recall sends its best candidates to: TEI's /rerank, or the /v1/rerank "
        "of llama.cpp, vLLM, Jina or Cohere; unset = recall's own order",
    )
    rerank_model: str | None = Field(None, description="model name sent to a /v1/rerank endpoint")
    rerank_api_key: SecretStr | None = Field(None, description="bearer key for the reranking endpoint")
    rerank_candidates: int = Field(30, ge=2, le=200, description="recall's best candidates the reranker reorders")
    rerank_timeout_s: float = Field(
        2.0, gt=0, le=60, description="longest wait for the reranker; past it (or on an error) recall keeps its order"
    )

    # --- orchestration -------------------------------------------------------------
    dagster_url: str | None = Field(
        None,
        description="Dagster webserver; consolidate submits runs there (unset = the one `stash up` started, if any)",
    )
    dagster_token: SecretStr | None = Field(
        None,
        description="admin token consolidate presents to the guarded Dagster UI (unset = $STASH_HOME/admin-token)",
    )

    # --- memory --------------------------------------------------------------------
    max_content_bytes: int = Field(10_000, ge=1, le=1_000_000)
    max_metadata_bytes: int = Field(
        16_384, ge=2, le=1_000_000, description="largest metadata object of an episode, bytes of JSON"
    )
    context_ttl: timedelta = Field(timedelta(hours=1), description="lifetime of a context focus")
    forget_threshold: float = Field(0.75, ge=0, le=1, description="min similarity for forget to match")

    # --- consolidation ---------------------------------------------------------
    consolidation_batch_size: int = Field(100, ge=1, le=10_000, description="episodes per facts batch")
    consolidation_similarity_threshold: float = Field(0.85, gt=0, le=1, description="episode clustering")
    consolidation_dedup_threshold: float = Field(0.95, gt=0, le=1, description="fact dedup similarity")
    entity_same_threshold: float = Field(
        0.90, gt=0, le=1, description="name similarity at which a new name is a known entity without asking"
    )
    entity_check_threshold: float = Field(
        0.75, gt=0, le=1, description="name similarity from which the model is asked whether two names are one entity"
    )
    consolidation_window: timedelta = Field(timedelta(hours=168), description="decay window")
    decay_factor: float = Field(0.95, gt=0, lt=1)
    expiry_threshold: float = Field(0.1, ge=0, lt=1)
    hypothesis_auto_confirm_threshold: float = Field(0.9, gt=0, le=1)
    hypothesis_auto_reject_threshold: float = Field(0.9, gt=0, le=1)
    contradiction_supersede_threshold: float = Field(0.9, gt=0, le=1)
    multi_valued_properties: str = Field(
        "likes,dislikes,loves,hates,knows,friends,speaks,skills,hobbies,interests,member_of,tags,visited,owns,uses",
        description="comma-separated properties that hold several values at once (no timeline, no contradictions); "
        "every other property has one value at a time",
    )
    facts_batch_size: int = Field(50, ge=1, le=1000, description="facts per batch for fact-driven stages")
    relationships_facts_per_call: int = Field(10, ge=1, le=100)
    facts_clusters_per_call: int = Field(8, ge=1, le=50, description="episode clusters per facts-stage call")
    max_item_attempts: int = Field(3, ge=1, le=100, description="attempts before an item is dead-lettered")

    # --- service -------------------------------------------------------------------
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    max_result_bytes: int = Field(
        1_048_576, ge=1024, le=64 * 1_048_576,
        description="largest MCP tool result, bytes of JSON; a larger answer is refused (ask for fewer items)",
    )
    toolsets: str = Field(
        "default",
        description="MCP tools offered: default, all, or toolset names, comma-separated (default,graph); see `stash tools`",
    )
    namespaces_per_token_per_hour: int = Field(
        100, ge=1, le=1_000_000, description="namespaces one API token may create per hour (MCP over HTTP)"
    )
    auth_failures_per_minute: int = Field(
        30, ge=1, le=1_000_000,
        description="failed checks of one bearer token from one client address per minute before that pair is "
        "answered 429 (an address trying many tokens gets ten times this)",
    )
    auth_negative_cache_s: float = Field(
        30.0, ge=0, le=3600, description="seconds an unknown bearer token is remembered as unknown (0 = off)"
    )
    trusted_proxies: str = Field(
        "", description="comma-separated addresses or networks whose X-Forwarded-For/-Proto are believed "
        "(a reverse proxy in front of `stash serve mcp`); default none: the client is the TCP peer",
    )
    http_max_header_bytes: int = Field(
        65_536, ge=4096, le=16 * 1_048_576, description="largest HTTP request head (line + headers); larger: 431"
    )
    http_max_body_bytes: int = Field(
        32 * 1_048_576, ge=65_536, le=1024 * 1_048_576,
        description="largest HTTP request body; larger: 413 request_too_large. The default fits a remember_batch "
        "of 1000 items at the default content and metadata limits (about 26 MB of plain JSON)",
    )
    http_header_timeout_s: float = Field(
        10.0, gt=0, le=3600, description="seconds a client may take to send a request's head before it is cut off"
    )
    http_body_timeout_s: float = Field(
        30.0, gt=0, le=3600, description="seconds a client may pause while sending a request body before it is cut off"
    )
    http_body_deadline_s: float = Field(
        10.0, gt=0, le=3600,
        description="seconds a request body may take in all, from the end of its head, plus 1 s per "
        "STASH_HTTP_BODY_MIN_RATE bytes received; a body still arriving then is cut off with 408",
    )
    http_body_min_rate: int = Field(
        65_536, ge=1, le=1024 * 1_048_576,
        description="bytes of request body that earn it another second (STASH_HTTP_BODY_DEADLINE_S): a client "
        "sending at least this fast is never cut off by the deadline",
    )
    http_max_requests_per_token: int = Field(
        32, ge=1, le=100_000,
        description="requests one bearer token may have in flight at once (an open SSE stream counts); "
        "one more waits up to 2 s for one to finish, then is answered 429 with Retry-After: 1",
    )
    auth_guess_lookups_per_second: float = Field(
        10.0, gt=0, le=100_000,
        description="token lookups a second, one at a time, for a client address over its failed-check budget "
        "(ten times STASH_AUTH_FAILURES_PER_MINUTE a minute); its other requests wait their turn, none is refused",
    )
    http_workers: int | None = Field(
        None, ge=1, le=256,
        description="worker processes of `stash serve mcp --transport http`, sharing its port (--workers); "
        "unset = one per usable CPU, at most 4, as many as the connection budget fits",
    )
    http_max_concurrent: int | None = Field(
        None, ge=1, le=10_000,
        description="MCP requests over HTTP running at once in one server process; unset = STASH_DB_POOL_MAX",
    )
    http_max_queue: int | None = Field(
        None, ge=0, le=100_000,
        description="MCP requests over HTTP waiting for a place in one server process; one more is answered "
        "503 busy with Retry-After at once; unset = 4 x STASH_HTTP_MAX_CONCURRENT",
    )
    http_queue_timeout_s: float = Field(
        2.0, gt=0, le=300,
        description="seconds from an MCP request's arrival over HTTP within which it is answered or refused "
        "503 busy: one whose wait for a place and then its call (at the recent service time) would end "
        "later is refused at once, one still waiting when only its call's time is left, then; a burst "
        "of quick calls passes",
    )

    @field_validator("context_ttl", "consolidation_window", mode="before")
    @classmethod
    def _duration(cls, value: object) -> object:
        return parse_duration(value) if isinstance(value, str) else value

    @field_validator("home", mode="after")
    @classmethod
    def _expand_home(cls, value: Path) -> Path:
        return value.expanduser()

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if self.consolidation_similarity_threshold > self.consolidation_dedup_threshold:
            raise ValueError(
                "STASH_CONSOLIDATION_SIMILARITY_THRESHOLD must not exceed STASH_CONSOLIDATION_DEDUP_THRESHOLD"
            )
        if self.entity_check_threshold > self.entity_same_threshold:
            raise ValueError("STASH_ENTITY_CHECK_THRESHOLD must not exceed STASH_ENTITY_SAME_THRESHOLD")
        if self.embedder == "openai" and not (self.embedding_model and self.openai_base_url):
            raise ValueError("STASH_EMBEDDER=openai needs STASH_EMBEDDING_MODEL and STASH_OPENAI_BASE_URL")
        return self

    # --- derived -------------------------------------------------------------------
    @property
    def reasoner_configured(self) -> bool:
        return bool(self.reasoner_model and self.openai_base_url)

    @property
    def embedded(self) -> bool:
        return self.database_url is None

    @property
    def http_admission(self) -> tuple[int, int]:
        """(requests running at once, requests waiting) per HTTP server process."""
        running = self.http_max_concurrent or self.db_pool_max
        return running, 4 * running if self.http_max_queue is None else self.http_max_queue

    @property
    def embedding_model_name(self) -> str:
        """The name stored with every vector, so a model switch is detected."""
        local = {
            "minilm": "all-MiniLM-L6-v2",
            "minilm-onnx": "all-MiniLM-L6-v2",  # the same vectors as the numpy pass
            "minilm-int8": "all-MiniLM-L6-v2-int8",
            "minilm-static": "all-MiniLM-L6-v2-static",
            "e5-small": "multilingual-e5-small-q4-centred",
        }
        if self.embedder in local:
            return local[self.embedder]
        if self.embedder == "hash":
            return f"hash-{self.vector_dim}"
        return str(self.embedding_model)

    @property
    def embedding_endpoint(self) -> str:
        return (self.openai_base_url or "") if self.embedder == "openai" else "local"

    def public_view(self) -> dict[str, object]:
        """Settings as shown by `stash config`: secrets masked."""
        shown: dict[str, object] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr):
                value = "****" if value.get_secret_value() else ""
            elif name == "database_url" and value:
                value = _mask_dsn(value)
            elif isinstance(value, timedelta):
                value = f"{int(value.total_seconds())}s"
            elif isinstance(value, Path):
                value = str(value)
            shown[f"STASH_{name.upper()}"] = value
        return shown


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> timedelta:
    """'90s', '30m', '1h', '168h', '7d', '1h30m' or plain seconds -> timedelta."""
    import re

    value = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        return timedelta(seconds=float(value))
    parts = re.findall(r"(\d+(?:\.\d+)?)([smhdw])", value)
    if not parts or "".join(n + u for n, u in parts) != value.replace(" ", ""):
        raise ValueError(f"invalid duration {text!r}; use e.g. 90s, 30m, 1h, 7d")
    return timedelta(seconds=sum(float(n) * _UNITS[u] for n, u in parts))


def _mask_dsn(dsn: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        parts = conninfo_to_dict(dsn)
    except Exception:
        return "****"
    if parts.get("password"):
        parts["password"] = "****"
    return make_conninfo(**parts)


def load_settings(**overrides: object) -> Settings:
    """Read settings from the environment and .env; raise ConfigurationError with one line per problem."""
    env_file = os.environ.get("STASH_ENV_FILE", ".env")
    try:
        return Settings(_env_file=env_file, **overrides)  # type: ignore[call-arg]
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"]) if err["loc"] else ""
            name = f"STASH_{field.upper()}" if field else "settings"
            lines.append(f"{name}: {err['msg']}")
        raise ConfigurationError("invalid settings:\n  " + "\n  ".join(lines)) from None
