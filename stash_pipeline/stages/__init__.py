"""The stage table: each consolidation stage described once.

Dagster assets, watermark sensors, the CLI and the MCP ``consolidate`` tool are all
generated from / driven by ``STAGES``; adding a stage is one entry here plus its module
``stash_pipeline/stages/<name>.py`` exposing ``run(ctx) -> None`` (see
``stash_pipeline.consolidation`` for the runner that provides locking, cursors,
dead letters and the report).

``source`` names the table whose ids drive the stage's cursor; ``head_sql`` in
``db/queries/consolidation.sql`` (``stage_backlog``) compares its head with the
checkpoint. ``deps`` are the upstream assets in the Dagster graph (``episodes`` is the
external asset written by the MCP service).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class StageSpec:
    name: str
    description: str
    source: str  # "episodes" | "facts" | "failures" | "none"
    deps: tuple[str, ...]
    needs_model: bool = True
    #: Dagster concurrency pool for model-bound steps (None = no pool)
    pool: str | None = "model"


STAGES: tuple[StageSpec, ...] = (
    StageSpec("facts", "Cluster new episodes and synthesise grounded facts (+ contradiction check).",
              "episodes", ("episodes",)),
    StageSpec("relationships", "Extract entity relationships from new facts, several facts per call.",
              "facts", ("facts",)),
    StageSpec("causal_links", "Find cause→effect links among new facts (own cursor).",
              "facts", ("relationships", "facts")),
    StageSpec("patterns", "Abstract recurring patterns from facts and their relationships.",
              "facts", ("facts", "relationships")),
    StageSpec("goal_progress", "Append model progress notes to active goals from new facts.",
              "facts", ("facts",)),
    StageSpec("failure_patterns", "Detect repeated failures and failure patterns in new episodes.",
              "episodes", ("episodes",)),
    StageSpec("hypothesis_evidence", "Judge new facts as evidence for open hypotheses.",
              "facts", ("facts",)),
    StageSpec("decay", "Decay stale current facts and expire those below the threshold (pure SQL).",
              "none", ("facts",), needs_model=False, pool=None),
)

STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)


def get_stage(name: str) -> StageSpec:
    for spec in STAGES:
        if spec.name == name:
            return spec
    from stash_pipeline.errors import InvalidInput

    raise InvalidInput(f"unknown stage {name!r}; stages: {', '.join(STAGE_NAMES)}")


#: Stable metadata keys shared by every stage (Dagster plots line up on them).
REPORT_KEYS = (
    "rows_in",
    "rows_written",
    "items_failed",
    "dead_lettered",
    "cursor_from",
    "cursor_to",
    "model_calls",
    "tokens_in",
    "tokens_out",
    "duration_s",
)


@dataclass
class StageReport:
    """What one stage run did for one namespace."""

    stage: str
    namespace: str
    status: str = "ok"  # ok | idle | not_configured | busy | failed
    message: str = ""
    rows_in: int = 0
    rows_written: int = 0
    items_failed: int = 0
    dead_lettered: int = 0
    cursor_from: int = 0
    cursor_to: int = 0
    model_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    duration_s: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def metadata(self) -> dict[str, int | float]:
        return {key: getattr(self, key) for key in REPORT_KEYS}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
