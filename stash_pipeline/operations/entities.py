"""Entity operations: get_entity, merge_entities, split_entity, purge_entity.

The library side is ``stash_pipeline.memory.entities`` (imported inside each call, so the
declarations load without the database layer). Descriptions are terse on purpose: every
character goes to every agent with the tool list. merge_entities is undone by
split_entity with the merged aliases (the merged entity comes back), a split by merging
the two again.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from stash_pipeline.memory import validate
from stash_pipeline.models import EntityMerge, EntityPurge, EntitySplit, EntityView
from stash_pipeline.operations.base import Arguments, CliView, Operation
from stash_pipeline.operations.fields import AsOf, KnownAt, Namespaces, Offset

EntityId = Annotated[int, Field(description="Entity id.", ge=1)]
Why = Annotated[str | None, Field(description="Why.")]


class GetEntity(Arguments):
    id: Annotated[int | None, Field(description="Entity id.", ge=1)] = None
    name: Annotated[str | None, Field(description="Or a name.")] = None
    namespaces: Namespaces = None
    as_of: AsOf = None
    known_at: KnownAt = None
    limit: Annotated[int, Field(description="Rows per list.", ge=1, le=validate.ENTITY_PAGE_MAX)] = validate.ENTITY_PAGE_DEFAULT
    offset: Offset = 0


def _get(store: Any, a: GetEntity, namespaces: list[str] | None) -> EntityView:
    from stash_pipeline.memory import entities

    return entities.get_entity(
        store, a.id, name=a.name, namespaces=namespaces, as_of=a.as_of, known_at=a.known_at,
        limit=a.limit, offset=a.offset,
    )


GET_ENTITY = Operation(
    name="get_entity",
    description="Entity: aliases, facts, links, timeline.",
    arguments=GetEntity,
    call=_get,
    right="read",
    reach="trees_or_by_id",
    effect="read",
    result=EntityView,
    cli=CliView(
        path=("entities", "show"),
        summary="An entity (by id or by any of its names): aliases, facts, relationships, causal links, timeline.",
        example='stash entities show "Alice Chen" -n /team --json',
        arguments={"name": "ENTITY"},
        hidden=("id",),
        help={"limit": "Rows per list (each list pages from --offset; the answer's next_offset names the next page)."},
    ),
)


class MergeEntities(Arguments):
    id: Annotated[int, Field(description="Kept.", ge=1)]
    merge_id: Annotated[int, Field(description="Merged.", ge=1)]
    note: Why = None


def _merge(store: Any, a: MergeEntities, namespaces: list[str] | None) -> EntityMerge:
    from stash_pipeline.memory import entities

    return entities.merge_entities(store, a.id, a.merge_id, note=a.note, namespaces=namespaces)


MERGE_ENTITIES = Operation(
    name="merge_entities",
    description="Merge merge_id into id.",
    arguments=MergeEntities,
    call=_merge,
    right="write",
    reach="by_id",
    effect="write",
    result=EntityMerge,
    cli=CliView(
        path=("entities", "merge"),
        summary="Merge entity MERGE_ID into KEEP_ID (undo: split KEEP_ID with the merged aliases).",
        example='stash entities merge 3 7 --note "Ally is Alice"',
        arguments={"id": "KEEP_ID", "merge_id": "MERGE_ID"},
        help={"note": "Why (kept with the correction)."},
    ),
)


class SplitEntity(Arguments):
    id: EntityId
    aliases: Annotated[list[str], Field(description="Its names to move.")]
    note: Why = None


def _split(store: Any, a: SplitEntity, namespaces: list[str] | None) -> EntitySplit:
    from stash_pipeline.memory import entities

    return entities.split_entity(store, a.id, a.aliases, note=a.note, namespaces=namespaces)


SPLIT_ENTITY = Operation(
    name="split_entity",
    description="Move aliases to another entity.",
    arguments=SplitEntity,
    call=_split,
    right="write",
    reach="by_id",
    effect="write",
    result=EntitySplit,
    cli=CliView(
        path=("entities", "split"),
        summary="Move ALIASES of an entity, with the facts written with them, to another entity; when they are "
        "exactly those a merge brought in, the merged entity comes back.",
        example='stash entities split 3 Ally --note "two different people"',
        arguments={"id": "ENTITY_ID", "aliases": "ALIASES"},
        help={"note": "Why (kept with the correction)."},
    ),
)

class PurgeEntity(Arguments):
    id: EntityId


def _purge(store: Any, a: PurgeEntity, namespaces: list[str] | None) -> EntityPurge:
    from stash_pipeline.memory import entities

    return entities.purge_entity(store, a.id, namespaces)


PURGE_ENTITY = Operation(
    name="purge_entity",
    description="Erase an entity, its facts, and all derived.",
    arguments=PurgeEntity,
    call=_purge,
    right="write",
    reach="by_id",
    effect="destructive_idempotent",
    result=EntityPurge,
    cli=CliView(
        path=("purge", "entity"),
        summary="Erase an entity for good: its names, every fact about it and relationship naming it, and "
        "everything derived from those (episodes that mention it stay).",
        example="stash purge entity 3 --yes",
        arguments={"id": "ENTITY_ID"},
    ),
)

OPERATIONS = (GET_ENTITY, MERGE_ENTITIES, SPLIT_ENTITY, PURGE_ENTITY)
