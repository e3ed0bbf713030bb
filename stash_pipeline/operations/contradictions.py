"""Contradiction operations: list_contradictions, resolve_contradiction.

The library side is ``stash_pipeline.memory.contradictions`` (imported inside each call,
so the declarations load without the database layer).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from stash_pipeline.memory import validate
from stash_pipeline.models import Contradiction, Resolution
from stash_pipeline.operations.base import Arguments, CliView, Operation
from stash_pipeline.operations.fields import Limit, Namespaces, Offset, RecordId


class ListContradictions(Arguments):
    namespaces: Namespaces = None
    include_resolved: Annotated[bool, Field(description="Also list resolved ones.")] = False
    limit: Limit = validate.LIST_LIMIT_DEFAULT
    offset: Offset = 0


def _list(store: Any, a: ListContradictions, namespaces: list[str]) -> list[Contradiction]:
    from stash_pipeline.memory import contradictions

    return contradictions.list_(store, namespaces, include_resolved=a.include_resolved, limit=a.limit, offset=a.offset)


LIST_CONTRADICTIONS = Operation(
    name="list_contradictions",
    description="Contradictions between facts, newest first (unresolved only by default).",
    arguments=ListContradictions,
    call=_list,
    right="read",
    reach="trees",
    effect="read",
    result=Contradiction,
    paged=True,
    cli=CliView(
        path=("contradictions", "list"),
        example="stash contradictions list -n /projects/x --include-resolved --json",
        names={"include_resolved": ("--all",)},
        columns=("id", "namespace", "old_fact_id", "new_fact_id", "classification", "resolved", "explanation"),
    ),
)


class ResolveContradiction(Arguments):
    id: RecordId
    resolution: Annotated[
        validate.ContradictionAction,
        Field(description="keep_new retires the old fact, keep_old the new one; neither withdraws both."),
    ]
    note: Annotated[str | None, Field(description="Why; kept with the resolution.")] = None


def _resolve(store: Any, a: ResolveContradiction, namespaces: list[str] | None) -> Resolution:
    from stash_pipeline.memory import contradictions

    return contradictions.resolve(store, a.id, a.resolution, note=a.note, namespaces=namespaces)


RESOLVE_CONTRADICTION = Operation(
    name="resolve_contradiction",
    description="Resolve a contradiction by acting on its two facts.",
    arguments=ResolveContradiction,
    call=_resolve,
    right="write",
    reach="by_id",
    effect="destructive",
    result=Resolution,
    cli=CliView(
        path=("contradictions", "resolve"),
        example='stash contradictions resolve 3 --resolution keep_new --note "confirmed with the team"',
        arguments={"id": "CONTRADICTION_ID"},
        names={"resolution": ("--action",)},
    ),
)

OPERATIONS = (LIST_CONTRADICTIONS, RESOLVE_CONTRADICTION)
