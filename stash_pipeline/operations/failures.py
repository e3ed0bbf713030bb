"""Failure operations: list_failures, create_failure, show_failure, delete_failure.

The library side is ``stash_pipeline.memory.failures`` (imported inside each call, so the
declarations load without the database layer).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from stash_pipeline.memory import validate
from stash_pipeline.models import Deleted, Failure
from stash_pipeline.operations.base import Arguments, CliView, Operation, Scope
from stash_pipeline.operations.fields import Limit, Namespace, Namespaces, Offset, RecordId


class ListFailures(Arguments):
    namespaces: Namespaces = None
    goal_id: Annotated[int | None, Field(description="Only failures of this goal.", ge=1)] = None
    limit: Limit = validate.LIST_LIMIT_DEFAULT
    offset: Offset = 0


def _list(store: Any, a: ListFailures, scope: Scope) -> list[Failure]:
    from stash_pipeline.memory import failures

    # the listed trees, and a goal shown only inside the caller's own trees
    return failures.list_(
        store, scope.read(a.namespaces), goal_id=a.goal_id, limit=a.limit, offset=a.offset,
        refs_within=scope.by_id("read"),
    )


LIST_FAILURES = Operation(
    name="list_failures",
    description="Recorded failures, newest first.",
    arguments=ListFailures,
    call=_list,
    right="read",
    reach="scope",
    effect="read",
    result=Failure,
    paged=True,
    cli=CliView(
        path=("failure", "list"),
        example="stash failure list -n /projects/x",
        columns=("id", "namespace", "goal_id", "content", "lesson"),
    ),
)


class CreateFailure(Arguments):
    content: Annotated[str, Field(description="What was tried and failed.")]
    reason: Annotated[str, Field(description="Why it failed.")]
    lesson: Annotated[str, Field(description="What to do differently next time.")]
    goal_id: Annotated[int | None, Field(description="Goal it belongs to.", ge=1)] = None
    namespace: Namespace


def _create(store: Any, a: CreateFailure, scope: Scope) -> Failure:
    from stash_pipeline.memory import failures

    # a write to one namespace; its goal_id is looked up within the caller's trees
    namespace = scope.write(a.namespace)
    return failures.create(
        store, namespace, a.content, a.reason, a.lesson, goal_id=a.goal_id, namespaces=scope.by_id("write")
    )


CREATE_FAILURE = Operation(
    name="create_failure",
    description="Record a failed approach with its reason and lesson.",
    arguments=CreateFailure,
    call=_create,
    right="write",
    reach="scope",
    effect="write",
    result=Failure,
    cli=CliView(
        path=("failure", "create"),
        example='stash failure create "Cache stampede at 9am" -n /projects/x --reason "cold cache" --lesson "pre-warm"',
        arguments={"content": "CONTENT"},
        stdin=("content",),
    ),
)


class FailureById(Arguments):
    id: RecordId


def _show(store: Any, a: FailureById, namespaces: list[str] | None) -> Failure:
    from stash_pipeline.memory import failures

    return failures.show(store, a.id, namespaces=namespaces)


SHOW_FAILURE = Operation(
    name="show_failure",
    description="One failure by id.",
    arguments=FailureById,
    call=_show,
    right="read",
    reach="by_id",
    effect="read",
    result=Failure,
    cli=CliView(path=("failure", "show"), example="stash failure show 2", arguments={"id": "FAILURE_ID"}),
)


def _delete(store: Any, a: FailureById, namespaces: list[str] | None) -> Deleted:
    from stash_pipeline.memory import failures

    return failures.delete(store, a.id, namespaces=namespaces)


DELETE_FAILURE = Operation(
    name="delete_failure",
    description="Delete a failure (its lesson is lost; prefer keeping failures).",
    arguments=FailureById,
    call=_delete,
    right="write",
    reach="by_id",
    effect="destructive_idempotent",
    result=Deleted,
    cli=CliView(path=("failure", "delete"), example="stash failure delete 2", arguments={"id": "FAILURE_ID"}),
)

OPERATIONS = (LIST_FAILURES, CREATE_FAILURE, SHOW_FAILURE, DELETE_FAILURE)
