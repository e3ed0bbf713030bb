"""``stash contradictions list|resolve``."""

from __future__ import annotations

import click

from stash_serve.cli import base
from stash_serve.cli.output import emit_json, show

CONTRADICTION_COLUMNS = ("id", "namespace", "old_fact_id", "new_fact_id", "classification", "resolved", "explanation")


@click.group("contradictions")
def contradictions_group() -> None:
    """List and resolve contradictions between facts.

    \b
    Example:
      stash contradictions list -n /projects/x
    """


@contradictions_group.command("list")
@base.namespaces_option()
@click.option("--all", "include_resolved", is_flag=True, help="Include resolved contradictions.")
@base.limit_option()
@base.offset_option
@base.json_option
def contradictions_list(namespaces: str, include_resolved: bool, limit: int, offset: int, as_json: bool) -> None:
    """List unresolved contradictions (all with --all).

    \b
    Example:
      stash contradictions list -n /projects/x --all --json
    """
    from stash_pipeline.memory import contradictions

    rows = contradictions.list_(base.store(), namespaces, include_resolved=include_resolved, limit=limit, offset=offset)
    show(rows, as_json, CONTRADICTION_COLUMNS)


@contradictions_group.command("resolve")
@click.argument("contradiction_id", type=int)
@click.option(
    "--action", required=True, type=click.Choice(["keep_new", "keep_old", "keep_both", "neither"]),
    help="keep_new retires the old fact, keep_old withdraws the new one, keep_both keeps both, neither withdraws both.",
)
@click.option("--note", default=None, help="Why (kept with the resolution).")
@base.json_option
def contradictions_resolve(contradiction_id: int, action: str, note: str | None, as_json: bool) -> None:
    """Resolve a contradiction with an action on its two facts.

    \b
    Example:
      stash contradictions resolve 3 --action keep_new --note "confirmed with the team"
    """
    from stash_pipeline.memory import contradictions

    result = contradictions.resolve(base.store(), contradiction_id, action, note=note)
    if as_json:
        emit_json(result)
        return
    click.echo(f"resolved contradiction {contradiction_id} ({action})")
    for key in ("old_fact", "new_fact"):
        fact = result.get(key)
        if fact is not None:
            state = "current" if fact.current else "retired"
            click.echo(f"  {key.replace('_', ' ')} {fact.id}: {state}")


COMMANDS = (contradictions_group,)
