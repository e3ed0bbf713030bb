"""The stage table: each consolidation stage described once, in ``STAGES``.

It is the only list of stages; everything else reads it. The runner calls ``spec.run``
(and lets a stage send only the ``prompts`` its entry lists); the ``stage_backlog`` query
(``db/queries/consolidation.sql``) gets the table's source/head/gate columns as
parameters (``backlog_parameters``); the stage's code version is a digest of its
``prompts``, the model and ``logic_version`` (``stages/versions.py``); the dry-run plan
divides the backlog by ``items_per_call`` (``consolidation/plan.py``); a rebuild runs the
entry's ``rebuild_query`` (``consolidation/rebuild.py``); the Dagster assets take
``deps``, ``pool`` and ``needs_model``, the asset checks ``outputs``, the watermark sensor
every stage with a ``source``, the rebuild jobs every stage with a ``rebuild_query``; the
CLI and the MCP ``consolidate`` tool list ``STAGE_NAMES``. Adding a stage is one entry
here plus its module ``stash_pipeline/stages/<name>.py`` exposing
``run(ctx: StageContext) -> None``; ``tests/unit/test_stage_table.py`` adds one and
checks that everything follows.

Columns that decide when a stage has work (``stage_backlog``):

* ``source`` — the table whose ids drive the stage's cursor and count as its backlog
  (``episodes`` | ``facts`` | ``failures``; ``none`` = no watermark, scheduled only);
* ``head_stage`` — the head is this upstream stage's cursor instead of the source's
  newest id (patterns see facts only after relationships processed them);
* ``aux_source`` — a second table watched through the checkpoint's ``aux_cursor``
  (``profile_requests``: entities whose profiles were withdrawn, deleted once handled);
* ``gate`` — work only while the namespace has one: ``active_goal`` |
  ``open_hypothesis`` | ``failure``.

Columns about what a stage sends and writes:

* ``prompts`` — every (system prompt, answer schema) pair the stage sends
  (``StageContext.call`` refuses any other, so none can escape the code version);
* ``items_per_call`` — how many input items one model call takes, from the settings;
* ``outputs`` — every lineage kind of the rows the stage derives, its own kind first
  (``lineage_complete`` checks them; a rebuild withdraws rows of the first; the
  guarantees suite, ``tests/reliability/test_guarantees.py``, checks erasure,
  retirement and identity for each);
* ``rebuild_query`` — the named query withdrawing the stage's own rows in a namespace
  (None: its outputs are kept as history and it cannot be rebuilt).

``deps`` are the upstream assets in the Dagster graph (``episodes`` is the external
asset written by the MCP service).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from stash_pipeline import errors
from stash_pipeline.stages import (
    causal_links,
    decay,
    facts,
    failure_patterns,
    goal_progress,
    hypothesis_evidence,
    patterns,
    profiles,
    prompts,
    relationships,
)
from stash_pipeline.stages.context import REPORT_KEYS, Prompt, StageContext, StageReport

if TYPE_CHECKING:
    from stash_pipeline.config import Settings

__all__ = [
    "REBUILDABLE",
    "REPORT_KEYS",
    "STAGES",
    "STAGE_NAMES",
    "Prompt",
    "StageReport",
    "StageSpec",
    "backlog_parameters",
    "get_stage",
]

Source = Literal["episodes", "facts", "failures", "none"]
#: a second source: one of those, or the requests to write an entity's profiles again
AuxSource = Literal["episodes", "facts", "failures", "profile_requests"]
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
    aux_source: AuxSource | None = None
    gate: Gate | None = None
    #: every (system prompt, answer schema) the stage sends; part of its code version
    prompts: tuple[Prompt, ...] = ()
    #: input items one model call takes (the stage module's batch size), for the dry-run plan
    items_per_call: Callable[[Settings], int] | None = None
    #: every lineage kind of the rows the stage derives, its own kind first (``lineage_complete``, the guarantees suite)
    outputs: tuple[str, ...] = ()
    #: named query withdrawing the stage's own rows in a namespace (None = not rebuildable)
    rebuild_query: str | None = None
    needs_model: bool = True
    #: Dagster concurrency pool for model-bound steps (None = no pool)
    pool: str | None = "model"
    #: bump when the stage's Python logic changes what it writes (part of its code version)
    logic_version: int = 1

    def __post_init__(self) -> None:
        # a stage missing a column would fail later, far from its entry (a KeyError in the
        # plan, a prompt outside its code version): refuse the entry itself
        if self.needs_model and (not self.prompts or self.items_per_call is None):
            raise errors.ConfigurationError(f"model stage {self.name!r} needs its prompts and items_per_call")
        if not self.needs_model and self.prompts:
            raise errors.ConfigurationError(f"stage {self.name!r} sends prompts but says it needs no model")
        if self.rebuild_query is not None and not self.outputs:
            raise errors.ConfigurationError(f"stage {self.name!r} is rebuildable but names no output kind")

    @property
    def watermarked(self) -> bool:
        """Whether new source rows trigger the stage (else only its schedule runs it)."""
        return self.source != "none"

    @property
    def lineage_kind(self) -> str | None:
        """The kind of the stage's own rows (what a rebuild withdraws), if it derives any."""
        return self.outputs[0] if self.outputs else None

    def per_call(self, settings: Settings) -> int | None:
        """Items one model call takes under ``settings`` (None for a stage without a model)."""
        return self.items_per_call(settings) if self.items_per_call is not None else None


_ENTITIES = (prompts.ENTITIES, prompts.EntitiesAnswer)

STAGES: tuple[StageSpec, ...] = (
    StageSpec("facts", "Cluster new episodes and synthesise grounded facts (+ contradiction check).",
              facts.run, ("episodes",), "episodes",
              prompts=((prompts.FACTS, prompts.FactsAnswer), (prompts.CONTRADICTIONS, prompts.ContradictionsAnswer),
                       _ENTITIES),
              items_per_call=lambda settings: settings.facts_clusters_per_call,
              outputs=("fact", "contradiction"), rebuild_query="rebuild_withdraw_facts"),
    StageSpec("relationships", "Extract entity relationships from new facts, several facts per call.",
              relationships.run, ("facts",), "facts",
              prompts=((prompts.RELATIONSHIPS, prompts.RelationshipsAnswer), _ENTITIES),
              items_per_call=lambda settings: settings.relationships_facts_per_call,
              outputs=("relationship",), rebuild_query="rebuild_withdraw_relationships"),
    StageSpec("causal_links", "Find cause→effect links among new facts (own cursor).",
              causal_links.run, ("relationships", "facts"), "facts",
              prompts=((prompts.CAUSAL_LINKS, prompts.CausalAnswer),),
              items_per_call=lambda settings: causal_links.WINDOW,
              outputs=("causal_link",), rebuild_query="rebuild_withdraw_causal_links"),
    StageSpec("patterns", "Abstract recurring patterns from facts and their relationships.",
              patterns.run, ("facts", "relationships"), "facts", head_stage="relationships",
              prompts=((prompts.PATTERNS, prompts.PatternsAnswer),),
              items_per_call=lambda settings: patterns.BATCH,
              outputs=("pattern",), rebuild_query="rebuild_withdraw_patterns"),
    StageSpec("goal_progress", "Append model progress notes to active goals from new facts.",
              goal_progress.run, ("facts",), "facts", gate="active_goal",
              prompts=((prompts.GOAL_PROGRESS, prompts.GoalProgressAnswer),),
              items_per_call=lambda settings: goal_progress.BATCH, outputs=("goal_note",)),
    StageSpec("failure_patterns", "Detect repeated failures and failure patterns in new episodes.",
              failure_patterns.run, ("episodes",), "episodes", aux_source="failures", gate="failure",
              prompts=((prompts.FAILURE_PATTERNS, prompts.FailurePatternsAnswer), _ENTITIES),
              items_per_call=lambda settings: failure_patterns.EVIDENCE_BATCH,
              outputs=("fact", "episode")),
    StageSpec("hypothesis_evidence", "Judge new facts as evidence for open hypotheses.",
              hypothesis_evidence.run, ("facts",), "facts", gate="open_hypothesis",
              prompts=((prompts.HYPOTHESIS_EVIDENCE, prompts.HypothesisAnswer),),
              items_per_call=lambda settings: hypothesis_evidence.BATCH, outputs=("hypothesis_evidence",)),
    StageSpec("profiles", "Gather each entity's current facts per aspect into a profile fact (no model).",
              profiles.run, ("facts",), "facts", aux_source="profile_requests",
              outputs=("fact",), rebuild_query="rebuild_withdraw_profiles",
              needs_model=False, pool=None),
    StageSpec("decay", "Decay stale current facts and expire those below the threshold (pure SQL).",
              decay.run, ("facts",), "none", needs_model=False, pool=None),
)

STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)
#: stages whose outputs a rebuild can withdraw (goal notes, verdicts, failure patterns are history)
REBUILDABLE: tuple[str, ...] = tuple(s.name for s in STAGES if s.rebuild_query is not None)


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
