"""README.md's "Layout" names only paths that exist, so it cannot go stale unnoticed.

Every code span of the section that looks like a path (it holds a ``/`` or ends in a file
suffix) is read from the repository root; a ``*`` in it must match at least one file.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUFFIXES = (".py", ".sql", ".md", ".yaml", ".yml", ".toml", ".json", ".txt", ".sh")


def layout_paths() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    spans = re.findall(r"`([^`\n]+)`", section)
    return [span for span in spans if "/" in span or span.endswith(SUFFIXES)]


def _exists(path: str) -> bool:
    return any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()


def test_the_section_is_read() -> None:
    paths = layout_paths()
    assert "stash_pipeline/operations/" in paths and "stash_serve/mcp/" in paths
    assert len(paths) > 20


def test_every_path_in_the_layout_exists() -> None:
    missing = [path for path in layout_paths() if not _exists(path)]
    assert not missing, f"README.md's Layout names what is not in the tree: {missing}"


def test_every_package_of_both_top_packages_is_named() -> None:
    named = set(layout_paths())
    for package in ("stash_pipeline", "stash_serve"):
        for path in sorted((ROOT / package).iterdir()):
            if path.is_dir() and (path / "__init__.py").exists():
                assert f"{path.relative_to(ROOT)}/" in named, f"README.md's Layout leaves out {path.relative_to(ROOT)}/"
