"""Fact operations: query_facts, get_fact, assert_fact, withdraw_fact, purge_fact.

The library side is ``stash_pipeline.memory.facts``, imported inside each call: the
declarations load without the database layer, so ``stash --help`` stays offline.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field, model_validator

from stash_pipeline.memory import validate
from stash_pipeline.models import AssertedFact, Fact, FactLineage, FactPurge, FactWithdrawal
from stash_pipeline.operations.base import Arguments, CliView, Operation, iso_time
from stash_pipeline.operations.fields import (
    AsOf,
    Confidence,
    IdList,
    KnownAt,
    Limit,
    Namespace,
    Namespaces,
    Offset,
    RecordId,
    Timestamp,
)

FACT_COLUMNS = ("id", "namespace", "origin", "confidence", "current", "valid_from", "content")
IncludeLineage = Annotated[bool, Field(description="Also return its sources and what was derived from it.")]


class QueryFacts(Arguments):
    namespaces: Namespaces = None
    entity: Annotated[str | None, Field(description="Only facts about this entity (case-insensitive).")] = None
    property: Annotated[str | None, Field(description="Only facts on this property.")] = None
    origin: Annotated[
        validate.FactOrigin | None,
        Field(description="Only facts of this origin."),
    ] = None
    since: Timestamp = None
    until: Timestamp = None
    include_history: Annotated[bool, Field(description="Include retired facts.")] = False
    as_of: AsOf = None
    known_at: KnownAt = None
    limit: Limit = validate.LIST_LIMIT_DEFAULT
    offset: Offset = 0


def _query(store: Any, a: QueryFacts, namespaces: list[str]) -> list[Fact]:
    from stash_pipeline.memory import facts

    return facts.query(
        store, namespaces, entity=a.entity, property=a.property, origin=a.origin, since=a.since, until=a.until,
        include_history=a.include_history, as_of=a.as_of, known_at=a.known_at, limit=a.limit, offset=a.offset,
    )


QUERY_FACTS = Operation(
    name="query_facts",
    description="Consolidated facts, newest first; current ones only unless include_history, as_of or known_at.",
    arguments=QueryFacts,
    call=_query,
    right="read",
    reach="trees",
    effect="read",
    result=Fact,
    paged=True,
    cli=CliView(
        path=("facts",),
        summary="List facts, newest first (current ones only unless --include-history, --as-of or --known-at).",
        example="stash facts -n /projects/x --entity deploy --json",
        columns=FACT_COLUMNS,
    ),
)


class GetFact(Arguments):
    id: RecordId
    include_lineage: IncludeLineage = False
    as_of: AsOf = None
    known_at: KnownAt = None


def _get(store: Any, a: GetFact, namespaces: list[str] | None) -> Fact | FactLineage:
    from stash_pipeline.memory import facts

    if a.include_lineage:
        return facts.get_with_lineage(store, a.id, namespaces, as_of=a.as_of, known_at=a.known_at)
    return facts.get(store, a.id, namespaces, as_of=a.as_of, known_at=a.known_at)


GET_FACT = Operation(
    name="get_fact",
    description="One fact by id, in any state (see current, valid_until, withdrawn_at).",
    arguments=GetFact,
    call=_get,
    right="read",
    reach="by_id",
    effect="read",
    result=Fact,
    cli=CliView(
        path=("fact", "show"),
        example="stash fact show 7 --include-lineage",
        arguments={"id": "FACT_ID"},
        names={"include_lineage": ("--lineage",)},
    ),
)


class AssertFact(Arguments):
    content: Annotated[str, Field(description="The fact, as one self-contained statement.")]
    namespace: Namespace
    entity: Annotated[str | None, Field(description="Entity it is about, e.g. 'deploy pipeline'.")] = None
    property: Annotated[str | None, Field(description="Property of the entity, e.g. 'schedule'.")] = None
    value: Annotated[str | None, Field(description="Value of the property, e.g. 'Fridays'.")] = None
    confidence: Confidence = 1.0
    source_episode_ids: IdList = None
    supersede: Annotated[
        bool, Field(description="True: retire current facts with the same entity+property and another value.")
    ] = False
    valid_from: Annotated[str | None, Field(description="ISO 8601, default now."), AfterValidator(iso_time)] = None
    valid_until: Annotated[str | None, Field(description="ISO 8601, default none."), AfterValidator(iso_time)] = None

    @model_validator(mode="after")
    def _entity_and_property_together(self) -> AssertFact:
        if ((self.entity or "").strip() == "") != ((self.property or "").strip() == ""):
            raise ValueError("entity and property go together: give both or neither")
        return self


def _assert(store: Any, a: AssertFact, namespace: str) -> AssertedFact:
    from stash_pipeline.memory import facts

    return facts.assert_fact(
        store, namespace, a.content, entity=a.entity, property=a.property, value=a.value,
        confidence=a.confidence, source_episode_ids=a.source_episode_ids, supersede=a.supersede,
        valid_from=a.valid_from, valid_until=a.valid_until,
    )


ASSERT_FACT = Operation(
    name="assert_fact",
    description="Record a fact you know directly (origin 'asserted'); checked against current facts on its entity/property.",
    arguments=AssertFact,
    call=_assert,
    right="write",
    reach="namespace",
    effect="write",
    result=AssertedFact,
    cli=CliView(
        path=("fact", "assert"),
        example='stash fact assert "Deploys use blue-green" -n /projects/x --source-episode-ids 12,13',
        arguments={"content": "CONTENT"},
        stdin=("content",),
    ),
)


class WithdrawFact(Arguments):
    id: RecordId
    reason: Annotated[str, Field(description="Why it is wrong or no longer true.")]


def _withdraw(store: Any, a: WithdrawFact, namespaces: list[str] | None) -> FactWithdrawal:
    from stash_pipeline.memory import facts

    return facts.withdraw(store, a.id, a.reason, namespaces)


WITHDRAW_FACT = Operation(
    name="withdraw_fact",
    description="Withdraw a fact (kept as history, never served as current) and what was derived only from it.",
    arguments=WithdrawFact,
    call=_withdraw,
    right="write",
    reach="by_id",
    effect="destructive_idempotent",
    result=FactWithdrawal,
    cli=CliView(
        path=("fact", "withdraw"),
        example='stash fact withdraw 7 --reason "we moved to canary deploys"',
        arguments={"id": "FACT_ID"},
    ),
)


class PurgeFact(Arguments):
    id: RecordId


def _purge(store: Any, a: PurgeFact, namespaces: list[str] | None) -> FactPurge:
    from stash_pipeline.memory import facts

    return facts.purge(store, a.id, namespaces)


PURGE_FACT = Operation(
    name="purge_fact",
    description="Erase a fact and all derived from it.",
    arguments=PurgeFact,
    call=_purge,
    right="write",
    reach="by_id",
    effect="destructive_idempotent",
    result=FactPurge,
    cli=CliView(path=("purge", "fact"), example="stash purge fact 7 --yes", arguments={"id": "FACT_ID"}),
)

OPERATIONS = (QUERY_FACTS, GET_FACT, ASSERT_FACT, WITHDRAW_FACT, PURGE_FACT)
