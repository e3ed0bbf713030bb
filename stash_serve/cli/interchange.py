"""``stash import`` (episode files or a ``stash export`` tree) and ``stash export``."""

from __future__ import annotations

from pathlib import Path

import click

from stash_serve.cli import base, tables
from stash_serve.cli.output import emit_json

#: a `stash export` header line is a few hundred bytes; never read further to recognise one
HEADER_LIMIT = 64 * 1024


def _is_tree_export(file: Path) -> bool:
    """Whether a file is a `stash export` (its first line is the stash-tree header)."""
    import json

    from stash_pipeline.interchange.export import TREE_FORMAT as EXPORT_FORMAT

    try:
        with file.open(encoding="utf-8") as handle:
            header = json.loads(handle.readline(HEADER_LIMIT) or "null")
    except (UnicodeDecodeError, ValueError, OSError):
        return False
    return isinstance(header, dict) and header.get("type") == EXPORT_FORMAT


@click.command("import")
@click.argument("file", type=click.Path(exists=True, path_type=Path))
@base.namespace_option(required=False)
@click.option(
    "--format", "fmt", type=click.Choice(["auto", "jsonl", "csv", "parquet"]), default="auto", show_default=True,
    help="Episode file format (auto: from the extension).",
)
@click.option("--into", default=None, help="Restore a table export under this namespace instead of its own root.")
@click.option("--with-vectors", is_flag=True, help="Take the vectors a table export carries (same model and "
              "dimension only) instead of re-embedding.")
@click.option("--stop-on-bad-row", is_flag=True, help="End the import at the first row that breaks a rule "
              "(nothing is written) instead of skipping it with a report.")
@base.json_option
def import_command(
    file: Path, namespace: str | None, fmt: str, into: str | None, with_vectors: bool, stop_on_bad_row: bool,
    as_json: bool,
) -> None:
    """Import episodes from JSONL, CSV or Parquet (fields: content, occurred_at, kind,
    metadata, idempotency_key) into -n NS; every row is checked first, one bad row and
    nothing is written. A `stash export` file is restored whole instead (under -n NS
    when given, else where it came from). Progress goes to stderr.

    \b
    A table export (a directory with manifest.json, or that manifest) is restored whole
    too: --into /root re-roots it, --with-vectors reuses its vectors.

    \b
    Example:
      stash import notes.jsonl -n /projects/x
      stash import backup.jsonl -n /restored/x
      stash import backup/ --into /restored/x
    """
    from stash_pipeline.errors import InvalidInput
    from stash_pipeline.interchange import episode_files as interchange
    from stash_pipeline.interchange.files import regular_file

    if file.is_dir() or file.name == "manifest.json":
        tables.import_tables(file, into or namespace, with_vectors, as_json, stop_on_bad_row)
        return
    file = regular_file(file)  # a device or FIFO is refused before anything reads it
    if _is_tree_export(file):
        tables.import_tables(file, into or namespace, False, as_json, stop_on_bad_row)
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
@click.argument("file", type=click.Path(writable=True, path_type=Path))
@base.namespace_option(default="/")
@click.option(
    "--format", "fmt", type=click.Choice(["auto", "jsonl", "parquet", "csv"]), default="auto", show_default=True,
    help="jsonl: one file; parquet/csv: a directory, one file per table + manifest.json "
         "(auto: jsonl for a .jsonl/.ndjson name, else parquet).",
)
@click.option("--with-vectors", is_flag=True, help="Include episode and fact vectors (parquet/csv).")
@click.option("--force", is_flag=True, help="Replace an existing file (or symlink) instead of refusing.")
@base.json_option
def export_command(file: Path, namespace: str, fmt: str, with_vectors: bool, force: bool, as_json: bool) -> None:
    """Write a namespace tree (every record and its lineage) that `stash import` restores
    losslessly: a JSONL file, or a directory of Parquet/CSV files, one per table, with a
    manifest of counts and checksums. Vectors only with --with-vectors.

    \b
    Example:
      stash export backup.jsonl -n /projects/x
      stash export backup/ --format parquet -n /projects/x
    """
    from stash_pipeline.interchange import export

    if fmt == "parquet" or fmt == "csv" or (fmt == "auto" and file.suffix.lower() not in (".jsonl", ".ndjson")):
        tables.export_tables(namespace, file, "csv" if fmt == "csv" else "parquet", with_vectors, as_json, force)
        return
    result = export.export_tree(base.store(), namespace, file, force=force)
    if as_json:
        emit_json(result)
    else:
        counts = ", ".join(f"{n} {k}" for k, n in sorted(result["rows"].items()))
        click.echo(f"exported {result['namespace']} to {result['path']}: {counts or 'nothing'}")


COMMANDS = (import_command, export_command)
