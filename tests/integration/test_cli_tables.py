"""`stash export --format parquet|csv` / `stash import DIR --into`: the table export through the
CLI, its --json summaries, and progress that shows on a terminal only."""

from __future__ import annotations

import io
import json
from pathlib import Path

from stash_serve.cli.progress import Meter
from tests.integration.test_cli import Run, as_json, cli_env, run  # noqa: F401  (fixtures)


def test_parquet_export_and_import_into_another_root(run: Run, tmp_path: Path) -> None:  # noqa: F811
    run("namespace", "create", "/projects/x")
    episode = as_json(run("remember", "The deploy uses blue-green on Fridays", "-n", "/projects/x", "--json"))["id"]
    run("fact", "assert", "Deploys use blue-green", "-n", "/projects/x", "--source-episode-ids", str(episode))
    out = tmp_path / "backup"
    result = run("export", str(out), "-n", "/projects/x", "--format", "parquet", "--json")
    summary = as_json(result)
    assert summary["rows"]["episodes"] == 1 and summary["rows"]["facts"] == 1 and summary["rows"]["lineage"] == 1
    assert result.stderr == ""  # not a terminal: no progress
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tables"]["facts"]["file"] == "facts.parquet" and len(manifest["tables"]["facts"]["sha256"]) == 64

    restored = as_json(run("import", str(out / "manifest.json"), "--into", "/copy/x", "--json"))
    assert restored["namespace"] == "/copy/x" and restored["rows"]["facts"] == 1 and restored["skipped"] == {}
    facts = as_json(run("facts", "-n", "/copy/x", "--json"))
    assert [f["content"] for f in facts] == ["Deploys use blue-green"]
    assert facts[0]["source_episode_ids"] and facts[0]["source_episode_ids"][0] != episode

    text = run("export", str(tmp_path / "csv"), "-n", "/copy/x", "--format", "csv").output
    assert text.startswith("exported /copy/x to ") and "1 facts" in text
    assert (tmp_path / "csv" / "episodes.csv").read_text().startswith('"id","namespace_id","content"')
    run("export", str(tmp_path / "csv"), "-n", "/copy/x", "--format", "csv", expect=2)  # not empty


def test_meter_draws_rate_and_eta_on_a_terminal_only() -> None:
    stream = io.StringIO()
    meter = Meter("exporting", stream=stream, enabled=True)
    meter("episodes", 0, 10)
    meter("episodes", 10, 10)
    meter("facts", 5, 5)
    meter.close()
    text = stream.getvalue()
    assert "exporting episodes: 10/10 rows" in text and "rows/s" in text and "ETA" in text
    assert text.endswith("\n") and "exporting facts: 5/5 rows" in text
    quiet = io.StringIO()
    silent = Meter("exporting", stream=quiet)  # a StringIO is not a TTY
    silent("episodes", 1, 2)
    silent.close()
    assert quiet.getvalue() == ""


def test_export_refuses_an_existing_file_and_a_second_import_says_so(run: Run, tmp_path: Path) -> None:  # noqa: F811
    run("namespace", "create", "/projects/y")
    run("remember", "Standups are at ten", "-n", "/projects/y")
    backup = tmp_path / "y.jsonl"
    backup.write_text("keep me")
    assert "already exists; pass --force" in run("export", str(backup), "-n", "/projects/y", expect=2).output
    assert backup.read_text() == "keep me"
    run("export", str(backup), "-n", "/projects/y", "--force")
    first = as_json(run("import", str(backup), "--into", "/copy/y", "--stop-on-bad-row", "--json"))
    assert first["rows"]["episodes"] == 1 and first["already_imported"] is None
    again = run("import", str(backup), "--into", "/copy/y").output
    assert "was already imported into /copy/y" in again and "nothing to do" in again
