"""The stage table: each consolidation stage described once, in ``STAGES``.

Everything else is generated from / driven by this table: the runner calls
``spec.run``; the ``stage_backlog`` query (``db/queries/consolidation.sql``) gets the
table's source/head/gate columns as parameters (``backlog_parameters``); the Dagster
assets take ``deps``, ``pool`` and ``needs_model``, the asset checks ``lineage_kind``,
the watermark sensor every stage with a ``source``; the CLI and the MCP ``consolidate``
tool list ``STAGE_NAMES``. Adding a stage is one entry here plus its module
``stash_pipeline/stages/<name>.py`` exposing ``run(ctx: StageContext) -> None`` (and its
prompts in ``versions.STAGE_PROMPTS``, so they count in its code version).

Columns that decide when a stage has work (``stage_backlog``):

* ``source`` — the table whose ids drive the stage's cursor and count as its backlog
  (``episodes`` | ``facts`` | ``failures``; ``none`` = no watermark, scheduled only);
* ``head_stage`` — the head is this upstream stage's cursor instead of the source's
  newest id (patterns see facts only after relationships processed them);
* ``aux_source`` — a second table watched through the checkpoint's ``aux_cursor``;
* ``gate`` — work only while the namespace has one: ``active_goal`` |
  ``open_hypothesis`` | ``failure``.

``logic_version`` is part of the stage's code version (``stages/versions.py``), with its
prompts, answer schemas and the model name.

``deps`` are the upstream assets in the Dagster graph (``episodes`` is the external
asset written by the MCP service).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from stash_pipeline import errors
from stash_pipeline.stages import (
    causal_links,
    decay,
    facts,
    failure_patterns,
    goal_progress,
    hypothesis_evidence,
    patterns,
    relationships,
)
from stash_pipeline.stages.context import REPORT_KEYS, StageContext, StageReport

__all__ = ["REPORT_KEYS", "STAGES", "STAGE_NAMES", "StageReport", "StageSpec", "backlog_parameters", "get_stage"]

Source = Literal["episodes", "facts", "failures", "none"]
Gate = Literal["active_goal", "open_hypothesis", "failure"]


@dataclass(frozen=True)
class StageSpec:
    name: str
    description: str
    #: the stage's code: selects batches after ``ctx.cursor`` and commits them through ``ctx.batch``
    run: Callable[[StageContext], None]
    deps: tuple[str, ...]
    source: Source
    head_stage: str | None = None
    aux_source: Source | None = None
    gate: Gate | None = None
    #: lineage child kind of the rows the stage derives (checked by ``lineage_complete``)
    lineage_kind: str | None = None
    needs_model: bool = True
    #: Dagster concurrency pool for model-bound steps (None = no pool)
    pool: str | None = "model"
    #: bump when the stage's Python logic changes what it writes (part of its code version)
    logic_version: int = 1

    @property
    def watermarked(self) -> bool:
        """Whether new source rows trigger the stage (else only its schedule runs it)."""
        return self.source != "none"


STAGES: tuple[StageSpec, ...] = (
    StageSpec("facts", "Cluster new episodes and synthesise grounded facts (+ contradiction check).",
              facts.run, ("episodes",), "episodes", lineage_kind="fact"),
    StageSpec("relationships", "Extract entity relationships from new facts, several facts per call.",
              relationships.run, ("facts",), "facts", lineage_kind="relationship"),
    StageSpec("causal_links", "Find cause→effect links among new facts (own cursor).",
              causal_links.run, ("relationships", "facts"), "facts", lineage_kind="causal_link"),
    StageSpec("patterns", "Abstract recurring patterns from facts and their relationships.",
              patterns.run, ("facts", "relationships"), "facts", head_stage="relationships",
              lineage_kind="pattern"),
    StageSpec("goal_progress", "Append model progress notes to active goals from new facts.",
              goal_progress.run, ("facts",), "facts", gate="active_goal"),
    StageSpec("failure_patterns", "Detect repeated failures and failure patterns in new episodes.",
              failure_patterns.run, ("episodes",), "episodes", aux_source="failures", gate="failure"),
    StageSpec("hypothesis_evidence", "Judge new facts as evidence for open hypotheses.",
              hypothesis_evidence.run, ("facts",), "facts", gate="open_hypothesis"),
    StageSpec("decay", "Decay stale current facts and expire those below the threshold (pure SQL).",
              decay.run, ("facts",), "none", needs_model=False, pool=None),
)

STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)


def get_stage(name: str) -> StageSpec:
    for spec in STAGES:
        if spec.name == name:
            return spec
    raise errors.InvalidInput(f"unknown stage {name!r}; stages: {', '.join(STAGE_NAMES)}")


def backlog_parameters(namespace_ids: Sequence[int] | None = None) -> dict[str, Any]:
    """Parameters of the ``stage_backlog`` query: the namespaces (None = all) and the stage table."""
    return {
        "namespace_ids": None if namespace_ids is None else list(namespace_ids),
        "stages": [s.name for s in STAGES],
        "sources": [s.source for s in STAGES],
        "head_stages": [s.head_stage for s in STAGES],
        "aux_sources": [s.aux_source for s in STAGES],
        "gates": [s.gate for s in STAGES],
    }
