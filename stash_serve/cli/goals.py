"""``stash goal create|list|show|update|complete|abandon|delete``, derived from
``stash_pipeline.operations.goals``."""

from __future__ import annotations

from typing import Any

import click

from stash_pipeline.operations import goals as ops
from stash_serve.cli.derive import command, sentence
from stash_serve.cli.output import emit_json


@click.group("goal")
def goal_group() -> None:
    """Goals as a tree: create, update, complete (parents auto-complete), abandon, delete.

    \b
    Example:
      stash goal create "Ship billing v2" -n /projects/x --priority 2
    """


def _finished(verb: str) -> Any:
    def render(result: Any, as_json: bool, args: Any) -> None:
        if as_json:
            emit_json(result)
            return
        click.echo(f"{verb} goal {result.goal.id}")
        if result.auto_completed:
            click.echo(f"  also completed parent goal(s) {', '.join(map(str, result.auto_completed))}")

    return render


def _describe(store: Any, args: Any) -> str:
    from stash_pipeline.memory import goals

    goal = goals.show(store, args.id)
    counts = goal.sub_goals or {}
    return f"goal {goal.id}: {goal.content[:200]} ({counts.get('total', 0)} sub-goal(s))"


def _deleted(result: Any, args: Any) -> str:
    return f"deleted goal(s) {', '.join(map(str, result.deleted_ids or [result.id]))}"


goal_group.add_command(command(ops.CREATE_GOAL, render=sentence(lambda g, a: f"created goal {g.id} in {g.namespace}")))
goal_group.add_command(command(ops.LIST_GOALS))
goal_group.add_command(command(ops.SHOW_GOAL))
goal_group.add_command(
    command(ops.UPDATE_GOAL, render=sentence(lambda g, a: f"updated goal {g.id} (priority {g.priority})"))
)
goal_group.add_command(command(ops.COMPLETE_GOAL, render=_finished("completed")))
goal_group.add_command(command(ops.ABANDON_GOAL, render=_finished("abandoned")))
goal_group.add_command(
    command(ops.DELETE_GOAL, render=sentence(_deleted), describe=_describe, question="delete it and its sub-goals?")
)

COMMANDS = (goal_group,)
