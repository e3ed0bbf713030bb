"""``stash failure create|list|show|delete``, derived from ``stash_pipeline.operations.failures``."""

from __future__ import annotations

import click

from stash_pipeline.operations import failures as ops
from stash_serve.cli.derive import command, sentence


@click.group("failure")
def failure_group() -> None:
    """Record what went wrong, why, and the lesson.

    \b
    Example:
      stash failure create "Deploy broke checkout" -n /projects/x --reason "missing migration" --lesson "migrate first"
    """


failure_group.add_command(
    command(ops.CREATE_FAILURE, render=sentence(lambda f, a: f"recorded failure {f.id} in {f.namespace}"))
)
failure_group.add_command(command(ops.LIST_FAILURES))
failure_group.add_command(command(ops.SHOW_FAILURE))
failure_group.add_command(command(ops.DELETE_FAILURE, render=sentence(lambda r, a: f"deleted failure {r.id}")))

COMMANDS = (failure_group,)
