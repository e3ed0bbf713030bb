"""Typed answers of the operations whose library functions answer a JSON object.

Each model lists the keys the answer has always had, in the same order, so the JSON a
client sees is unchanged. ``extra="allow"``: a key a library function adds reaches the
client before its model names it (and the docs). A subject whose library returns its
answers typed keeps them in ``stash_pipeline.models`` (``Result`` is declared there).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from stash_pipeline.models import (
    Cascade,
    CausalStep,
    Erasure,
    Namespace,
    Result,
)


class CausalTrace(Result):
    fact_id: int
    direction: str
    steps: list[CausalStep]


class NamespaceCreated(Result):
    """A created or updated namespace (``created`` false: it existed, its name or
    description may have changed)."""

    id: int
    slug: str
    created: bool
    namespace: Namespace


class ConsolidationStatus(Result):
    """Each (namespace, stage) row of ``consolidation.runner.status``, and the runs queued or
    in flight: ``mode`` dagster (its runs) or background (the server's jobs); None at a shell
    when no Dagster webserver answers (a shell starts no background jobs)."""

    items: list[dict[str, Any]]
    mode: str | None
    runs: list[dict[str, Any]]


class ConsolidationStarted(Result):
    """What ``consolidate`` started, at once: one Dagster run per namespace (``mode``
    dagster, with ``dagster_url``) or the server's background job (``mode`` background).
    Without a reasoner, ``skipped`` lists the model stages left out and ``message`` says
    how to configure one."""

    mode: Literal["dagster", "background"]
    runs: list[dict[str, Any]] | None = None
    dagster_url: str | None = None
    job: dict[str, Any] | None = None
    skipped: list[str] | None = None
    message: str | None = None

    @model_serializer(mode="wrap")
    def _without_nulls(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # each mode answers its own keys, never the other's as nulls
        return {key: value for key, value in handler(self).items() if value is not None}


# --- recall: the shape ``memory.recall.recall_results`` answers, published as the tool's
# output schema (the answer itself stays the library's dict: one shaping, counted once
# against max_tokens). Plain models, not ``Result``: the schema says what is there.


class ContextTurn(BaseModel):
    """A neighbouring turn of the same session, in order."""

    id: int
    content: str


class SourceTurn(BaseModel):
    """An episode the fact rests on."""

    id: int
    occurred_at: str | None = None
    excerpt: str
    score: float | None = None

    @model_serializer(mode="wrap")
    def _without_nulls(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {key: value for key, value in handler(self).items() if value is not None}


class GroupedHit(BaseModel):
    """Folded into this result."""

    kind: Literal["fact", "episode"]
    id: int
    score: float


class RecallItem(BaseModel):
    """One result; fields that do not apply are left out."""

    kind: Literal["fact", "episode"]
    id: int
    namespace: str
    content: str
    score: float
    relevance: float
    score_parts: dict[str, float] | None = None
    confidence: float | None = None
    occurred_at: str | None = None
    valid_from: str | None = None
    valid_until: str | None = None
    source_episode_ids: list[int] | None = None
    member_fact_ids: list[int] | None = None
    metadata: dict[str, Any] | None = None
    current: bool | None = None
    sources: list[SourceTurn] | None = None
    #: the source turns of facts folded into this one as telling it again (not its lineage)
    repeated_in: list[SourceTurn] | None = None
    grouped: list[GroupedHit] | None = None
    context: list[ContextTurn] | None = None

    @model_serializer(mode="wrap")
    def _without_nulls(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # the answer leaves out what does not apply instead of sending nulls
        return {key: value for key, value in handler(self).items() if value is not None}


class RecallResult(BaseModel):
    """Facts and episodes, best first."""

    results: list[RecallItem]
    pending: int | None = Field(default=None, description="Episodes too new to have a vector: found by words only.")


__all__ = [
    "Cascade",
    "CausalTrace",
    "ConsolidationStarted",
    "ConsolidationStatus",
    "ContextTurn",
    "Erasure",
    "GroupedHit",
    "NamespaceCreated",
    "RecallItem",
    "RecallResult",
    "Result",
    "SourceTurn",
]
