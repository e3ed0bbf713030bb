"""Goal operations: list_goals, create_goal, show_goal, update_goal, complete_goal,
abandon_goal, delete_goal.

The library side is ``stash_pipeline.memory.goals`` (imported inside each call, so the
declarations load without the database layer).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from stash_pipeline.memory import validate
from stash_pipeline.models import Goal, GoalDeletion, GoalFinish
from stash_pipeline.operations.base import Arguments, CliView, Operation, Scope
from stash_pipeline.operations.fields import Limit, Namespace, Namespaces, Offset, RecordId

GOAL_COLUMNS = ("id", "namespace", "parent_id", "status", "priority", "content")


class ListGoals(Arguments):
    namespaces: Namespaces = None
    status: Annotated[validate.GoalStatus | None, Field(description="Only this status.")] = None
    parent_id: Annotated[int | None, Field(description="Only direct sub-goals of this goal.", ge=1)] = None
    top_level_only: Annotated[bool, Field(description="Only goals without a parent.")] = False
    limit: Limit = validate.LIST_LIMIT_DEFAULT
    offset: Offset = 0


def _list(store: Any, a: ListGoals, scope: Scope) -> list[Goal]:
    from stash_pipeline.memory import goals

    # the listed trees, and a parent shown only inside the caller's own trees
    return goals.list_(
        store, scope.read(a.namespaces), status=a.status, parent_id=a.parent_id, top_level_only=a.top_level_only,
        limit=a.limit, offset=a.offset, refs_within=scope.by_id("read"),
    )


LIST_GOALS = Operation(
    name="list_goals",
    description="Goals (sub-goals included unless top_level_only), highest priority first, then oldest.",
    arguments=ListGoals,
    call=_list,
    right="read",
    reach="scope",
    effect="read",
    result=Goal,
    paged=True,
    cli=CliView(
        path=("goal", "list"),
        example="stash goal list -n /projects/x --status active",
        names={"top_level_only": ("--top-level",)},
        columns=GOAL_COLUMNS,
    ),
)


class CreateGoal(Arguments):
    content: Annotated[str, Field(description="The outcome to reach (spans several sessions).")]
    parent_id: Annotated[int | None, Field(description="Parent goal (same namespace tree).", ge=1)] = None
    priority: Annotated[int, Field(description="Higher comes first.", ge=-1000, le=1000)] = 0
    namespace: Namespace


def _create(store: Any, a: CreateGoal, scope: Scope) -> Goal:
    from stash_pipeline.memory import goals

    # a write to one namespace; its parent_id is looked up within the caller's trees
    namespace = scope.write(a.namespace)
    return goals.create(
        store, namespace, a.content, parent_id=a.parent_id, priority=a.priority, namespaces=scope.by_id("write")
    )


CREATE_GOAL = Operation(
    name="create_goal",
    description="Create a goal, optionally under a parent goal.",
    arguments=CreateGoal,
    call=_create,
    right="write",
    reach="scope",
    effect="write",
    result=Goal,
    cli=CliView(
        path=("goal", "create"),
        example='stash goal create "Migrate invoices" -n /projects/x --parent-id 1',
        arguments={"content": "CONTENT"},
        stdin=("content",),
    ),
)


class GoalById(Arguments):
    id: RecordId


def _show(store: Any, a: GoalById, namespaces: list[str] | None) -> Goal:
    from stash_pipeline.memory import goals

    return goals.show(store, a.id, namespaces=namespaces)


SHOW_GOAL = Operation(
    name="show_goal",
    description="One goal with its sub-goal counts and notes.",
    arguments=GoalById,
    call=_show,
    right="read",
    reach="by_id",
    effect="read",
    result=Goal,
    cli=CliView(path=("goal", "show"), example="stash goal show 1", arguments={"id": "GOAL_ID"}),
)


class UpdateGoal(Arguments):
    id: RecordId
    content: Annotated[str | None, Field(description="New wording.")] = None
    priority: Annotated[int | None, Field(description="New priority (0 allowed).", ge=-1000, le=1000)] = None
    note: Annotated[str | None, Field(description="A progress note to append.")] = None


def _update(store: Any, a: UpdateGoal, namespaces: list[str] | None) -> Goal:
    from stash_pipeline.memory import goals

    return goals.update(store, a.id, content=a.content, priority=a.priority, note=a.note, namespaces=namespaces)


UPDATE_GOAL = Operation(
    name="update_goal",
    description="Change a goal's text or priority, or append a progress note.",
    arguments=UpdateGoal,
    call=_update,
    right="write",
    reach="by_id",
    effect="write",
    result=Goal,
    cli=CliView(
        path=("goal", "update"),
        example='stash goal update 1 --priority 0 --note "deprioritised after the freeze"',
        arguments={"id": "GOAL_ID"},
    ),
)


class CompleteGoal(Arguments):
    id: RecordId
    note: Annotated[str | None, Field(description="Optional closing note (appended, never overwrites).")] = None


def _complete(store: Any, a: CompleteGoal, namespaces: list[str] | None) -> GoalFinish:
    from stash_pipeline.memory import goals

    return goals.complete(store, a.id, note=a.note, namespaces=namespaces)


COMPLETE_GOAL = Operation(
    name="complete_goal",
    description="Complete an active goal; a parent whose sub-goals are all done completes too.",
    arguments=CompleteGoal,
    call=_complete,
    right="write",
    reach="by_id",
    effect="write",
    result=GoalFinish,
    cli=CliView(
        path=("goal", "complete"),
        example='stash goal complete 3 --note "merged and deployed"',
        arguments={"id": "GOAL_ID"},
        names={"note": ("--notes",)},
    ),
)


class AbandonGoal(Arguments):
    id: RecordId
    note: Annotated[str | None, Field(description="Why it was abandoned (appended as a note).")] = None


def _abandon(store: Any, a: AbandonGoal, namespaces: list[str] | None) -> GoalFinish:
    from stash_pipeline.memory import goals

    return goals.abandon(store, a.id, note=a.note, namespaces=namespaces)


ABANDON_GOAL = Operation(
    name="abandon_goal",
    description="Abandon an active goal (sub-goals are not touched).",
    arguments=AbandonGoal,
    call=_abandon,
    right="write",
    reach="by_id",
    effect="write",
    result=GoalFinish,
    cli=CliView(
        path=("goal", "abandon"),
        example='stash goal abandon 3 --note "superseded by the new plan"',
        arguments={"id": "GOAL_ID"},
        names={"note": ("--notes",)},
    ),
)


def _delete(store: Any, a: GoalById, namespaces: list[str] | None) -> GoalDeletion:
    from stash_pipeline.memory import goals

    return goals.delete(store, a.id, namespaces=namespaces)


DELETE_GOAL = Operation(
    name="delete_goal",
    description="Delete a goal and its sub-goals.",
    arguments=GoalById,
    call=_delete,
    right="write",
    reach="by_id",
    effect="destructive_idempotent",
    result=GoalDeletion,
    cli=CliView(path=("goal", "delete"), example="stash goal delete 3 --yes", arguments={"id": "GOAL_ID"}),
)

OPERATIONS = (LIST_GOALS, CREATE_GOAL, SHOW_GOAL, UPDATE_GOAL, COMPLETE_GOAL, ABANDON_GOAL, DELETE_GOAL)
