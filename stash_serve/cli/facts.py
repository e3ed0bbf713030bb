"""Facts: ``stash facts`` (query) and ``stash fact show|assert|withdraw|purge``."""

from __future__ import annotations

from typing import Any

import click

from stash_serve.cli import base
from stash_serve.cli.output import emit_json, fields, show

FACT_COLUMNS = ("id", "namespace", "origin", "confidence", "current", "valid_from", "content")


def _times(**values: str | None) -> dict[str, Any]:
    """Parse ISO options before the store opens, so bad input fails without a database."""
    return {name: base.parse_time(value, "--" + name.replace("_", "-")) for name, value in values.items()}


@click.command("facts")
@base.namespaces_option()
@click.option("--entity", default=None, help="Only facts about this entity.")
@click.option("--property", "property_", default=None, help="Only facts of this property.")
@click.option("--origin", default=None, help="Only facts of this origin (e.g. asserted, synthesized).")
@click.option("--since", default=None, help="Valid from (event time) at or after (ISO 8601).")
@click.option("--until", default=None, help="Valid from (event time) before (ISO 8601).")
@click.option("--include-history", is_flag=True, help="Include superseded, expired and withdrawn facts.")
@click.option("--as-of", default=None, help="Facts true at this time (event time, ISO 8601; default now).")
@click.option("--known-at", default=None, help="As Stash knew them at this time (system time, ISO 8601; default now).")
@base.limit_option()
@base.offset_option
@base.json_option
def facts_command(
    namespaces: str, entity: str | None, property_: str | None, origin: str | None, since: str | None,
    until: str | None, include_history: bool, as_of: str | None, known_at: str | None, limit: int, offset: int,
    as_json: bool,
) -> None:
    """List facts, newest first (current ones only unless --include-history, --as-of or --known-at).

    \b
    Example:
      stash facts -n /projects/x --entity deploy --json
    """
    from stash_pipeline.memory import facts

    times = _times(since=since, until=until, as_of=as_of, known_at=known_at)
    rows = facts.query(
        base.store(), namespaces, entity=entity, property=property_, origin=origin,
        include_history=include_history, limit=limit, offset=offset, **times,
    )
    show(rows, as_json, FACT_COLUMNS)


@click.group("fact")
def fact_group() -> None:
    """Show, assert, withdraw or purge one fact.

    \b
    Example:
      stash fact assert "Deploys happen on Fridays" -n /projects/x --entity deploy --property day --value friday
    """


@fact_group.command("show")
@click.argument("fact_id", type=int)
@click.option("--lineage", is_flag=True, help="Also list where it came from and what was derived from it.")
@click.option("--as-of", default=None, help="Whether it was true at this time (event time, ISO 8601).")
@click.option("--known-at", default=None, help="As Stash knew it at this time (system time, ISO 8601).")
@base.json_option
def fact_show(fact_id: int, lineage: bool, as_of: str | None, known_at: str | None, as_json: bool) -> None:
    """Show one fact in any state (current, superseded, withdrawn).

    \b
    Example:
      stash fact show 7 --lineage
    """
    from stash_pipeline.memory import facts

    times = _times(as_of=as_of, known_at=known_at)
    store = base.store()
    if not lineage:
        show(facts.get(store, fact_id, **times), as_json)
        return
    result = facts.get_with_lineage(store, fact_id, **times)
    if as_json:
        emit_json(result)
        return
    fields(result["fact"])
    for key in ("parents", "children"):
        click.echo(f"{key}:")
        items = result.get(key) or []
        if not items:
            click.echo("  (none)")
        for item in items:
            click.echo("  - " + " ".join(f"{k}={v}" for k, v in dict(item).items() if v is not None))


@fact_group.command("assert")
@click.argument("content")
@base.namespace_option()
@click.option("--entity", default=None, help="Entity the fact is about (with --property).")
@click.option("--property", "property_", default=None, help="Property of the entity (with --entity).")
@click.option("--value", default=None, help="Value of the property.")
@click.option("--confidence", type=float, default=1.0, show_default=True, help="0-1.")
@click.option("--source-episode-ids", default=None, help="Comma-separated episode ids this fact comes from.")
@click.option("--supersede", is_flag=True, help="Retire current facts with the same entity/property and another value.")
@click.option("--valid-from", default=None, help="True in the world since (ISO 8601; default now).")
@click.option("--valid-until", default=None, help="True in the world until (ISO 8601; default open-ended).")
@base.json_option
def fact_assert(
    content: str, namespace: str, entity: str | None, property_: str | None, value: str | None,
    confidence: float, source_episode_ids: str | None, supersede: bool, valid_from: str | None,
    valid_until: str | None, as_json: bool,
) -> None:
    """Add a fact yourself (origin "asserted"), optionally citing its source episodes.

    \b
    Example:
      stash fact assert "Deploys use blue-green" -n /projects/x --source-episode-ids 12,13
    """
    from stash_pipeline.memory import facts
    from stash_pipeline.memory.validate import record_ids

    cited = record_ids(source_episode_ids, "--source-episode-ids")
    times = _times(valid_from=valid_from, valid_until=valid_until)
    result = facts.assert_fact(
        base.store(), namespace, base.read_content(content), entity=entity, property=property_, value=value,
        confidence=confidence, source_episode_ids=cited, supersede=supersede, **times,
    )
    if as_json:
        emit_json(result)
        return
    click.echo(f"asserted fact {result['fact'].id} in {result['fact'].namespace}")
    for contradiction in result.get("contradictions") or []:
        click.echo(f"  contradicts fact {contradiction.old_fact_id} (contradiction {contradiction.id})")
    if result.get("superseded_fact_ids"):
        click.echo(f"  superseded facts {', '.join(map(str, result['superseded_fact_ids']))}")


@fact_group.command("withdraw")
@click.argument("fact_id", type=int)
@click.option("--reason", required=True, help="Why it no longer holds (kept with the fact).")
@base.json_option
def fact_withdraw(fact_id: int, reason: str, as_json: bool) -> None:
    """Withdraw a fact (kept as history) and what was derived only from it.

    \b
    Example:
      stash fact withdraw 7 --reason "we moved to canary deploys"
    """
    from stash_pipeline.memory import facts

    result = facts.withdraw(base.store(), fact_id, reason)
    if as_json:
        emit_json(result)
        return
    click.echo(f"withdrew fact {result['fact_id']}")
    _print_cascade(result.get("cascade"))


# `stash purge fact`: registered on the `purge` group in stash_serve.cli.episodes
@click.command("fact")
@click.argument("fact_id", type=int)
@base.yes_option
@base.json_option
def purge_fact(fact_id: int, yes: bool, as_json: bool) -> None:
    """Erase one fact and what was derived from it.

    \b
    Example:
      stash purge fact 7 --yes
    """
    from stash_pipeline.memory import facts

    store = base.store()
    fact = facts.get(store, fact_id)
    if not yes:
        click.echo(f"fact {fact.id} in {fact.namespace}: {fact.content[:200]}", err=True)
    base.confirm("erase it permanently?", yes)
    result = facts.purge(store, fact_id)
    if as_json:
        emit_json(result)
    else:
        click.echo(f"purged fact {fact_id}")


@fact_group.command("purge")
@click.argument("fact_id", type=int)
@base.yes_option
@base.json_option
@click.pass_context
def fact_purge(ctx: click.Context, fact_id: int, yes: bool, as_json: bool) -> None:
    """Erase one fact for good (same as `stash purge fact`).

    \b
    Example:
      stash fact purge 7 --yes
    """
    ctx.invoke(purge_fact, fact_id=fact_id, yes=yes, as_json=as_json)


def _print_cascade(cascade: Any) -> None:
    if not cascade:
        return
    for key, value in dict(cascade).items():
        if value:
            click.echo(f"  {key.replace('_', ' ')}: {', '.join(map(str, value)) if isinstance(value, list) else value}")


COMMANDS = (facts_command, fact_group)
