"""Every reference in the project resolves inside the repository.

The project ships alone: its docs, comments and READMEs must not point at design notes,
section numbers of documents or paths on a developer's machine that a reader of the
repository does not have, and every relative link in a Markdown file must name a file
that exists.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP_DIRS = {".git", ".venv", "__pycache__", "node_modules", ".pytest_cache", ".ruff_cache", ".hypothesis"}
TEXT_SUFFIXES = {".py", ".md", ".sql", ".toml", ".yaml", ".yml", ".cfg", ".txt", ".example", ""}
#: pointers at documents that do not ship with the project
DANGLING = re.compile(
    r"SPEC\s*§|STYLE\s*§|inventory\s*§|stash_inventory|\.\./shared|shared/reference|/work/|issue notes?\b"
)
MARKDOWN_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def project_files() -> list[Path]:
    """The tracked files (``git ls-files``), or every file but caches outside a checkout."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True
        ).stdout.decode().split("\0")
        candidates = [ROOT / name for name in listed if name]
    except (OSError, subprocess.CalledProcessError):
        candidates = list(ROOT.rglob("*"))
    found = []
    for path in candidates:
        parts = set(path.relative_to(ROOT).parts)
        if parts & SKIP_DIRS or any(part.endswith(".egg-info") for part in parts) or not path.is_file():
            continue
        if path.suffix in TEXT_SUFFIXES and path.stat().st_size < 1_000_000:
            found.append(path)
    return found


def test_the_walk_sees_the_project() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in project_files()}
    assert {"README.md", "docs/architecture.md", "stash_pipeline/config.py"} <= names


def test_no_pointer_outside_the_repository() -> None:
    this_file = Path(__file__).resolve()
    hits = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}"
        for path in project_files()
        if path.resolve() != this_file
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if DANGLING.search(line)
    ]
    assert not hits, "references that do not resolve inside the repository:\n" + "\n".join(hits)


def test_markdown_links_resolve() -> None:
    broken = []
    for path in project_files():
        if path.suffix != ".md":
            continue
        for target in MARKDOWN_LINK.findall(path.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            if not (path.parent / target).exists():
                broken.append(f"{path.relative_to(ROOT)} → {target}")
    assert not broken, "broken links:\n" + "\n".join(broken)
