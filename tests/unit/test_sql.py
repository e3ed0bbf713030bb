"""Named queries: every name used in code exists, every query is used, all parse."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from stash_pipeline.db import sql

ROOT = Path(__file__).resolve().parents[2]
CALLS = {"one", "all", "scalar", "execute", "executemany", "returning_many", "query"}


def _names_used_in_code() -> dict[str, list[str]]:
    used: dict[str, list[str]] = {}
    for path in list((ROOT / "stash_pipeline").rglob("*.py")) + list((ROOT / "stash_serve").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            first = node.args[0]
            if name in CALLS and isinstance(first, ast.Constant) and isinstance(first.value, str):
                if re.fullmatch(r"[a-z0-9_]+", first.value):
                    used.setdefault(first.value, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return used


def test_every_query_name_used_in_code_exists():
    missing = {name: where for name, where in _names_used_in_code().items() if name not in sql.QUERIES}
    assert not missing, f"queries used but not defined in db/queries/*.sql: {missing}"


def _dynamic_name_patterns() -> list[re.Pattern[str]]:
    """f-strings like f"reembed_next_{table}" as regexes, for queries chosen at run time."""
    patterns = []
    for path in list((ROOT / "stash_pipeline").rglob("*.py")) + list((ROOT / "stash_serve").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
                prefix = str(node.values[0].value)
                # only f-strings that start with a real query-name prefix, e.g. f"reembed_next_{table}"
                if not re.fullmatch(r"[a-z][a-z0-9]*_[a-z0-9_]*", prefix) or len(prefix) < 6:
                    continue
                parts = [re.escape(str(v.value)) if isinstance(v, ast.Constant) else "[a-z0-9_]+" for v in node.values]
                patterns.append(re.compile("".join(parts)))
    return patterns


def test_every_defined_query_is_used():
    used = set(_names_used_in_code())
    text = "\n".join(p.read_text() for p in list((ROOT / "stash_pipeline").rglob("*.py")) + list((ROOT / "stash_serve").rglob("*.py")))
    dynamic = _dynamic_name_patterns()
    unused = [
        name
        for name in sql.QUERIES
        if name not in used and f'"{name}"' not in text and not any(p.fullmatch(name) for p in dynamic)
    ]
    assert not unused, f"queries defined but never used: {unused}"


def test_parser_rejects_duplicates_and_empty_blocks():
    with pytest.raises(ValueError, match="defined twice"):
        sql.parse("-- a --\nSELECT 1\n-- a --\nSELECT 2\n")
    with pytest.raises(ValueError, match="empty"):
        sql.parse("-- a --\n-- only a comment\n")
    assert sql.parse("-- a --\n-- doc\nSELECT 1;\n") == {"a": "SELECT 1"}


def test_no_query_formats_values_with_fstrings():
    offenders = []
    for path in (ROOT / "stash_pipeline").rglob("*.py"):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"execute\(\s*f[\"']", line):
                offenders.append(f"{path.relative_to(ROOT)}:{lineno}")
    assert not offenders, offenders


def test_a_statement_is_plain_sql_and_every_query_file_is_loaded():
    """No template language: a query is its file's text (whole-line comments dropped)."""
    text = "-- preamble\n-- q --\n-- doc\nSELECT '{{ x }}' AS braces, 1 -- kept\n  -- dropped\nFROM t\n"
    assert sql.parse(text) == {"q": "SELECT '{{ x }}' AS braces, 1 -- kept\nFROM t"}
    files = sql.query_files()
    assert files[0].parent == sql.QUERY_DIR
    assert ROOT / "stash_pipeline" / "recall" / "queries" / "recall.sql" in files
    assert {"recall", "recall_check", "recall_names", "recall_search_params"} <= set(sql.QUERIES)
    for path in files:
        assert "{{" not in path.read_text(), f"{path} holds template syntax"
