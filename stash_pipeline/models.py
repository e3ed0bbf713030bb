"""Typed records and answers returned by memory operations: snake_case, JSON-ready, never vectors.

``Record.from_row`` builds a model from a ``dict_row`` and ignores columns it does not
declare (``embedding``, ``search``), so a vector can never leak to a caller.

``Result`` is an answer that is not one stored row (a goal and the parents completed with
it, a deletion's ids): what a library function returns and its operation publishes as it
is. Each lists the keys the answer has always had, in the same order, so the JSON a client
sees is unchanged; ``extra="allow"``: a key a library function adds reaches the client
before its model names it (and the docs).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Any:
        return cls.model_validate(row)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class Namespace(Record):
    id: int
    slug: str
    name: str
    description: str
    created_at: datetime
    updated_at: datetime


class Episode(Record):
    id: int
    namespace: str
    content: str
    kind: str
    metadata: dict[str, Any]
    idempotency_key: str | None = None
    occurred_at: datetime
    created_at: datetime
    deleted_at: datetime | None = None
    deleted_reason: str | None = None


class Fact(Record):
    id: int
    namespace: str
    content: str
    entity: str | None = None
    property: str | None = None
    value: str | None = None
    confidence: float
    origin: str
    valid_from: datetime
    valid_until: datetime | None = None
    superseded_by: int | None = None
    withdrawn_at: datetime | None = None
    withdrawn_reason: str | None = None
    needs_recheck: bool = False
    reinforcements: int = 0
    rationale: str | None = None
    source_episode_ids: list[int] = []
    created_at: datetime
    updated_at: datetime
    #: system time: when Stash learned the fact, and when it stopped being its belief as
    #: recorded (superseded, expired or withdrawn)
    recorded_at: datetime | None = None
    retired_at: datetime | None = None
    current: bool = True


class Relationship(Record):
    id: int
    namespace: str
    from_entity: str
    relation_type: str
    to_entity: str
    confidence: float
    source_fact_id: int
    withdrawn_at: datetime | None = None
    created_at: datetime
    #: event time (its source fact's interval) and system time, as on facts
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    recorded_at: datetime | None = None
    retired_at: datetime | None = None


class Pattern(Record):
    id: int
    namespace: str
    content: str
    confidence: float
    coherence: float
    rationale: str | None = None
    source_fact_ids: list[int] = []
    source_relationship_ids: list[int] = []
    withdrawn_at: datetime | None = None
    created_at: datetime
    updated_at: datetime


class Contradiction(Record):
    id: int
    namespace: str
    old_fact_id: int
    new_fact_id: int
    entity: str
    property: str
    old_value: str
    new_value: str
    classification: str
    confidence: float
    explanation: str
    method: str
    resolved: bool
    resolution: str | None = None
    resolution_note: str | None = None
    resolved_at: datetime | None = None
    created_at: datetime


class CausalLink(Record):
    id: int
    namespace: str
    cause_fact_id: int
    effect_fact_id: int | None = None
    effect_failure_id: int | None = None
    confidence: float
    method: str
    rationale: str | None = None
    withdrawn_at: datetime | None = None
    created_at: datetime
    #: event time (from when both ends held) and system time, as on facts
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    recorded_at: datetime | None = None
    retired_at: datetime | None = None


class CausalStep(Record):
    """One edge of a traced causal chain."""

    link_id: int
    depth: int
    cause_fact_id: int
    cause: str
    effect_fact_id: int | None = None
    effect_failure_id: int | None = None
    effect: str
    confidence: float


class Context(Record):
    namespace: str
    focus: str
    expires_at: datetime
    created_at: datetime
    updated_at: datetime


class HypothesisEvidence(Record):
    id: int
    hypothesis_id: int
    fact_id: int | None = None
    verdict: str
    confidence: float
    new_confidence: float | None = None
    reasoning: str
    action: str | None = None
    created_at: datetime


class Hypothesis(Record):
    id: int
    namespace: str
    content: str
    verification_plan: str
    confidence: float
    status: Literal["proposed", "testing", "confirmed", "rejected"]
    method: str
    confirmed_fact_id: int | None = None
    rejection_reason: str | None = None
    source_fact_ids: list[int] = []
    tested_at: datetime | None = None
    confirmed_at: datetime | None = None
    rejected_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    evidence: list[HypothesisEvidence] | None = None


class GoalNote(Record):
    id: int
    goal_id: int
    author: Literal["caller", "model"]
    kind: str
    content: str
    confidence: float | None = None
    fact_id: int | None = None
    created_at: datetime


class Goal(Record):
    id: int
    namespace: str
    parent_id: int | None = None
    content: str
    status: Literal["active", "completed", "abandoned"]
    priority: int
    completed_at: datetime | None = None
    abandoned_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    sub_goals: dict[str, int] | None = None
    notes: list[GoalNote] | None = None


class Failure(Record):
    id: int
    namespace: str
    goal_id: int | None = None
    content: str
    reason: str
    lesson: str
    created_at: datetime


class SourceTurn(Record):
    """An episode a fact hit rests on, compactly (``recall/grouping.py``): its id, when
    it occurred and the start of its text; ``score`` when it was itself a candidate of the
    query, folded into the fact instead of taking a slot of its own."""

    id: int
    occurred_at: datetime | None = None
    excerpt: str
    score: float | None = None


class RecallHit(Record):
    """One recall result as the library ranks it; ``recall.recall_results`` gives agents its lean shape.

    A fact hit carries ``sources``, its source episodes (``SourceTurn``); an episode that
    a fact already shows is folded into it (``recall/grouping.py``), so one piece of
    evidence takes one slot; so is a profile's member ranked below the profile
    (``member_fact_ids``), and a profile whose members all rank above it; a fact saying a
    better one's thing again folds into it, its source turns in ``repeated_in``. ``grouped``
    lists the candidates folded into this result (kind, id, own score) for
    ``include_score_parts``.
    """

    kind: Literal["fact", "episode"]
    id: int
    namespace: str
    content: str
    score: float
    score_parts: dict[str, float | None]
    confidence: float | None = None
    occurred_at: datetime | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    source_episode_ids: list[int] | None = None
    #: a profile's members: the facts whose words it gathers
    member_fact_ids: list[int] | None = None
    metadata: dict[str, Any] | None = None
    current: bool | None = None
    sources: list[SourceTurn] | None = None
    #: the source turns of facts folded into this one as saying it again in other words
    #: (another session's account of the same thing); not this fact's lineage
    repeated_in: list[SourceTurn] | None = None
    grouped: list[dict[str, Any]] | None = None

    @property
    def relevance(self) -> float:
        """The score clipped to [0, 1]: comparable across queries, for an agent to threshold
        (``RecallConfig.relevance_floor``); ``recall.recall_results`` puts it in every result."""
        return round(min(max(self.score, 0.0), 1.0), 4)


class ForgetPreview(Record):
    """What `forget` matched (and, unless preview, withdrew)."""

    episode_id: int | None
    namespace: str | None
    content: str | None
    similarity: float | None
    applied: bool
    withdrawn_fact_ids: list[int] = []
    recheck_fact_ids: list[int] = []


# --- answers of the library's calls that are not one stored row, by subject -------------


class Cascade(Result):
    """What a withdrawal took with it: facts withdrawn, facts to recheck, counts by kind."""

    withdrawn_fact_ids: list[int] = []
    recheck_fact_ids: list[int] = []
    withdrawn: dict[str, int] = {}


class Erasure(Result):
    """What a purge erased with the record: the facts derived from it, counts by kind
    (only rows inside the caller's trees are named or counted)."""

    erased_fact_ids: list[int] = []
    erased: dict[str, int] = {}


class GoalFinish(Result):
    """A completed or abandoned goal, and the parents that completed with it."""

    goal: Goal
    auto_completed: list[int]


class GoalDeletion(Result):
    ok: bool
    id: int
    deleted_ids: list[int]


class Deleted(Result):
    ok: bool
    id: int


class Confirmation(Result):
    """A confirmed hypothesis and the fact it became (as the fact row reads)."""

    hypothesis: Hypothesis
    fact: dict[str, Any]


class CurrentContext(Result):
    """A namespace's current focus; None when there is none or it expired."""

    context: Context | None


class ContextCleared(Result):
    ok: bool
    cleared: bool


class NamespaceCreation(Result):
    """A created or updated namespace (``created`` false: it existed, its name or
    description may have changed) and how many missing ancestors came with it."""

    namespace: Namespace
    created: bool
    ancestors_created: int


class NamespaceView(Result):
    """A namespace and the row counts of its tree."""

    namespace: Namespace
    counts: dict[str, int]


class NamespaceDeletion(Result):
    """A namespace tree deleted, or (``deleted`` false) what deleting it would take."""

    deleted: bool
    namespaces: list[str]
    counts: dict[str, int]


class SelfTree(Result):
    """The /self tree: its paths and those just created. A token that may not write there
    gets ``self_available`` false, no paths and a ``message`` naming what it may use."""

    ok: bool
    namespaces: list[str]
    namespaces_created: list[str]
    self_available: bool


class Resolution(Result):
    """A resolved contradiction and its two facts after the action; ``withdrawn`` is the
    lineage cascade of ``neither`` (None otherwise)."""

    contradiction: Contradiction
    old_fact: Fact
    new_fact: Fact
    withdrawn: Cascade | None
    note: str | None


class StoreStats(Result):
    """Counts of everything stored in some namespace trees (by status where records have one)."""

    namespaces: int
    episodes: int
    episodes_forgotten: int
    facts_needing_recheck: int
    relationships: int
    causal_links: int
    patterns: int
    contradictions_open: int
    hypotheses: dict[str, int]
    goals: dict[str, int]
    failures: int
    model_calls: int
    facts: dict[str, int]
    dead_letters: dict[str, int]
    tokens: dict[str, int]


class EntityMoved(Result):
    """What a merge or split moved: the aliases, and counts of facts and relationship ends."""

    aliases: list[str]
    facts: int
    relationship_ends: int


class EntityView(Result):
    """Everything known about one entity (rows as the entity queries read them)."""

    entity: dict[str, Any]
    requested_id: int
    aliases: list[dict[str, Any]]
    merged_from: list[dict[str, Any]]
    facts: list[dict[str, Any]]
    relationships: list[dict[str, Any]]
    causal_links: list[dict[str, Any]]
    timeline: list[dict[str, Any]]
    corrections: list[dict[str, Any]]
    limit: int
    offset: int
    #: the offset of the next page while any list has more rows, else None
    next_offset: int | None


class EntityMerge(Result):
    id: int
    merged_id: int
    correction_id: int
    moved: EntityMoved


class EntitySplit(Result):
    id: int
    new_id: int
    revived: bool
    correction_id: int
    moved: EntityMoved


class EntityPurge(Result):
    entity_id: int
    namespace: str
    purged: bool
    erased: Erasure



class VectorBacklog(Result):
    """Rows waiting for a vector, and how long the oldest has waited (None: none waits)."""

    pending: int
    oldest_age_s: float | None


class ReembedReport(Result):
    """What ``stash reembed`` did: the model and dimension now, the ones before, rows rewritten."""

    model: str
    dim: int
    endpoint: str | None
    previous_model: str | None
    previous_dim: int | None
    dims_changed: bool
    episodes: int
    facts: int
    entities: int
    rows_written: int
    duration_s: float


# --- facts and episodes ----------------------------------------------------------------


class LineageRef(Record):
    """One lineage edge's other end: a row's kind and id."""

    kind: str
    id: int


class AssertedFact(Result):
    fact: Fact
    contradictions: list[Contradiction]
    superseded_fact_ids: list[int]


class FactLineage(Result):
    fact: Fact
    parents: list[LineageRef]
    children: list[LineageRef]


class FactWithdrawal(Result):
    fact_id: int
    withdrawn: bool
    cascade: Cascade


class FactPurge(Result):
    fact_id: int
    namespace: str
    purged: bool
    erased: Erasure


class Remembered(Result):
    """One stored episode: its id, namespace, and whether it is new (a key's retry is not)."""

    id: int
    namespace: str
    created: bool


class RememberedBatch(Result):
    results: list[Remembered]


class EpisodePurge(Result):
    episode_id: int
    namespace: str
    purged: bool
    erased: Erasure


# --- what the console shows (stash_pipeline.memory.browse) --------------------------------


class NamespaceOverview(Record):
    """A namespace with the counts a person looks at first (``browse.namespaces``)."""

    id: int
    slug: str
    name: str
    description: str
    episodes: int
    facts: int
    entities: int
    dead_letters: int
    last_activity: datetime | None = None


class EpisodeOverview(Episode):
    """An episode on the console's timeline, with how many rows were derived from it
    inside the reader's trees (``browse.episodes``)."""

    derived: int = 0


class RecordText(Record):
    """A stored row of any lineage kind as a person reads it (``browse.records``): its
    namespace, a text (content, a relationship's triple, a contradiction's explanation…),
    its time, and whether it is gone (withdrawn, retired, forgotten, merged away)."""

    kind: str
    id: int
    namespace: str
    text: str
    at: datetime | None = None
    gone: bool = False


# --- entities and the graph around one (stash_pipeline.memory.neighbourhood) --------------


class EntityListing(Record):
    """A live entity (not merged away) as the console lists it: its names and how many
    current facts it has (``neighbourhood.entities``)."""

    id: int
    namespace: str
    name: str
    kind: str | None = None
    facts: int = 0
    aliases: list[str] = []


class GraphNode(Record):
    """An entity in the graph around another: ``hop`` 0 is the centre, 1 its neighbours."""

    id: int
    namespace: str
    name: str
    kind: str | None = None
    hop: int


class GraphEdge(Record):
    """A live relationship between two nodes of a neighbourhood, as written."""

    id: int
    from_id: int
    to_id: int
    relation_type: str
    confidence: float


class Neighbourhood(Result):
    """The entities around one, up to ``hops`` away and at most a bounded number of nodes;
    ``truncated`` when the bound left some out."""

    centre: int
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    truncated: bool


class CorrectionPreview(Result):
    """What a merge or a split would move, read without moving anything: the aliases, the
    facts and relationship ends (``moved``); ``other_id`` is the entity merged in, or the
    one a split moves them to (None: a new one, named ``other_name``), and for a split
    ``revived`` says it brings a merged entity back."""

    action: Literal["merge", "split"]
    entity_id: int
    other_id: int | None
    other_name: str | None
    moved: EntityMoved
    revived: bool = False


# --- pipeline health and erasure previews (the console) ----------------------------------


class StageHealth(Record):
    """One stage in one namespace (``consolidation.health.pipeline``): its cursor against
    the head, the work waiting, its last run, its open dead letters, and its model calls
    since ``PipelineHealth.since`` (``last_call_at``: the newest ever)."""

    namespace: str
    stage: str
    cursor: int
    head: int
    backlog: int
    has_work: bool
    last_run_at: datetime | None = None
    last_status: str | None = None
    dead_letters_pending: int = 0
    dead_letters_dead: int = 0
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    errors: int = 0
    last_error: str | None = None
    last_call_at: datetime | None = None


class DeadLetter(Record):
    """A consolidation item that kept failing, with the error it last failed with."""

    id: int
    namespace: str
    stage: str
    item_kind: str
    item_id: int
    attempts: int
    last_error: str
    status: str
    created_at: datetime
    updated_at: datetime


class PipelineHealth(Result):
    """One page of namespaces' stages and how many namespaces the trees hold in all; the
    trees' newest open dead letters (bounded) and how many are open in all."""

    stages: list[StageHealth]
    namespaces: int
    dead_letters: list[DeadLetter]
    dead_letters_open: int
    since: datetime


class ErasedRow(Record):
    """A row a purge erases: its kind (the catalog's id space), id, namespace and text."""

    kind: str
    id: int
    namespace: str
    text: str


class ErasurePreview(Result):
    """What purging a record would erase, found by running the purge and rolling it back:
    every id by kind (the record's own included, only rows inside the caller's trees) and,
    for the first rows of each kind, their text."""

    kind: str
    id: int
    namespace: str
    record: ErasedRow
    ids: dict[str, list[int]]
    rows: dict[str, list[ErasedRow]]
