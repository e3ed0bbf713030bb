"""Episodes: ``stash remember``, ``forget``, ``episode show`` and ``purge episode|fact``."""

from __future__ import annotations

from typing import Any

import click

from stash_serve.cli import base
from stash_serve.cli.facts import purge_fact
from stash_serve.cli.output import emit_json, show


@click.command("remember")
@click.argument("content")
@base.namespace_option()
@click.option("--kind", default="observation", show_default=True, help="Episode kind, e.g. observation, decision.")
@click.option("--metadata", default=None, help="JSON object stored with the episode.")
@click.option("--occurred-at", default=None, help="When it happened (ISO 8601; default now).")
@click.option("--idempotency-key", default=None, help="Makes a retry safe: the same key is stored once.")
@base.json_option
def remember_command(
    content: str,
    namespace: str,
    kind: str,
    metadata: str | None,
    occurred_at: str | None,
    idempotency_key: str | None,
    as_json: bool,
) -> None:
    """Store an episode (CONTENT, or - to read it from stdin). No model is called.

    \b
    Example:
      stash remember "The deploy uses blue-green on Fridays" -n /projects/x
      git log -1 --format=%B | stash remember - -n /projects/x --kind commit
    """
    from stash_pipeline.memory import episodes

    when = base.parse_time(occurred_at, "--occurred-at")  # bad options fail before connecting
    extra = base.parse_json_object(metadata, "--metadata")
    text = base.read_content(content)
    result = episodes.remember(
        base.store(), namespace, text,
        occurred_at=when, kind=kind, metadata=extra, idempotency_key=idempotency_key,
    )
    if as_json:
        emit_json(result)
    else:
        verb = "remembered" if result.get("created", True) else "already remembered"
        click.echo(f"{verb} episode {result['id']} in {result['namespace']}")


@click.command("forget")
@click.argument("about")
@base.namespaces_option()
@click.option("--threshold", type=float, default=None, help="Minimum similarity (0-1; default STASH_FORGET_THRESHOLD).")
@click.option("--preview", is_flag=True, help="Only show what would be forgotten.")
@base.yes_option
@base.json_option
def forget_command(about: str, namespaces: str, threshold: float | None, preview: bool, yes: bool, as_json: bool) -> None:
    """Forget the episode most similar to ABOUT (if similar enough), withdrawing the facts
    derived only from it. Asks first unless --yes.

    \b
    Example:
      stash forget "the staging password" -n /projects/x --preview
    """
    from stash_pipeline.memory import episodes

    store = base.store()
    if preview or not yes:
        found = episodes.forget(store, about, namespaces, threshold=threshold, preview=True)
        if preview or found.episode_id is None:
            _print_forget(found, as_json)
            return
        _print_forget(found, False, err=True)
        base.confirm("forget it?", yes)
    _print_forget(episodes.forget(store, about, namespaces, threshold=threshold, preview=False), as_json)


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


@click.group("purge")
def purge_group() -> None:
    """Erase an episode or a fact for good (text, lineage and cached embedding).

    \b
    Example:
      stash purge episode 42 --yes
    """


@purge_group.command("episode")
@click.argument("episode_id", type=int)
@base.yes_option
@base.json_option
def purge_episode(episode_id: int, yes: bool, as_json: bool) -> None:
    """Erase one episode; facts derived only from it are withdrawn.

    \b
    Example:
      stash purge episode 42 --yes
    """
    from stash_pipeline.memory import episodes

    store = base.store()
    episode = episodes.get(store, episode_id, include_deleted=True)
    if not yes:
        click.echo(f"episode {episode.id} in {episode.namespace}: {episode.content[:200]}", err=True)
    base.confirm("erase it permanently?", yes)
    result = episodes.purge(store, episode_id)
    if as_json:
        emit_json(result)
    else:
        cascade = result.get("cascade") or {}
        withdrawn = cascade.get("withdrawn_fact_ids") or []
        extra = f"; withdrew facts {', '.join(map(str, withdrawn))}" if withdrawn else ""
        click.echo(f"purged episode {result['episode_id']} from {result['namespace']}{extra}")


# `stash purge fact` is defined with the other fact commands
purge_group.add_command(purge_fact)


@click.group("episode")
def episode_group() -> None:
    """Read episodes by id.

    \b
    Example:
      stash episode show 42
    """


@episode_group.command("show")
@click.argument("episode_id", type=int)
@click.option("--include-deleted", is_flag=True, help="Also show a forgotten episode.")
@base.json_option
def episode_show(episode_id: int, include_deleted: bool, as_json: bool) -> None:
    """Show one episode.

    \b
    Example:
      stash episode show 42 --json
    """
    from stash_pipeline.memory import episodes

    show(episodes.get(base.store(), episode_id, include_deleted=include_deleted), as_json)


COMMANDS = (remember_command, forget_command, purge_group, episode_group)
