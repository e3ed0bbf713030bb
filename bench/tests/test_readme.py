"""bench/README.md stays a page a reader can act on; the figures are in bench/results/.

It is kept under 400 lines (the run history lives in git), links every results file and
only files that exist, every bench command it names exists, and every flag its table of commands gives is one the named script accepts (the
baseline flags through ``bench.common.add_baseline_arguments``).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "bench" / "README.md"
MAX_LINES = 400

MODULE = re.compile(r"python -m (bench(?:\.\w+)+)")
SCRIPT = re.compile(r"python (bench/[\w/]+\.py)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def _text() -> str:
    return README.read_text(encoding="utf-8")


def _script_for_module(module: str) -> Path:
    return ROOT / (module.replace(".", "/") + ".py")


def _commands_table(text: str) -> list[str]:
    """The rows of the table under "What each bench measures"."""
    section = text.split("## What each bench measures", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and "`" in line]


def test_the_page_stays_under_400_lines() -> None:
    lines = len(_text().splitlines())
    assert lines < MAX_LINES, f"bench/README.md has {lines} lines; keep results, move history to git"


def test_the_page_points_at_its_history() -> None:
    assert "git log -p bench/README.md" in _text()


def test_the_page_links_every_results_file_and_only_those() -> None:
    linked = set(re.findall(r"\]\((results/[\w.]+\.md)\)", _text()))
    present = {f"results/{path.name}" for path in (ROOT / "bench" / "results").glob("*.md")}
    assert linked == present, f"linked, no file: {sorted(linked - present)}; not linked: {sorted(present - linked)}"


def test_every_named_bench_module_exists() -> None:
    text = _text()
    modules = set(MODULE.findall(text))
    assert modules, "the page names the commands that reproduce its figures"
    missing = sorted(m for m in modules if not _script_for_module(m).is_file())
    assert not missing, f"bench/README.md names modules with no file: {missing}"
    scripts = set(SCRIPT.findall(text))
    missing_scripts = sorted(s for s in scripts if not (ROOT / s).is_file())
    assert not missing_scripts, f"bench/README.md names scripts that do not exist: {missing_scripts}"


def test_every_flag_in_the_commands_table_is_accepted_by_its_script() -> None:
    rows = _commands_table(_text())
    assert len(rows) >= 10, "the table of commands lists every bench"
    checked = 0
    for row in rows:
        modules = MODULE.findall(row)
        scripts = [ROOT / s for s in SCRIPT.findall(row)]
        paths = [_script_for_module(m) for m in modules] + scripts
        if not paths:
            continue  # a command outside bench/ (its own module checks its flags)
        source = paths[0].read_text(encoding="utf-8")
        if "common.add_baseline_arguments(" in source:  # --baseline-src / --baseline-rev, shared
            source += (ROOT / "bench" / "common.py").read_text(encoding="utf-8")
        for flag in set(FLAG.findall(row)):
            assert f'"{flag}"' in source, f"{paths[0].name} has no {flag} (row: {row[:80]})"
            checked += 1
    assert checked, "the table's flags were checked"
