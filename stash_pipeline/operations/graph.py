"""Graph operations: relationships, patterns and causal links found by consolidation or asserted.

query_relationships, query_patterns, list_causal_links, create_causal_link,
trace_causal_chain, delete_causal_link. The library side is
``stash_pipeline.memory.graph`` (imported inside each call, so the declarations load
without the database layer).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from stash_pipeline.memory import validate
from stash_pipeline.models import CausalLink, Deleted, Pattern, Relationship
from stash_pipeline.operations.base import Arguments, CliView, Operation
from stash_pipeline.operations.fields import (
    AsOf,
    Confidence,
    KnownAt,
    Limit,
    Namespace,
    Namespaces,
    Offset,
    RecordId,
)
from stash_pipeline.operations.results import CausalTrace

CAUSAL_COLUMNS = ("id", "namespace", "cause_fact_id", "effect_fact_id", "effect_failure_id", "confidence", "method")
STEP_COLUMNS = ("depth", "link_id", "cause_fact_id", "effect_fact_id", "effect_failure_id", "confidence", "effect")


class QueryRelationships(Arguments):
    namespaces: Namespaces = None
    entity: Annotated[str | None, Field(description="Only relationships with this entity at either end.")] = None
    relation_type: Annotated[str | None, Field(description="Only this relation, e.g. depends_on.")] = None
    include_withdrawn: Annotated[bool, Field(description="Include withdrawn relationships.")] = False
    as_of: AsOf = None
    known_at: KnownAt = None
    limit: Limit = validate.LIST_LIMIT_DEFAULT
    offset: Offset = 0


def _relationships(store: Any, a: QueryRelationships, namespaces: list[str]) -> list[Relationship]:
    from stash_pipeline.memory import graph

    return graph.query_relationships(
        store, namespaces, entity=a.entity, relation_type=a.relation_type, include_withdrawn=a.include_withdrawn,
        as_of=a.as_of, known_at=a.known_at, limit=a.limit, offset=a.offset,
    )


QUERY_RELATIONSHIPS = Operation(
    name="query_relationships",
    description="Entity relationships (from --type--> to) found by consolidation.",
    arguments=QueryRelationships,
    call=_relationships,
    right="read",
    reach="trees",
    effect="read",
    result=Relationship,
    paged=True,
    cli=CliView(
        path=("relationships",),
        example="stash relationships -n /projects/x --entity billing",
        columns=("id", "namespace", "from_entity", "relation_type", "to_entity", "confidence", "source_fact_id"),
    ),
)


class QueryPatterns(Arguments):
    namespaces: Namespaces = None
    include_withdrawn: Annotated[bool, Field(description="Include withdrawn patterns.")] = False
    limit: Limit = validate.LIST_LIMIT_DEFAULT
    offset: Offset = 0


def _patterns(store: Any, a: QueryPatterns, namespaces: list[str]) -> list[Pattern]:
    from stash_pipeline.memory import graph

    return graph.query_patterns(
        store, namespaces, include_withdrawn=a.include_withdrawn, limit=a.limit, offset=a.offset
    )


QUERY_PATTERNS = Operation(
    name="query_patterns",
    description="Recurring patterns found by consolidation, with the fact and relationship ids each one cites.",
    arguments=QueryPatterns,
    call=_patterns,
    right="read",
    reach="trees",
    effect="read",
    result=Pattern,
    paged=True,
    cli=CliView(
        path=("patterns",),
        example="stash patterns -n /projects --json",
        columns=("id", "namespace", "confidence", "coherence", "content"),
    ),
)


class ListCausalLinks(Arguments):
    namespaces: Namespaces = None
    include_withdrawn: Annotated[bool, Field(description="Include withdrawn links.")] = False
    as_of: AsOf = None
    known_at: KnownAt = None
    limit: Limit = validate.LIST_LIMIT_DEFAULT
    offset: Offset = 0


def _links(store: Any, a: ListCausalLinks, namespaces: list[str]) -> list[CausalLink]:
    from stash_pipeline.memory import graph

    return graph.list_causal_links(
        store, namespaces, include_withdrawn=a.include_withdrawn, as_of=a.as_of, known_at=a.known_at,
        limit=a.limit, offset=a.offset,
    )


LIST_CAUSAL_LINKS = Operation(
    name="list_causal_links",
    description="Causal links (cause fact → effect fact or failure), oldest first.",
    arguments=ListCausalLinks,
    call=_links,
    right="read",
    reach="trees",
    effect="read",
    result=CausalLink,
    paged=True,
    cli=CliView(path=("causal", "list"), example="stash causal list -n /projects/x", columns=CAUSAL_COLUMNS),
)


class CreateCausalLink(Arguments):
    cause_id: Annotated[int, Field(description="Id of the cause fact.", ge=1)]
    effect_id: Annotated[int | None, Field(description="Id of the effect fact (or give effect_failure_id).", ge=1)] = None
    effect_failure_id: Annotated[int | None, Field(description="Id of the effect failure.", ge=1)] = None
    confidence: Confidence = 0.8
    namespace: Namespace
    rationale: Annotated[str | None, Field(description="Why you believe it.")] = None


def _create(store: Any, a: CreateCausalLink, namespace: str) -> CausalLink:
    from stash_pipeline.memory import graph

    return graph.create_causal_link(
        store, namespace, a.cause_id, effect_id=a.effect_id, effect_failure_id=a.effect_failure_id,
        confidence=a.confidence, rationale=a.rationale,
    )


CREATE_CAUSAL_LINK = Operation(
    name="create_causal_link",
    description="Assert that a fact causes another fact or a failure; both current, in the namespace's tree.",
    arguments=CreateCausalLink,
    call=_create,
    right="write",
    reach="namespace",
    effect="write",
    result=CausalLink,
    cli=CliView(
        path=("causal", "create"),
        example="stash causal create -n /projects/x --cause-id 7 --effect-failure-id 2 --confidence 0.9",
    ),
)


class TraceCausalChain(Arguments):
    fact_id: Annotated[int, Field(description="Fact to start from.", ge=1)]
    direction: Annotated[
        validate.TraceDirection, Field(description="forward = effects of the fact; backward = its causes.")
    ] = "forward"
    max_depth: Annotated[
        int, Field(description=f"Maximum chain length (1-{validate.TRACE_DEPTH_MAX}).", ge=1, le=validate.TRACE_DEPTH_MAX)
    ] = validate.TRACE_DEPTH_DEFAULT
    namespaces: Namespaces = None
    as_of: AsOf = None
    known_at: KnownAt = None


def _trace(store: Any, a: TraceCausalChain, namespaces: list[str] | None) -> CausalTrace:
    from stash_pipeline.memory import graph

    steps = graph.trace_causal_chain(
        store, a.fact_id, direction=a.direction, max_depth=a.max_depth, namespaces=namespaces,
        as_of=a.as_of, known_at=a.known_at,
    )
    return CausalTrace(fact_id=a.fact_id, direction=a.direction, steps=steps)


TRACE_CAUSAL_CHAIN = Operation(
    name="trace_causal_chain",
    description="Follow causal links from a fact (cycle-safe, depth-capped, in scope).",
    arguments=TraceCausalChain,
    call=_trace,
    right="read",
    # without namespaces: every tree the caller may read (unrestricted at a shell)
    reach="trees_or_by_id",
    effect="read",
    result=CausalTrace,
    cli=CliView(
        path=("causal", "trace"),
        example="stash causal trace 7 --direction backward --max-depth 5 --mermaid",
        arguments={"fact_id": "FACT_ID"},
        names={"max_depth": ("--depth",)},
        columns=STEP_COLUMNS,
    ),
)


class DeleteCausalLink(Arguments):
    id: RecordId


def _delete(store: Any, a: DeleteCausalLink, namespaces: list[str] | None) -> Deleted:
    from stash_pipeline.memory import graph

    return graph.delete_causal_link(store, a.id, namespaces)


DELETE_CAUSAL_LINK = Operation(
    name="delete_causal_link",
    description="Delete a causal link.",
    arguments=DeleteCausalLink,
    call=_delete,
    right="write",
    reach="by_id",
    effect="destructive_idempotent",
    result=Deleted,
    cli=CliView(path=("causal", "delete"), example="stash causal delete 4", arguments={"id": "LINK_ID"}),
)

OPERATIONS = (
    QUERY_RELATIONSHIPS,
    QUERY_PATTERNS,
    LIST_CAUSAL_LINKS,
    CREATE_CAUSAL_LINK,
    TRACE_CAUSAL_CHAIN,
    DELETE_CAUSAL_LINK,
)
