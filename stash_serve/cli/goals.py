"""``stash goal create|list|show|update|complete|abandon|delete``."""

from __future__ import annotations

from typing import Any

import click

from stash_serve.cli import base
from stash_serve.cli.output import emit_json, show

GOAL_COLUMNS = ("id", "namespace", "parent_id", "status", "priority", "content")


@click.group("goal")
def goal_group() -> None:
    """Goals as a tree: create, update, complete (parents auto-complete), abandon, delete.

    \b
    Example:
      stash goal create "Ship billing v2" -n /projects/x --priority 2
    """


@goal_group.command("create")
@click.argument("content")
@base.namespace_option()
@click.option("--parent-id", type=int, default=None, help="Parent goal (same namespace tree).")
@click.option("--priority", type=int, default=0, show_default=True, help="Higher is more important.")
@base.json_option
def goal_create(content: str, namespace: str, parent_id: int | None, priority: int, as_json: bool) -> None:
    """Create a goal, optionally under a parent goal.

    \b
    Example:
      stash goal create "Migrate invoices" -n /projects/x --parent-id 1
    """
    from stash_pipeline.memory import goals

    goal = goals.create(base.store(), namespace, base.read_content(content), parent_id=parent_id, priority=priority)
    if as_json:
        emit_json(goal)
    else:
        click.echo(f"created goal {goal.id} in {goal.namespace}")


@goal_group.command("list")
@base.namespaces_option()
@click.option("--status", type=click.Choice(["active", "completed", "abandoned"]), default=None, help="Only this status.")
@click.option("--parent-id", type=int, default=None, help="Only sub-goals of this goal.")
@click.option("--top-level", is_flag=True, help="Only goals without a parent.")
@base.limit_option()
@base.offset_option
@base.json_option
def goal_list(
    namespaces: str, status: str | None, parent_id: int | None, top_level: bool, limit: int, offset: int, as_json: bool
) -> None:
    """List goals.

    \b
    Example:
      stash goal list -n /projects/x --status active
    """
    from stash_pipeline.memory import goals

    rows = goals.list_(
        base.store(), namespaces, status=status, parent_id=parent_id, top_level_only=top_level, limit=limit, offset=offset
    )
    show(rows, as_json, GOAL_COLUMNS)


@goal_group.command("show")
@click.argument("goal_id", type=int)
@base.json_option
def goal_show(goal_id: int, as_json: bool) -> None:
    """Show a goal with its sub-goal counts and notes.

    \b
    Example:
      stash goal show 1
    """
    from stash_pipeline.memory import goals

    show(goals.show(base.store(), goal_id), as_json)


@goal_group.command("update")
@click.argument("goal_id", type=int)
@click.option("--content", default=None, help="New text.")
@click.option("--priority", type=int, default=None, help="New priority (0 is allowed).")
@click.option("--note", default=None, help="Append a progress note.")
@base.json_option
def goal_update(goal_id: int, content: str | None, priority: int | None, note: str | None, as_json: bool) -> None:
    """Change a goal's text or priority, or append a note.

    \b
    Example:
      stash goal update 1 --priority 0 --note "deprioritised after the freeze"
    """
    from stash_pipeline.memory import goals

    goal = goals.update(base.store(), goal_id, content=content, priority=priority, note=note)
    if as_json:
        emit_json(goal)
    else:
        click.echo(f"updated goal {goal.id} (priority {goal.priority})")


def _finish(verb: str, result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit_json(result)
        return
    goal = result["goal"]
    click.echo(f"{verb} goal {goal.id}")
    if result.get("auto_completed"):
        click.echo(f"  also completed parent goal(s) {', '.join(map(str, result['auto_completed']))}")


@goal_group.command("complete")
@click.argument("goal_id", type=int)
@click.option("--note", "--notes", "note", default=None, help="Closing note.")
@base.json_option
def goal_complete(goal_id: int, note: str | None, as_json: bool) -> None:
    """Complete a goal; parents whose sub-goals are all done complete too.

    \b
    Example:
      stash goal complete 3 --note "merged and deployed"
    """
    from stash_pipeline.memory import goals

    _finish("completed", goals.complete(base.store(), goal_id, note=note), as_json)


@goal_group.command("abandon")
@click.argument("goal_id", type=int)
@click.option("--note", "--notes", "note", default=None, help="Why it was abandoned.")
@base.json_option
def goal_abandon(goal_id: int, note: str | None, as_json: bool) -> None:
    """Abandon a goal.

    \b
    Example:
      stash goal abandon 3 --note "superseded by the new plan"
    """
    from stash_pipeline.memory import goals

    _finish("abandoned", goals.abandon(base.store(), goal_id, note=note), as_json)


@goal_group.command("delete")
@click.argument("goal_id", type=int)
@base.yes_option
def goal_delete(goal_id: int, yes: bool) -> None:
    """Delete a goal and its sub-goals (asks first).

    \b
    Example:
      stash goal delete 3 --yes
    """
    from stash_pipeline.memory import goals

    store = base.store()
    goal = goals.show(store, goal_id)
    if not yes:
        counts = goal.sub_goals or {}
        click.echo(f"goal {goal.id}: {goal.content[:200]} ({counts.get('total', 0)} sub-goal(s))", err=True)
    base.confirm("delete it and its sub-goals?", yes)
    result = goals.delete(store, goal_id)
    deleted = result.get("deleted_ids") or [goal_id]
    click.echo(f"deleted goal(s) {', '.join(map(str, deleted))}")


COMMANDS = (goal_group,)
