"""bench/common.py's baseline from an older revision: ``--baseline-src`` / ``--baseline-rev``.

The benches keep no frozen copies of older statements: a baseline is an older tree, read
in place or run as its own bench with its own packages first on the import path.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import pytest

from bench import common


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=10)
    common.add_baseline_arguments(parser, "the same run from it")
    return parser


def test_the_two_flags_exclude_each_other() -> None:
    args = _parser().parse_args(["--baseline-rev", "HEAD"])
    assert args.baseline_rev == "HEAD" and args.baseline_src is None
    with pytest.raises(SystemExit):
        _parser().parse_args(["--baseline-rev", "HEAD", "--baseline-src", "/tmp"])


def test_the_baseline_run_gets_the_same_arguments_without_the_baseline_flags() -> None:
    argv = ["--size", "200", "--baseline-rev", "HEAD~1", "--large", "--baseline-src=/x"]
    assert common.baseline_argv(argv) == ["--size", "200", "--large"]


def test_no_flag_no_tree() -> None:
    args = _parser().parse_args([])
    with common.baseline_tree(args) as tree:
        assert tree is None and args.baseline_label is None


def test_a_revision_is_exported_and_removed_afterwards() -> None:
    head = subprocess.run(["git", "-C", str(common.ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    args = _parser().parse_args(["--baseline-rev", "HEAD"])
    with common.baseline_tree(args) as tree:
        assert tree is not None and args.baseline_label == head
        assert (tree / "bench" / "common.py").is_file()
        assert (tree / "stash_pipeline" / "store.py").is_file()
    assert not tree.exists()


def test_an_unknown_revision_stops_before_the_run() -> None:
    with pytest.raises(SystemExit, match="not a revision"), \
            common.baseline_tree(_parser().parse_args(["--baseline-rev", "no-such-rev-0000"])):
        pass


def test_the_older_bench_runs_on_the_older_code(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The tree's packages win the import path, whatever this process imported."""
    (tmp_path / "stash_pipeline").mkdir()
    (tmp_path / "stash_pipeline" / "__init__.py").write_text("OLD = True\n")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "__init__.py").write_text("")
    (tmp_path / "bench" / "probe.py").write_text(
        "import sys\nimport stash_pipeline\nprint('probe', stash_pipeline.OLD, stash_pipeline.__file__, sys.argv[1:])\n")
    common.run_baseline(tmp_path, "bench.probe", ["--size", "3"], "old")
    out = capfd.readouterr().out
    assert f"probe True {tmp_path / 'stash_pipeline' / '__init__.py'} ['--size', '3']" in out
    assert "## Baseline: old — python -m bench.probe --size 3" in out
    with pytest.raises(SystemExit, match=r"has no bench/missing\.py"):
        common.run_baseline(tmp_path, "bench.missing", [], "old")


def test_a_bench_measures_then_reruns_itself_from_the_tree(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "stash_pipeline").mkdir()
    (tmp_path / "stash_pipeline" / "__init__.py").write_text("")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "__init__.py").write_text("")
    (tmp_path / "bench" / "probe.py").write_text("import sys\nprint('old run', sys.argv[1:])\n")
    argv = ["--size", "3", "--baseline-src", str(tmp_path)]
    ran: list[str] = []
    common.measure_then_baseline(_parser().parse_args(argv), argv, "bench.probe", lambda: ran.append("now"))
    assert ran == ["now"] and "old run ['--size', '3']" in capfd.readouterr().out
    common.measure_then_baseline(_parser().parse_args(["--size", "3"]), [], "bench.probe", lambda: ran.append("again"))
    assert ran == ["now", "again"] and "old run" not in capfd.readouterr().out


def test_an_older_trees_recall_statements_are_read_from_either_layout(tmp_path: Path) -> None:
    from stash_pipeline.db import sql

    here = Path(__file__).resolve().parents[2]
    assert common.recall_statements(here)["recall"] == sql.QUERIES["recall"]  # the recall package
    older = tmp_path / "stash_pipeline" / "db" / "queries"
    older.mkdir(parents=True)
    (older / "recall.sql").write_text("-- recall --\nSELECT 1\n\n-- recall_check --\nSELECT 2\n", encoding="utf-8")
    assert common.recall_statements(tmp_path) == {"recall": "SELECT 1", "recall_check": "SELECT 2"}
