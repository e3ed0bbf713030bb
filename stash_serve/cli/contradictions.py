"""``stash contradictions list|resolve``, derived from ``stash_pipeline.operations.contradictions``."""

from __future__ import annotations

from typing import Any

import click

from stash_pipeline.operations import contradictions as ops
from stash_serve.cli.derive import command
from stash_serve.cli.output import emit_json


@click.group("contradictions")
def contradictions_group() -> None:
    """List and resolve contradictions between facts.

    \b
    Example:
      stash contradictions list -n /projects/x
    """


def _resolved(result: Any, as_json: bool, args: Any) -> None:
    if as_json:
        emit_json(result)
        return
    click.echo(f"resolved contradiction {result.contradiction.id} ({result.contradiction.resolution})")
    for key in ("old_fact", "new_fact"):
        fact = getattr(result, key)
        state = "current" if fact.current else "retired"
        click.echo(f"  {key.replace('_', ' ')} {fact.id}: {state}")


contradictions_group.add_command(command(ops.LIST_CONTRADICTIONS))
contradictions_group.add_command(command(ops.RESOLVE_CONTRADICTION, render=_resolved))

COMMANDS = (contradictions_group,)
