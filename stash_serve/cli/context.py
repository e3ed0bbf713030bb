"""``stash context set|get|clear``: the current focus of a namespace."""

from __future__ import annotations

import click

from stash_serve.cli import base
from stash_serve.cli.output import emit_json, fields


@click.group("context")
def context_group() -> None:
    """Set, get or clear the current focus of a namespace (expires after a TTL).

    \b
    Example:
      stash context set "migrating the billing service" -n /projects/x --ttl 2h
    """


@context_group.command("set")
@click.argument("focus")
@base.namespace_option()
@click.option("--ttl", default=None, help="Lifetime, e.g. 30m, 1h, 2d (default STASH_CONTEXT_TTL).")
@base.json_option
def context_set(focus: str, namespace: str, ttl: str | None, as_json: bool) -> None:
    """Set the focus of a namespace (replaces the previous one).

    \b
    Example:
      stash context set "release 2.3 freeze" -n /projects/x --ttl 1h
    """
    from stash_pipeline.memory import context

    lifetime = base.parse_duration(ttl, "--ttl")
    result = context.set_(base.store(), namespace, base.read_content(focus), ttl=lifetime)
    if as_json:
        emit_json(result)
    else:
        click.echo(f"focus of {result.namespace} set until {result.expires_at:%Y-%m-%d %H:%M:%S %Z}")


@context_group.command("get")
@base.namespace_option()
@base.json_option
def context_get(namespace: str, as_json: bool) -> None:
    """Show the current focus of a namespace (nothing once expired).

    \b
    Example:
      stash context get -n /projects/x
    """
    from stash_pipeline.memory import context

    result = context.get(base.store(), namespace)
    if as_json:
        emit_json(result)
    elif result is None:
        click.echo(f"no current focus in {namespace}")
    else:
        fields(result)


@context_group.command("clear")
@base.namespace_option()
def context_clear(namespace: str) -> None:
    """Clear the focus of a namespace.

    \b
    Example:
      stash context clear -n /projects/x
    """
    from stash_pipeline.memory import context

    cleared = context.clear(base.store(), namespace)
    click.echo(f"focus of {namespace} cleared" if cleared else f"no focus was set in {namespace}")


COMMANDS = (context_group,)
