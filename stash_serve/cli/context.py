"""``stash context set|get|clear``: the current focus of a namespace, derived from
``stash_pipeline.operations.context``."""

from __future__ import annotations

from typing import Any

import click

from stash_pipeline.operations import context as ops
from stash_serve.cli.derive import command, sentence
from stash_serve.cli.output import emit_json, fields


@click.group("context")
def context_group() -> None:
    """Set, get or clear the current focus of a namespace (expires after a TTL).

    \b
    Example:
      stash context set "migrating the billing service" -n /projects/x --ttl 2h
    """


_set = sentence(lambda r, a: f"focus of {r.namespace} set until {r.expires_at:%Y-%m-%d %H:%M:%S %Z}")


def _got(result: Any, as_json: bool, args: Any) -> None:
    if as_json:
        emit_json(result.context)  # the record itself (null when none), as a shell reader expects
    elif result.context is None:
        click.echo(f"no current focus in {args.namespace}")
    else:
        fields(result.context)


_cleared = sentence(
    lambda r, a: f"focus of {a.namespace} cleared" if r.cleared else f"no focus was set in {a.namespace}"
)


context_group.add_command(command(ops.SET_CONTEXT, render=_set))
context_group.add_command(command(ops.GET_CONTEXT, render=_got))
context_group.add_command(command(ops.CLEAR_CONTEXT, render=_cleared))

COMMANDS = (context_group,)
