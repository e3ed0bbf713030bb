"""Facts: ``stash facts`` (query) and ``stash fact show|assert|withdraw|purge``.

The commands are derived from ``stash_pipeline.operations.facts``; what is written here
is how their answers read at a shell.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from stash_pipeline.operations import facts as ops
from stash_serve.cli.derive import command
from stash_serve.cli.output import emit_json, fields


def _show_fact(result: Any, as_json: bool, args: Any) -> None:
    if as_json:
        emit_json(result)
        return
    if not hasattr(result, "parents"):
        fields(result)
        return
    fields(result.fact)
    for key in ("parents", "children"):
        click.echo(f"{key}:")
        items = getattr(result, key) or []
        if not items:
            click.echo("  (none)")
        for item in items:
            click.echo("  - " + " ".join(f"{k}={v}" for k, v in dict(item).items() if v is not None))


def _asserted(result: Any, as_json: bool, args: Any) -> None:
    if as_json:
        emit_json(result)
        return
    click.echo(f"asserted fact {result.fact.id} in {result.fact.namespace}")
    for contradiction in result.contradictions:
        click.echo(f"  contradicts fact {contradiction.old_fact_id} (contradiction {contradiction.id})")
    if result.superseded_fact_ids:
        click.echo(f"  superseded facts {', '.join(map(str, result.superseded_fact_ids))}")


def _withdrawn(result: Any, as_json: bool, args: Any) -> None:
    if as_json:
        emit_json(result)
        return
    click.echo(f"withdrew fact {result.fact_id}")
    print_cascade(result.cascade)


def render_purge(what: str) -> Callable[[Any, bool, Any], None]:
    """How a purge of ``what`` (episode, fact) prints: the record, and the facts erased with it."""

    def render(result: Any, as_json: bool, args: Any) -> None:
        if as_json:
            emit_json(result)
            return
        erased = result.erased.erased_fact_ids
        extra = f"; erased derived facts {', '.join(map(str, erased))}" if erased else ""
        click.echo(f"purged {what} {getattr(result, what + '_id')} from {result.namespace}{extra}")

    return render


_purged = render_purge("fact")


def _describe(store: Any, args: Any) -> str:
    from stash_pipeline.memory import facts

    fact = facts.get(store, args.id)
    return f"fact {fact.id} in {fact.namespace}: {fact.content[:200]}"


def print_cascade(cascade: Any) -> None:
    """What a withdrawal took with it, one line per kind."""
    if not cascade:
        return
    for key, value in dict(cascade).items():
        if value:
            click.echo(f"  {key.replace('_', ' ')}: {', '.join(map(str, value)) if isinstance(value, list) else value}")


facts_command = command(ops.QUERY_FACTS)


@click.group("fact")
def fact_group() -> None:
    """Show, assert, withdraw or purge one fact.

    \b
    Example:
      stash fact assert "Deploys happen on Fridays" -n /projects/x --entity deploy --property day --value friday
    """


fact_group.add_command(command(ops.GET_FACT, render=_show_fact))
fact_group.add_command(command(ops.ASSERT_FACT, render=_asserted))
fact_group.add_command(command(ops.WITHDRAW_FACT, render=_withdrawn))
# `stash purge fact`: registered on the `purge` group in stash_serve.cli.episodes
purge_fact = command(ops.PURGE_FACT, render=_purged, describe=_describe)
fact_group.add_command(
    command(
        ops.PURGE_FACT, render=_purged, describe=_describe, name="purge",
        summary="Erase one fact for good (same as `stash purge fact`).", example="stash fact purge 7 --yes",
    )
)

COMMANDS = (facts_command, fact_group)
