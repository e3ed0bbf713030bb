"""The table-export half of ``stash export`` / ``stash import``: a directory of Parquet or
CSV files, one per table, with ``manifest.json`` (see ``stash_pipeline.interchange``); the
import half restores a JSONL tree too."""

from __future__ import annotations

from pathlib import Path

import click

from stash_serve.cli import base
from stash_serve.cli.output import emit_json
from stash_serve.cli.progress import Meter


def export_tables(namespace: str, directory: Path, file_format: str, with_vectors: bool, as_json: bool,
                  force: bool = False) -> None:
    from stash_pipeline.interchange import export

    meter = Meter("exporting")
    try:
        manifest = export.export_tables(base.store(), namespace, directory, format=file_format,
                                        with_vectors=with_vectors, progress=meter, force=force)
    finally:
        meter.close()
    counts = {name: entry["rows"] for name, entry in manifest["tables"].items()}
    if as_json:
        emit_json({"namespace": manifest["root"], "path": str(directory), "format": file_format,
                   "with_vectors": with_vectors, "rows": counts})
        return
    listed = ", ".join(f"{n} {name}" for name, n in counts.items() if n)
    click.echo(f"exported {manifest['root']} to {directory}/ ({file_format}): {listed or 'nothing'}")


def import_tables(path: Path, into: str | None, with_vectors: bool, as_json: bool, stop: bool = False) -> None:
    from stash_pipeline.interchange import readers

    meter = Meter("importing")
    try:
        result = readers.import_export(base.store(), path, into=into, with_vectors=with_vectors, stop=stop,
                                       progress=meter)
    finally:
        meter.close()
    if as_json:
        emit_json({"path": str(path), **result})
        return
    if result["already_imported"]:
        click.echo(f"{path} was already imported into {result['namespace']} ({result['already_imported']}): "
                   "nothing to do")
        return
    listed = ", ".join(f"{n} {name}" for name, n in result["rows"].items())
    click.echo(f"restored {path.name} into {result['namespace']}: {listed or 'nothing'} (vectors {result['vectors']})")
    for table, reasons in result["skipped"].items():
        for why, n in reasons.items():
            click.echo(f"  skipped {n} {table}: {why}")
    for problem in result["problems"]:
        click.echo(f"  {problem}")
