"""bench/common.py's results files: a bench run as a program writes its tables to
bench/results/<script>.md, one section per command line, the latest first.

A test's or another bench's call to ``main`` writes nothing, nor does ``BENCH_RESULTS=off``;
a run that fails or exits non-zero leaves the file as it was.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench import common

HAND = "## Recorded by hand, before the bench wrote this file\n\nold figures, 2026-11-30\n"


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.delenv(common.RESULTS_SWITCH, raising=False)
    return tmp_path


def _as_program(fn):  # what ``python bench/x.py`` makes of a bench's main
    fn.__module__ = "__main__"
    return common.writes_results(fn)


def _run(monkeypatch: pytest.MonkeyPatch, *args: str, rows: int = 1, code: int = 0) -> int:
    monkeypatch.setattr(sys, "argv", [str(common.ROOT / "bench" / "sensor_tick.py"), *args])

    @_as_program
    def main() -> int:
        common.print_table(f"ticks {' '.join(args)}", ["n", "ms"], [[n, 1.5] for n in range(rows)])
        return code

    return main()


def test_a_run_writes_its_tables_under_its_command_line(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _run(monkeypatch, "--sizes", "100") == 0
    text = (results / "sensor_tick.md").read_text(encoding="utf-8")
    assert text.startswith("# `bench.sensor_tick`: results\n")
    assert "## `python bench/sensor_tick.py --sizes 100`\n" in text
    assert "UTC; commit " in text and "load average" in text
    assert "**ticks --sizes 100**\n\n| n | ms |\n|---|---|\n| 0 | 1.500 |" in text


def test_a_rerun_replaces_its_own_section_and_keeps_the_others(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (results / "sensor_tick.md").write_text("# `bench.sensor_tick`: results\n\nWritten by the bench.\n\n" + HAND)
    _run(monkeypatch, "--sizes", "100")
    _run(monkeypatch, "--sizes", "1000")
    _run(monkeypatch, "--sizes", "100", rows=2)
    text = (results / "sensor_tick.md").read_text(encoding="utf-8")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == ["## `python bench/sensor_tick.py --sizes 100`", "## `python bench/sensor_tick.py --sizes 1000`",
                        "## Recorded by hand, before the bench wrote this file"]
    assert "| 1 | 1.500 |" in text and text.count("**ticks --sizes 100**") == 1
    assert text.endswith(HAND) and "Written by the bench." in text


def test_no_file_from_an_import_a_failure_or_the_switch(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    common.writes_results(lambda: common.print_table("t", ["a"], [[1]]))()  # a test calling main
    assert _run(monkeypatch, code=1) == 1
    monkeypatch.setenv(common.RESULTS_SWITCH, "off")
    _run(monkeypatch)
    assert list(results.iterdir()) == []


def test_every_bench_with_tables_writes_its_results() -> None:
    for script in sorted((common.ROOT / "bench").glob("*.py")):
        source = script.read_text(encoding="utf-8")
        if 'if __name__ == "__main__":' in source and "print_table(" in source:
            assert "writes_results\ndef main(" in source, f"{script.name}: main is not @common.writes_results"


def test_the_header_names_the_code_the_run_started_on(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A section is about the code the bench imported: the commit (and uncommitted files)
    when it started; a checkout that moved meanwhile is said too, never passed off as it."""
    states = iter(["aaaaaaa with uncommitted changes to bench/x.py", "bbbbbbb"])
    monkeypatch.setattr(common, "code_state", lambda: next(states))
    assert _run(monkeypatch, "--moved") == 0
    text = (results / "sensor_tick.md").read_text(encoding="utf-8")
    assert "; commit aaaaaaa with uncommitted changes to bench/x.py at the start (bbbbbbb at the end);" in text


def test_the_code_state_names_the_changed_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                       check=True, capture_output=True)

    git("init", "-q")
    names = ["a.py", "b.py", "c.py", "d.py", "e.py"]
    for name in names:
        (tmp_path / name).write_text("1\n")
    git("add", *names)
    git("commit", "-q", "-m", "one")
    monkeypatch.setattr(common, "ROOT", tmp_path)
    commit = common._git("rev-parse", "--short", "HEAD")
    assert common.code_state() == commit
    (tmp_path / "a.py").write_text("2\n")
    assert common.code_state() == f"{commit} with uncommitted changes to a.py"
    for name in names[1:]:
        (tmp_path / name).write_text("2\n")
    assert common.code_state() == f"{commit} with uncommitted changes to a.py, b.py, c.py and 2 more"
