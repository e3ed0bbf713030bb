"""``stash namespace create|list|show|delete`` and ``stash init`` (the /self tree)."""

from __future__ import annotations

import click

from stash_serve.cli import base
from stash_serve.cli.output import emit_json, fields, show

NAMESPACE_COLUMNS = ("id", "slug", "name", "description", "created_at")


@click.group("namespace")
def namespace_group() -> None:
    """Create, list, show and delete namespaces (paths like /projects/x).

    \b
    Example:
      stash namespace create /projects/x --name "Project X"
    """


@namespace_group.command("create")
@click.argument("slug")
@click.option("--name", default=None, help="Display name (defaults to the path).")
@click.option("--description", default=None, help="What this namespace holds.")
@base.json_option
def namespace_create(slug: str, name: str | None, description: str | None, as_json: bool) -> None:
    """Create a namespace and any missing parents (like mkdir -p).

    \b
    Example:
      stash namespace create /projects/x --description "deploys and incidents"
    """
    from stash_pipeline.memory.namespaces import create

    result = create(base.store(), slug, name, description)
    if as_json:
        emit_json(result)
        return
    record = result["namespace"]
    click.echo(f"{'created' if result['created'] else 'updated'} {record.slug} (id {record.id})")


@namespace_group.command("list")
@base.namespaces_option(default=None)
@base.limit_option()
@base.offset_option
@base.json_option
def namespace_list(namespaces: str | None, limit: int, offset: int, as_json: bool) -> None:
    """List namespaces (all, or the trees under -n).

    \b
    Example:
      stash namespace list -n /projects
    """
    from stash_pipeline.memory.namespaces import list_ as list_namespaces

    show(list_namespaces(base.store(), namespaces, limit, offset), as_json, NAMESPACE_COLUMNS)


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
    fields(result["namespace"])
    click.echo("counts (tree):")
    for key, value in result["counts"].items():
        click.echo(f"  {key}: {value}")


@namespace_group.command("delete")
@click.argument("slug")
@base.yes_option
@base.json_option
def namespace_delete(slug: str, yes: bool, as_json: bool) -> None:
    """Delete a namespace tree and everything in it (asks first, showing the counts).

    \b
    Example:
      stash namespace delete /projects/old --yes
    """
    from stash_pipeline.memory.namespaces import delete

    store = base.store()
    preview = delete(store, slug, confirm=False)
    if not yes:
        click.echo(f"this deletes {', '.join(preview['namespaces'])}", err=True)
        counts = ", ".join(f"{v} {k}" for k, v in preview["counts"].items() if v)
        click.echo(f"with {counts or 'nothing in them'}", err=True)
    base.confirm("delete?", yes)
    result = delete(store, slug, confirm=True)
    if as_json:
        emit_json(result)
    else:
        click.echo(f"deleted {len(result['namespaces'])} namespace(s): {', '.join(result['namespaces'])}")


@click.command("init")
@base.json_option
def init_command(as_json: bool) -> None:
    """Create the /self tree (capabilities, limits, preferences) for the agent's self-model.

    \b
    Example:
      stash init
    """
    from stash_pipeline.memory.namespaces import init_self

    result = init_self(base.store())
    if as_json:
        emit_json(result)
        return
    created = result["namespaces_created"]
    click.echo(f"/self tree ready ({'created ' + ', '.join(created) if created else 'already present'})")


COMMANDS = (namespace_group, init_command)
