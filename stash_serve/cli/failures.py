"""``stash failure create|list|show|delete``."""

from __future__ import annotations

import click

from stash_serve.cli import base
from stash_serve.cli.output import emit_json, show

FAILURE_COLUMNS = ("id", "namespace", "goal_id", "content", "lesson")


@click.group("failure")
def failure_group() -> None:
    """Record what went wrong, why, and the lesson.

    \b
    Example:
      stash failure create "Deploy broke checkout" -n /projects/x --reason "missing migration" --lesson "migrate first"
    """


@failure_group.command("create")
@click.argument("content")
@base.namespace_option()
@click.option("--reason", required=True, help="Why it failed.")
@click.option("--lesson", required=True, help="What to do differently.")
@click.option("--goal-id", type=int, default=None, help="The goal it belongs to.")
@base.json_option
def failure_create(content: str, namespace: str, reason: str, lesson: str, goal_id: int | None, as_json: bool) -> None:
    """Record a failure.

    \b
    Example:
      stash failure create "Cache stampede at 9am" -n /projects/x --reason "cold cache" --lesson "pre-warm"
    """
    from stash_pipeline.memory import failures

    failure = failures.create(base.store(), namespace, base.read_content(content), reason, lesson, goal_id=goal_id)
    if as_json:
        emit_json(failure)
    else:
        click.echo(f"recorded failure {failure.id} in {failure.namespace}")


@failure_group.command("list")
@base.namespaces_option()
@click.option("--goal-id", type=int, default=None, help="Only failures of this goal.")
@base.limit_option()
@base.offset_option
@base.json_option
def failure_list(namespaces: str, goal_id: int | None, limit: int, offset: int, as_json: bool) -> None:
    """List failures.

    \b
    Example:
      stash failure list -n /projects/x
    """
    from stash_pipeline.memory import failures

    show(failures.list_(base.store(), namespaces, goal_id=goal_id, limit=limit, offset=offset), as_json, FAILURE_COLUMNS)


@failure_group.command("show")
@click.argument("failure_id", type=int)
@base.json_option
def failure_show(failure_id: int, as_json: bool) -> None:
    """Show one failure.

    \b
    Example:
      stash failure show 2
    """
    from stash_pipeline.memory import failures

    show(failures.show(base.store(), failure_id), as_json)


@failure_group.command("delete")
@click.argument("failure_id", type=int)
def failure_delete(failure_id: int) -> None:
    """Delete a failure.

    \b
    Example:
      stash failure delete 2
    """
    from stash_pipeline.memory import failures

    failures.delete(base.store(), failure_id)
    click.echo(f"deleted failure {failure_id}")


COMMANDS = (failure_group,)
