"""Migrations are frozen: replayed later, they give the data they gave when written.

A migration that imports application code changes meaning whenever that code does, so
no migration imports ``stash_pipeline`` (``migrations/env.py``, which only runs them,
may). The entity backfill (0009) keeps its own copy of the alias normaliser; today it
must still agree with ``memory.entities.normalise``, so aliases it wrote and aliases
the stages write are one key space. When the application's normaliser changes on
purpose, this comparison fails and says so: the change then needs a new migration that
re-keys the aliases, not an edit of 0009.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from stash_pipeline.memory.entities import normalise

VERSIONS = Path(__file__).resolve().parents[2] / "stash_pipeline" / "db" / "migrations" / "versions"

SAMPLE = [
    "Alice", " alice! ", "she (Alice)", "(Alice)", "Alice Chen (CTO)", "ALICE   CHEN", "Ålesund-Øst",
    "ﬁrst ﬂoor", "Ｆｕｌｌｗｉｄｔｈ", "They (the Ops team)", "db (postgres) primary", "()", "", "   ", "?!",
    "O'Brien", "São Paulo", "Straße", "naïve café", "user_42", "x(y)z", "(a)(b)", "her (Dr. Jones)", "ｓｈｅ (Bob)",
    "İstanbul", "ΣΊΣΥΦΟΣ", "1,000 km", "the API v2.0", "tab\tand\nnewline",
]


def _migration(name: str) -> object:
    spec = importlib.util.spec_from_file_location(f"migration_{name}", VERSIONS / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", sorted(VERSIONS.glob("*.py")), ids=lambda p: p.name)
def test_no_migration_imports_application_code(path: Path) -> None:
    imported = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    assert not {name for name in imported if name.split(".")[0] == "stash_pipeline"}, path.name


def test_the_entity_backfill_normalises_as_the_application_does_today() -> None:
    frozen = _migration("0009_entities.py")._normalise  # type: ignore[attr-defined]
    assert [frozen(name) for name in SAMPLE] == [normalise(name) for name in SAMPLE]
    assert frozen("she (Alice)") == "alice" and frozen("Alice Chen (CTO)") == "alice chen"
    assert frozen(None) == ""
