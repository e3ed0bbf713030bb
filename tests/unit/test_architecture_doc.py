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
    assert Path("stash_serve/mcp/toolsets.py") in entries
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


# -- everything else the page names -------------------------------------------------------

#: where a path written relative to a package (`recall/pipeline.py`, `queries/x.sql`) starts
BASES = (ROOT, ROOT / "stash_pipeline", ROOT / "stash_serve", ROOT / "stash_pipeline" / "db")
FILE_SUFFIXES = (".py", ".sql", ".md", ".yaml", ".yml", ".toml", ".json")


def _code_spans() -> list[str]:
    return re.findall(r"`([^`\n]+)`", DOC.read_text())


def _tree_block() -> list[str]:
    return DOC.read_text().split("```", 2)[1].strip("\n").splitlines()


def _resolves(path: str) -> bool:
    path = re.sub(r"(?<=/)X(?=\.)", "<subject>", path)  # the intro's "tool `X`"
    if "/" not in path.rstrip("/"):  # a bare file name: somewhere in the project
        return any(ROOT.glob(f"{top}/**/{path}") for top in ("stash_pipeline", "stash_serve", "tests", "bench"))
    return any(exists(base.relative_to(ROOT) / path) for base in BASES)


def test_every_path_in_the_text_exists() -> None:
    checked = [
        span.removesuffix("'s")
        for span in _code_spans()
        if re.fullmatch(r"[\w][\w./<>-]*", span) and (span.endswith("/") or span.endswith(FILE_SUFFIXES))
    ]
    assert len(checked) > 20
    missing = [span for span in checked if not _resolves(span)]
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def _module_file(dotted: str) -> Path | None:
    rel = dotted.replace(".", "/")
    for base in (ROOT / "stash_pipeline", ROOT / "stash_serve"):
        for candidate in (base / f"{rel}.py", base / rel / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def test_every_module_function_it_cites_is_defined_there() -> None:
    """`memory/episodes.remember`, `stages.backlog_parameters`, `store.embedder` …"""
    cited = []
    for span in _code_spans():
        match = re.fullmatch(r"([a-z_]+(?:[/.][a-z_]+)*)\.([a-z_]\w*)", span)
        if match and not span.endswith(FILE_SUFFIXES):
            module = _module_file(match[1])
            if module is not None:
                cited.append((span, module, match[2]))
    assert len(cited) > 5
    undefined = [span for span, module, name in cited
                 if not re.search(rf"^\s*(?:async\s+)?(?:def|class)\s+{name}\b|^\s*{name}\s*[:=]",
                                  module.read_text(), re.M)]
    assert not undefined, f"docs/architecture.md cites what its module does not define: {undefined}"


def test_every_named_query_it_cites_is_in_the_file_it_cites() -> None:
    from stash_pipeline.db.sql import parse, query_files

    cited = re.findall(r"`(\w+)`[^`]{0,40}?\(`(?:\w+/)?queries/(\w+)\.sql`", DOC.read_text())
    assert len(cited) >= 5
    files = {path.stem: path for path in query_files()}
    missing = [f"{name} in {file}.sql" for name, file in cited
               if name not in parse(files[file].read_text(), file)]
    assert not missing, f"docs/architecture.md cites queries that are not there: {missing}"


def _sections() -> dict[Path, str]:
    """Each folder of the tree → the text of its line and every line indented under it."""
    lines = _tree_block()
    out: dict[Path, str] = {}
    stack: list[tuple[int, Path]] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent >= DESCRIPTION_COLUMN:
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        names = re.split(r" {2,}", line.strip(), maxsplit=1)[0].split()
        if len(names) == 1 and names[0].endswith("/") and "/" not in names[0].rstrip("/"):
            folder = (stack[-1][1] if stack else Path()) / names[0].rstrip("/")
            body = [line]
            for later in lines[i + 1:]:
                later_indent = len(later) - len(later.lstrip())
                if later.strip() and indent >= later_indent:
                    break
                body.append(later)
            out[folder] = "\n".join(body)
            stack.append((indent, folder))
    return out


def test_every_module_of_both_packages_is_in_the_tree() -> None:
    """Each module is an entry, matches a ``<placeholder>`` entry, or is named (by its file
    stem) in the lines of its folder: a new module is not left off the map."""
    entries = tree_entries()
    globs = [re.sub(r"<\w+>", "*", str(e)) for e in entries if "<" in str(e)]
    sections = _sections()
    unnamed = []
    for package in ("stash_pipeline", "stash_serve"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if path.name == "__init__.py" or "migrations" in rel.parts or "__pycache__" in rel.parts:
                continue
            if rel in entries or any(rel.match(g) for g in globs):
                continue
            folder = next((f for f in [rel.parent, *rel.parent.parents] if f in sections), None)
            if folder is None or not re.search(rf"(?<![\w/]){re.escape(path.stem)}(?:\.py)?\b", sections[folder]):
                unnamed.append(str(rel))
    assert not unnamed, f"modules missing from docs/architecture.md: {unnamed}"
