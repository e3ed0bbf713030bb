"""Namespaces, episodes, recall and context: ``stash namespace``, ``init``, ``remember``,
``import``, ``export``, ``recall``, ``forget``, ``purge``, ``episode`` and ``context``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from stash_serve.cli import base
from stash_serve.cli.output import emit_json, fields, show

NAMESPACE_COLUMNS = ("id", "slug", "name", "description", "created_at")
EPISODE_COLUMNS = ("id", "namespace", "kind", "occurred_at", "content")
RECALL_COLUMNS = ("kind", "id", "namespace", "score", "content")


# --- namespaces ------------------------------------------------------------------------


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
    from stash_pipeline.memory import namespaces as ns

    result = ns.create(base.store(), slug, name, description)
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
    from stash_pipeline.memory import namespaces as ns

    show(ns.list_(base.store(), namespaces, limit, offset), as_json, NAMESPACE_COLUMNS)


@namespace_group.command("show")
@click.argument("slug")
@base.json_option
def namespace_show(slug: str, as_json: bool) -> None:
    """Show a namespace and the row counts of its tree.

    \b
    Example:
      stash namespace show /projects/x
    """
    from stash_pipeline.memory import namespaces as ns

    result = ns.show(base.store(), slug)
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
    from stash_pipeline.memory import namespaces as ns

    store = base.store()
    preview = ns.delete(store, slug, confirm=False)
    if not yes:
        click.echo(f"this deletes {', '.join(preview['namespaces'])}", err=True)
        counts = ", ".join(f"{v} {k}" for k, v in preview["counts"].items() if v)
        click.echo(f"with {counts or 'nothing in them'}", err=True)
    base.confirm("delete?", yes)
    result = ns.delete(store, slug, confirm=True)
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
    from stash_pipeline.memory import namespaces as ns

    result = ns.init_self(base.store())
    if as_json:
        emit_json(result)
        return
    created = result["namespaces_created"]
    click.echo(f"/self tree ready ({'created ' + ', '.join(created) if created else 'already present'})")


# --- episodes ----------------------------------------------------------------------------


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


def _is_tree_export(file: Path) -> bool:
    """Whether a file is a `stash export` (its first line is the stash-tree header)."""
    import json

    from stash_pipeline.memory.interchange import EXPORT_FORMAT

    try:
        with file.open(encoding="utf-8") as handle:
            header = json.loads(handle.readline() or "null")
    except (UnicodeDecodeError, ValueError):
        return False
    return isinstance(header, dict) and header.get("type") == EXPORT_FORMAT


@click.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@base.namespace_option(required=False)
@click.option(
    "--format", "fmt", type=click.Choice(["auto", "jsonl", "csv", "parquet"]), default="auto", show_default=True,
    help="Episode file format (auto: from the extension).",
)
@base.json_option
def import_command(file: Path, namespace: str | None, fmt: str, as_json: bool) -> None:
    """Import episodes from JSONL, CSV or Parquet (fields: content, occurred_at, kind,
    metadata, idempotency_key) into -n NS; every row is checked first, one bad row and
    nothing is written. A `stash export` file is restored whole instead (under -n NS
    when given, else where it came from). Progress goes to stderr.

    \b
    Example:
      stash import notes.jsonl -n /projects/x
      stash import backup.jsonl -n /restored/x
    """
    from stash_pipeline.errors import InvalidInput
    from stash_pipeline.memory import interchange

    if _is_tree_export(file):
        result = interchange.import_tree(base.store(), file, into=namespace)
        if as_json:
            emit_json({"file": str(file), **result})
        else:
            counts = ", ".join(f"{n} {k}" for k, n in sorted(result["rows"].items()))
            click.echo(f"restored {file.name} into {result['namespace']}: {counts or 'nothing'}")
            if result.get("skipped"):
                click.echo(f"  skipped (references outside the export): {result['skipped']}")
        return
    if namespace is None:
        raise InvalidInput("episode files go into one namespace: pass -n /path")
    store = base.store()

    def progress(done: int, total: int) -> None:
        click.echo(f"\rimported {done}/{total}", nl=False, err=True)

    result = interchange.import_episodes(
        store, namespace, file, format=None if fmt == "auto" else fmt, progress=progress
    )
    if result.get("rows"):
        click.echo("", err=True)
    if as_json:
        emit_json({"file": str(file), **result})
    else:
        click.echo(
            f"imported {result['rows']} rows into {result['namespace']}: "
            f"{result['created']} new, {result['replayed']} already present"
        )


@click.command("export")
@click.argument("file", type=click.Path(dir_okay=False, writable=True, path_type=Path))
@base.namespace_option(default="/")
@base.json_option
def export_command(file: Path, namespace: str, as_json: bool) -> None:
    """Write a namespace tree (every record and its lineage, no vectors) to a JSONL file
    that `stash import` restores losslessly.

    \b
    Example:
      stash export backup.jsonl -n /projects/x
    """
    from stash_pipeline.memory import interchange

    result = interchange.export_tree(base.store(), namespace, file)
    if as_json:
        emit_json(result)
    else:
        counts = ", ".join(f"{n} {k}" for k, n in sorted(result["rows"].items()))
        click.echo(f"exported {result['namespace']} to {result['path']}: {counts or 'nothing'}")


@click.command("recall")
@click.argument("query")
@base.namespaces_option()
@click.option("--limit", type=int, default=10, show_default=True, help="Maximum results (1-100).")
@click.option("--as-of", default=None, help="Return what was valid at this time (ISO 8601).")
@click.option("--include-history", is_flag=True, help="Include retired facts with their validity.")
@click.option("--max-tokens", type=int, default=None, help="Stop adding results past this token budget.")
@base.json_option
def recall_command(
    query: str, namespaces: str, limit: int, as_of: str | None, include_history: bool,
    max_tokens: int | None, as_json: bool,
) -> None:
    """Search facts and episodes together (vector + full text, fused), best first.

    \b
    Example:
      stash recall "how do we deploy" -n /projects/x --json
    """
    from stash_pipeline.memory import recall

    when = base.parse_time(as_of, "--as-of")
    hits = recall.recall(
        base.store(), query, namespaces,
        limit=limit, as_of=when,
        include_history=include_history, max_tokens=max_tokens,
    )
    show(hits, as_json, RECALL_COLUMNS)


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


@purge_group.command("fact")
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


# --- context ---------------------------------------------------------------------------


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


COMMANDS = (
    namespace_group, init_command, remember_command, import_command, export_command, recall_command, forget_command,
    purge_group, episode_group, context_group,
)
