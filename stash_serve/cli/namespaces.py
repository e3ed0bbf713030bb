"""``stash namespace create|list|delete`` and ``stash init``, derived from
``stash_pipeline.operations.namespaces``; ``stash namespace show`` (no tool matches it)
is written here, with how the answers read at a shell and how ``delete`` asks."""

from __future__ import annotations

from typing import Any

import click

from stash_pipeline.operations import namespaces as ops
from stash_serve.cli import base
from stash_serve.cli.derive import command, sentence
from stash_serve.cli.output import emit_json, fields


@click.group("namespace")
def namespace_group() -> None:
    """Create, list, show and delete namespaces (paths like /projects/x).

    \b
    Example:
      stash namespace create /projects/x --name "Project X"
    """


def _describe_deletion(store: Any, args: Any) -> str:
    from stash_pipeline.memory.namespaces import delete

    preview = delete(store, args.namespace, confirm=False)
    counts = ", ".join(f"{v} {k}" for k, v in preview.counts.items() if v)
    return f"this deletes {', '.join(preview.namespaces)}\nwith {counts or 'nothing in them'}"


namespace_group.add_command(command(
    ops.CREATE_NAMESPACE,
    render=sentence(lambda r, a: f"{'created' if r.created else 'updated'} {r.slug} (id {r.id})"),
))
namespace_group.add_command(command(ops.LIST_NAMESPACES))


@namespace_group.command("show")
@click.argument("slug")
@base.json_option
def namespace_show(slug: str, as_json: bool) -> None:
    """Show a namespace and the row counts of its tree.

    \b
    Example:
      stash namespace show /projects/x
    """
    from stash_pipeline.memory.namespaces import show as show_namespace

    result = show_namespace(base.store(), slug)
    if as_json:
        emit_json(result)
        return
    fields(result.namespace)
    click.echo("counts (tree):")
    for key, value in result.counts.items():
        click.echo(f"  {key}: {value}")


namespace_group.add_command(command(
    ops.DELETE_NAMESPACE,
    # the shell asks (or takes --yes) where an agent passes confirm
    prepare=lambda values: {**values, "confirm": True},
    describe=_describe_deletion,
    question="delete?",
    render=sentence(lambda r, a: f"deleted {len(r.namespaces)} namespace(s): {', '.join(r.namespaces)}"),
))


def _self_tree(result: Any, args: Any) -> str:
    created = result.namespaces_created
    return f"/self tree ready ({'created ' + ', '.join(created) if created else 'already present'})"


init_command = command(ops.INIT, render=sentence(_self_tree))

COMMANDS = (namespace_group, init_command)
