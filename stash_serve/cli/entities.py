"""``stash entities show|merge|split``."""

from __future__ import annotations

import click

from stash_serve.cli import base
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


@entities_group.command("show")
@click.argument("entity")
@base.namespaces_option(default=None)
@click.option("--as-of", default=None, help="Facts, relationships and links holding at this time (event time, ISO 8601; default now).")
@click.option("--known-at", default=None, help="As Stash knew them at this time (system time, ISO 8601; default now).")
@base.json_option
def entities_show(entity: str, namespaces: str | None, as_of: str | None, known_at: str | None, as_json: bool) -> None:
    """An entity (by id or by any of its names): aliases, facts, relationships, causal links, timeline.

    \b
    Example:
      stash entities show "Alice Chen" -n /team --json
    """
    from stash_pipeline.memory import entities

    by_id = entity.isdigit()
    times = {"as_of": base.parse_time(as_of, "--as-of"), "known_at": base.parse_time(known_at, "--known-at")}
    got = entities.get_entity(
        base.store(), int(entity) if by_id else None, name=None if by_id else entity, namespaces=namespaces, **times
    )
    if as_json:
        emit_json(got)
        return
    head = got["entity"]
    click.echo(f"entity {head['id']} in {head['namespace']}: {head['name']}")
    click.echo("aliases: " + ", ".join(a["alias"] for a in got["aliases"]))
    if got["merged_from"]:
        click.echo("merged from: " + ", ".join(f"{m['id']} ({m['name']})" for m in got["merged_from"]))
    click.echo("\ntimeline:")
    table(got["timeline"], FACT_COLUMNS)
    click.echo("\nrelationships:")
    table(got["relationships"], RELATIONSHIP_COLUMNS)
    click.echo(f"\ncausal links: {len(got['causal_links'])}, corrections: {len(got['corrections'])}")


@entities_group.command("merge")
@click.argument("keep_id", type=int)
@click.argument("merge_id", type=int)
@click.option("--note", default=None, help="Why (kept with the correction).")
@base.json_option
def entities_merge(keep_id: int, merge_id: int, note: str | None, as_json: bool) -> None:
    """Merge entity MERGE_ID into KEEP_ID (undo: split KEEP_ID with the merged aliases).

    \b
    Example:
      stash entities merge 3 7 --note "Ally is Alice"
    """
    from stash_pipeline.memory import entities

    result = entities.merge_entities(base.store(), keep_id, merge_id, note=note)
    if as_json:
        emit_json(result)
        return
    moved = result["moved"]
    click.echo(f"merged entity {merge_id} into {keep_id}: aliases {', '.join(moved['aliases']) or '-'}, "
               f"{moved['facts']} fact(s), {moved['relationship_ends']} relationship end(s)")


@entities_group.command("split")
@click.argument("entity_id", type=int)
@click.argument("aliases", nargs=-1, required=True)
@click.option("--note", default=None, help="Why (kept with the correction).")
@base.json_option
def entities_split(entity_id: int, aliases: tuple[str, ...], note: str | None, as_json: bool) -> None:
    """Move ALIASES of an entity, with the facts written with them, to another entity.

    When the aliases are exactly those a merge brought in, the merged entity comes back.

    \b
    Example:
      stash entities split 3 Ally --note "two different people"
    """
    from stash_pipeline.memory import entities

    result = entities.split_entity(base.store(), entity_id, list(aliases), note=note)
    if as_json:
        emit_json(result)
        return
    how = "revived" if result["revived"] else "new"
    click.echo(f"split {', '.join(aliases)} from entity {entity_id} into {how} entity {result['new_id']}: "
               f"{result['moved']['facts']} fact(s), {result['moved']['relationship_ends']} relationship end(s)")


COMMANDS = (entities_group,)
