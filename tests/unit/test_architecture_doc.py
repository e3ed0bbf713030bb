"""docs/architecture.md's tree names only files and folders that exist.

The tree is read by indentation: a name ending in ``/`` opens a folder for the lines
indented under it; the names before the first run of two spaces on a line are entries
(``<subject>.py`` stands for "at least one such file"). The words after them, and lines
that start in the description column, are descriptions and are not checked.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
#: where descriptions start; a line indented this far continues the one above
DESCRIPTION_COLUMN = 23


def tree_entries() -> list[Path]:
    block = DOC.read_text().split("```", 2)[1].strip("\n").splitlines()
    stack: list[tuple[int, Path]] = []
    entries: list[Path] = []
    for line in block:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent >= DESCRIPTION_COLUMN:
            continue
        names = re.split(r" {2,}", line.strip(), maxsplit=1)[0].split()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else Path()
        for name in names:
            entries.append(parent / name.rstrip("/"))
            if name.endswith("/") and len(names) == 1 and "/" not in name.rstrip("/"):
                stack.append((indent, parent / name.rstrip("/")))
    return entries


def exists(entry: Path) -> bool:
    pattern = re.sub(r"<\w+>", "*", str(entry))
    return any(ROOT.glob(pattern)) if "*" in pattern else (ROOT / entry).exists()


def test_the_tree_is_read() -> None:
    entries = tree_entries()
    assert Path("stash_pipeline/db/gateway.py") in entries
    assert Path("stash_serve/mcp/tools/<subject>.py") in entries
    assert len(entries) > 40


def test_every_entry_exists() -> None:
    missing = [str(entry) for entry in tree_entries() if not exists(entry)]
    assert not missing, f"docs/architecture.md names what is not in the tree: {missing}"


def test_every_package_module_is_named() -> None:
    """Each top-level module and sub-package of both packages appears in the tree."""
    named = {str(entry) for entry in tree_entries()}
    for package in ("stash_pipeline", "stash_serve"):
        for path in sorted((ROOT / package).iterdir()):
            if path.name.startswith(("_", ".")) or path.suffix not in ("", ".py") or path.name.endswith(".egg-info"):
                continue
            assert str(path.relative_to(ROOT)) in named, f"{path.relative_to(ROOT)} is missing from docs/architecture.md"
