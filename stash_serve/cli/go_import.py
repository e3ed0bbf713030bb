"""``stash migrate-from-go``: import a Go Stash database (see ``stash_pipeline.interchange.go_import``)."""

from __future__ import annotations

import click

from stash_serve.cli import base
from stash_serve.cli.output import emit_json
from stash_serve.cli.progress import Meter


@click.command("migrate-from-go")
@click.option("--from", "source", required=True, metavar="DSN",
              help="The Go Stash database, e.g. postgresql://user:pass@host:5432/stash.")
@click.option("--dry-run", is_flag=True, help="Do everything, report it, then roll it back.")
@click.option("--stop-on-bad-row", is_flag=True, help="End the run at the first Go row that breaks a rule "
              "(nothing is written) instead of skipping it with a report.")
@base.json_option
def migrate_from_go_command(source: str, dry_run: bool, stop_on_bad_row: bool, as_json: bool) -> None:
    """Bring every row of a Go Stash database over, in one transaction: namespaces,
    episodes, facts (validity, deletions as withdrawals, sources as lineage),
    relationships, patterns, contexts, contradictions, causal links, hypotheses, goals
    (notes as the append-only log), failures, the embedding cache, and Go's consolidation
    cursors as stage checkpoints. Vectors are reused when the model and dimension match.
    Re-running imports nothing twice. Progress goes to stderr on a terminal.

    \b
    Example:
      stash migrate-from-go --from postgresql://stash@old-host/stash --dry-run
      stash migrate-from-go --from postgresql://stash@old-host/stash
    """
    from stash_pipeline.interchange import go_import

    meter = Meter("reading")
    try:
        report = go_import.migrate_from_go(base.store(), source, dry_run=dry_run, progress=meter,
                                           stop=stop_on_bad_row)
    finally:
        meter.close()
    if as_json:
        emit_json(report)
        return
    click.echo(f"{'dry run: nothing was written' if dry_run else 'imported'} from {report['source']}")
    if report.get("ledger_adopted_from"):
        click.echo(f"  rows already imported were recognised under their earlier key {report['ledger_adopted_from']}")
    click.echo("  " + (", ".join(f"{n} {table}" for table, n in report["rows"].items()) or "no new rows"))
    for table, reasons in report["skipped"].items():
        for why, n in reasons.items():
            click.echo(f"  {table}: {n} × {why}")
    for problem in report["problems"]:
        click.echo(f"  {problem}")
    vectors = report["vectors"]
    click.echo(f"  vectors: {vectors['reused']} reused, {vectors['recomputed']} recomputed")


COMMANDS = (migrate_from_go_command,)
