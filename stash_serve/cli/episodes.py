"""Episodes: ``stash remember``, ``forget``, ``purge episode|fact`` and ``episode show``,
derived from ``stash_pipeline.operations.episodes``; what is written here is how their
answers read at a shell and how ``forget`` asks."""

from __future__ import annotations

from typing import Any

import click

from stash_pipeline.operations import episodes as ops
from stash_serve.cli import base
from stash_serve.cli.derive import command, sentence
from stash_serve.cli.entities import purge_entity
from stash_serve.cli.facts import purge_fact, render_purge
from stash_serve.cli.output import emit_json

_remembered = sentence(
    lambda r, a: f"{'remembered' if r.created else 'already remembered'} episode {r.id} in {r.namespace}"
)


def _print_forget(result: Any, as_json: bool, *, err: bool = False) -> None:
    if as_json:
        emit_json(result)
        return
    if result.episode_id is None:
        best = "" if result.similarity is None else f" (best similarity {result.similarity:.3f})"
        click.echo(f"nothing similar enough to forget{best}", err=err)
        return
    verb = "forgot" if result.applied else "would forget"
    click.echo(f"{verb} episode {result.episode_id} in {result.namespace} (similarity {result.similarity:.3f}):", err=err)
    click.echo(f"  {result.content}", err=err)
    if result.withdrawn_fact_ids:
        click.echo(f"  withdraws facts {', '.join(map(str, result.withdrawn_fact_ids))}", err=err)
    if result.recheck_fact_ids:
        click.echo(f"  marks facts for re-check {', '.join(map(str, result.recheck_fact_ids))}", err=err)


def _ask_to_forget(store: Any, args: Any, yes: bool) -> bool:
    """Without --yes, show the match first and ask; nothing matched, nothing to ask."""
    if args.preview or yes:
        return True
    from stash_pipeline.operations.base import UNRESTRICTED

    found = ops.FORGET.invoke(store, UNRESTRICTED, args.model_copy(update={"preview": True}))
    if found.episode_id is None:
        _print_forget(found, False)
        return False
    _print_forget(found, False, err=True)
    base.confirm("forget it?", yes)
    return True


def _forgot(result: Any, as_json: bool, args: Any) -> None:
    _print_forget(result, as_json)


def _describe_episode(store: Any, args: Any) -> str:
    from stash_pipeline.memory import episodes

    episode = episodes.get(store, args.id, include_deleted=True)
    return f"episode {episode.id} in {episode.namespace}: {episode.content[:200]}"


_purged = render_purge("episode")


remember_command = command(ops.REMEMBER, render=_remembered)
forget_command = command(ops.FORGET, render=_forgot, ask=_ask_to_forget)


@click.group("purge")
def purge_group() -> None:
    """Erase an episode, a fact or an entity for good, with everything derived from it.

    \b
    Example:
      stash purge episode 42 --yes
    """


purge_group.add_command(command(ops.PURGE_EPISODE, render=_purged, describe=_describe_episode))
# `stash purge fact` and `purge entity` are defined with the other fact and entity commands
purge_group.add_command(purge_fact)
purge_group.add_command(purge_entity)


@click.group("episode")
def episode_group() -> None:
    """Read episodes by id.

    \b
    Example:
      stash episode show 42
    """


episode_group.add_command(command(ops.GET_EPISODE))

COMMANDS = (remember_command, forget_command, purge_group, episode_group)
