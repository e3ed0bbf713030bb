"""``stash consolidate run|status|rebuild`` and ``stash dead-letters list|retry|drop``: the CLI face
of the consolidation runner (``stash_pipeline.consolidation.runner``) — the same entry point
Dagster and the MCP ``consolidate`` tool call.

``consolidate run`` and ``consolidate status`` are derived from
``stash_pipeline.operations.consolidation``: ``run`` takes the tool's arguments and checks
but runs the stages in this terminal (the tool answers a run id or job handle at once),
with options of its own (``--wait``, ``--inline``, ``--dry-run``). Rebuild and dead
letters have no tool and are written here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from stash_pipeline.operations import consolidation as ops
from stash_serve.cli import base
from stash_serve.cli.derive import command
from stash_serve.cli.output import emit_json, show

REPORT_COLUMNS = ("namespace", "stage", "status", "rows_in", "rows_written", "items_failed", "dead_lettered",
                  "cursor_from", "cursor_to", "model_calls", "duration_s", "message")
PLAN_COLUMNS = ("namespace", "stage", "action", "items", "retries", "items_per_call", "model_calls")
REBUILD_COLUMNS = ("namespace", "stage", "status", "withdrawn", "cascade", "recheck", "cursor_was")
DEAD_LETTER_COLUMNS = ("id", "namespace", "stage", "item_kind", "item_id", "status", "attempts", "last_error")


@click.group("consolidate")
def consolidate_group() -> None:
    """Run the consolidation stages now, or show where each stage stands.

    \b
    Example:
      stash consolidate run -n /projects/x --stage facts
    """


@dataclass(frozen=True)
class _Ran:
    """What ``consolidate run`` did: planned (``dry_run``), submitted to ``dagster``, or ran ``inline``."""

    mode: str
    rows: list[Any]
    dagster_url: str | None = None
    #: why stages were left out (no model configured), said after the rows
    skipped_because: str | None = None


def _run_here(store: Any, args: Any, wait: bool, inline: bool, dry_run: bool) -> _Ran:
    """``consolidate run``: the tool's arguments and checks (``targets``), then the stages run
    here unless Dagster runs them (and not ``--inline``); ``--dry-run`` only plans."""
    stages = [args.stage] if args.stage else None
    if dry_run:  # read-only, no model call, no checks that would refuse it
        from stash_pipeline.consolidation.plan import plan

        return _Ran("dry_run", plan(store, args.namespaces or "/", stages))
    from stash_pipeline.consolidation import runner
    from stash_pipeline.operations.base import UNRESTRICTED
    from stash_pipeline.stages import STAGE_NAMES
    from stash_serve.runs import DagsterRuns

    roots, slugs, choice = ops.targets(store, args, UNRESTRICTED)
    stages, skipped = choice.stages, choice.skipped_because
    dagster = None if inline else DagsterRuns.find(store.settings)
    if dagster is not None:
        selected = stages or list(STAGE_NAMES)
        runs = [{"namespace": slug, "run_id": dagster.launch(slug, selected, trigger="cli"), "stages": ",".join(selected)}
                for slug in slugs]
        return _Ran("dagster", runs, dagster.url, skipped)
    reports = [report for root in roots for report in runner.run_tree(store, root, stages=stages, wait=wait)]
    return _Ran("inline", reports, skipped_because=skipped)


def _ran(result: _Ran, as_json: bool, args: Any, **options: bool) -> None:
    rows = result.rows
    if result.mode == "dry_run":
        show(rows, as_json, PLAN_COLUMNS)
        if not as_json:
            runs = sum(1 for r in rows if r["action"] == "run" and r["items"])
            calls = sum(r["model_calls"] for r in rows)
            click.echo(f"dry run: {runs} stage run(s) with work, about {calls} model call(s); nothing was changed",
                       err=True)
    elif result.mode == "dagster":
        show(rows, as_json, ("namespace", "run_id", "stages"))
        if not as_json:
            click.echo(f"{len(rows)} run(s) submitted to Dagster: {result.dagster_url}/runs", err=True)
    else:
        show(rows, as_json, REPORT_COLUMNS)
        if not as_json:
            calls = sum(r.model_calls for r in rows)
            tokens = sum(r.tokens_in + r.tokens_out for r in rows)
            click.echo(f"{len(rows)} stage run(s), {calls} model call(s), {tokens} token(s)", err=True)
    if result.skipped_because:  # on stderr, with --json too: the JSON stays the list of rows
        click.echo(f"note: {result.skipped_because}", err=True)
    if result.mode == "inline" and any(r.status == "failed" for r in rows):
        click.get_current_context().exit(1)


consolidate_group.add_command(
    command(
        ops.CONSOLIDATE, call=_run_here, render=_ran,
        extra=(
            click.Option(["--wait"], is_flag=True,
                         help="Wait for a runner already busy on a stage instead of skipping it."),
            click.Option(["--inline"], is_flag=True,
                         help="Run here even when Dagster is running (default: submit runs there)."),
            click.Option(["--dry-run", "dry_run"], is_flag=True,
                         help="Only show what would run: items and estimated model calls per namespace and stage."),
        ),
    )
)


def _status_here(store: Any, args: Any) -> Any:
    """``consolidate status``: the tool's answer; a shell starts no runs of its own, so the
    runs queued or in flight are Dagster's when its webserver answers (as the tool's are)."""
    from stash_pipeline.operations.base import UNRESTRICTED
    from stash_serve.runs import DagsterRuns

    result = ops.CONSOLIDATION_STATUS.invoke(store, UNRESTRICTED, args)
    dagster = DagsterRuns.find(store.settings)
    if dagster is None:
        return result
    slugs = sorted({row["namespace"] for row in result.items})
    return result.model_copy(update={"mode": "dagster", "runs": dagster.in_flight(slugs)})


def _status(result: Any, as_json: bool, args: Any) -> None:
    show(result.items, as_json, ops.CONSOLIDATION_STATUS.cli.columns)  # type: ignore[union-attr]
    if not as_json:  # the JSON stays the per-stage list; the mode is in `stash doctor --json` too
        from stash_pipeline.consolidation.probe import describe_modes

        if result.mode == "dagster":
            click.echo(f"Dagster runs queued or in flight: {len(result.runs)}")
            for run in result.runs:
                click.echo(f"  {run['namespace']} {run['status']} {run['stages']} {run['url']}")
        store = base.store()
        for line in describe_modes(store.settings, store.db):
            click.echo(line)


consolidate_group.add_command(command(ops.CONSOLIDATION_STATUS, call=_status_here, render=_status))


@consolidate_group.command("rebuild")
@base.namespace_option()
@click.option("--stage", required=True, help="The stage to rebuild: facts, relationships, causal_links or patterns.")
@base.yes_option
@base.json_option
def consolidate_rebuild(namespace: str, stage: str, yes: bool, as_json: bool) -> None:
    """Withdraw what a stage derived in a namespace tree and rewind it, so its next run re-derives.

    Without --yes it only shows what would be withdrawn (the stage's own rows, and
    through lineage what later stages derived from them). With --yes it does it, one
    transaction per namespace; the next `stash consolidate run` (or the Dagster
    sensor) re-derives. Safe to interrupt and run again.

    \b
    Example:
      stash consolidate rebuild -n /projects/x --stage facts
      stash consolidate rebuild -n /projects/x --stage facts --yes
    """
    from stash_pipeline.consolidation import rebuild

    reports = rebuild.rebuild(base.store(), namespace, stage, apply=yes)
    show([r.to_json() for r in reports], as_json, REBUILD_COLUMNS)
    if not as_json and not yes:
        click.echo("preview only: nothing was changed; add --yes to rebuild", err=True)


@click.group("dead-letters")
def dead_letters_group() -> None:
    """Items a stage gave up on after repeated failures: inspect, retry or drop them.

    \b
    Example:
      stash dead-letters list -n /projects/x --stage facts
    """


@dead_letters_group.command("list")
@base.namespaces_option()
@click.option("--stage", default=None, help="Only this stage.")
@click.option("--status", type=click.Choice(["pending", "dead", "retried", "dropped"]), default=None,
              help="Only this status.")
@base.limit_option()
@base.offset_option
@base.json_option
def dead_letters_list(
    namespaces: str, stage: str | None, status: str | None, limit: int, offset: int, as_json: bool
) -> None:
    """List dead letters with their last error.

    \b
    Example:
      stash dead-letters list -n /projects/x --status dead --json
    """
    from stash_pipeline.consolidation import dead_letters

    rows = dead_letters.list_(base.store(), namespaces, stage=stage, status=status, limit=limit, offset=offset)
    show(rows, as_json, DEAD_LETTER_COLUMNS)


@dead_letters_group.command("retry")
@click.argument("ids", nargs=-1, type=int)
@base.namespaces_option()
@click.option("--stage", default=None, help="Retry every dead letter of this stage (with no ids).")
@base.json_option
def dead_letters_retry(ids: tuple[int, ...], namespaces: str, stage: str | None, as_json: bool) -> None:
    """Queue dead letters for another attempt on the next run (by id, or all of a stage).

    \b
    Example:
      stash dead-letters retry 12 13
      stash dead-letters retry -n /projects/x --stage facts
    """
    from stash_pipeline.consolidation import dead_letters

    result = dead_letters.retry(base.store(), list(ids) or None, namespaces=namespaces, stage=stage)
    _out("queued for retry", result, as_json)


@dead_letters_group.command("drop")
@click.argument("ids", nargs=-1, type=int)
@base.namespaces_option()
@click.option("--stage", default=None, help="Drop every dead letter of this stage (with no ids).")
@base.yes_option
@base.json_option
def dead_letters_drop(ids: tuple[int, ...], namespaces: str, stage: str | None, yes: bool, as_json: bool) -> None:
    """Drop dead letters: the items are given up for good (asks first).

    \b
    Example:
      stash dead-letters drop 12 --yes
    """
    from stash_pipeline.consolidation import dead_letters

    what = f"dead letter(s) {', '.join(map(str, ids))}" if ids else f"all dead letters{' of ' + stage if stage else ''} in {namespaces}"
    base.confirm(f"drop {what}?", yes)
    result = dead_letters.drop(base.store(), list(ids) or None, namespaces=namespaces, stage=stage)
    _out("dropped", result, as_json)


def _out(verb: str, changed: list[int], as_json: bool) -> None:
    if as_json:
        emit_json({"ids": changed})
    elif changed:
        click.echo(f"{verb}: {', '.join(map(str, changed))}")
    else:
        click.echo(f"nothing {verb}")


COMMANDS = (consolidate_group, dead_letters_group)
