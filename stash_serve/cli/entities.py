"""``stash entities show|merge|split`` and ``stash purge entity``, derived from
``stash_pipeline.operations.entities``."""

from __future__ import annotations

from typing import Any

import click

from stash_pipeline.operations import entities as ops
from stash_serve.cli.derive import command
from stash_serve.cli.output import emit_json, table

FACT_COLUMNS = ("id", "entity", "property", "value", "valid_from", "valid_until", "current", "content")
RELATIONSHIP_COLUMNS = ("id", "from_entity", "relation_type", "to_entity", "source_fact_id")


@click.group("entities")
def entities_group() -> None:
    """Show an entity with everything known about it; merge and split entities.

    \b
    Example:
      stash entities show Alice -n /team
    """


def _by_id_or_name(values: dict[str, Any]) -> dict[str, Any]:
    """ENTITY is an id when it is all digits, otherwise one of the entity's names."""
    name = values.get("name")
    if isinstance(name, str) and name.isdigit():
        return {**values, "id": int(name), "name": None}
    return values


def _shown(got: Any, as_json: bool, args: Any) -> None:
    if as_json:
        emit_json(got)
        return
    head = got.entity
    click.echo(f"entity {head['id']} in {head['namespace']}: {head['name']}")
    click.echo("aliases: " + ", ".join(a["alias"] for a in got.aliases))
    if got.merged_from:
        click.echo("merged from: " + ", ".join(f"{m['id']} ({m['name']})" for m in got.merged_from))
    click.echo("\ntimeline:")
    table(got.timeline, FACT_COLUMNS)
    click.echo("\nrelationships:")
    table(got.relationships, RELATIONSHIP_COLUMNS)
    click.echo(f"\ncausal links: {len(got.causal_links)}, corrections: {len(got.corrections)}")


def _merged(result: Any, as_json: bool, args: Any) -> None:
    if as_json:
        emit_json(result)
        return
    moved = result.moved
    click.echo(f"merged entity {result.merged_id} into {result.id}: aliases {', '.join(moved.aliases) or '-'}, "
               f"{moved.facts} fact(s), {moved.relationship_ends} relationship end(s)")


def _split(result: Any, as_json: bool, args: Any) -> None:
    if as_json:
        emit_json(result)
        return
    how = "revived" if result.revived else "new"
    click.echo(f"split {', '.join(args.aliases)} from entity {result.id} into {how} entity {result.new_id}: "
               f"{result.moved.facts} fact(s), {result.moved.relationship_ends} relationship end(s)")


def _purged(result: Any, as_json: bool, args: Any) -> None:
    if as_json:
        emit_json(result)
        return
    counts = ", ".join(f"{n} {kind}(s)" for kind, n in result.erased.erased.items())
    click.echo(f"purged entity {result.entity_id} from {result.namespace}: {counts or 'nothing else'}")


def _describe(store: Any, args: Any) -> str:
    from stash_pipeline.memory import entities

    got = entities.get_entity(store, args.id, limit=1)
    head = got.entity
    return f"entity {head['id']} in {head['namespace']}: {head['name']} and everything about it"


# `stash purge entity`: registered on the `purge` group in stash_serve.cli.episodes
purge_entity = command(ops.PURGE_ENTITY, render=_purged, describe=_describe)

entities_group.add_command(command(ops.GET_ENTITY, render=_shown, prepare=_by_id_or_name))
entities_group.add_command(command(ops.MERGE_ENTITIES, render=_merged))
entities_group.add_command(command(ops.SPLIT_ENTITY, render=_split))

COMMANDS = (entities_group,)
