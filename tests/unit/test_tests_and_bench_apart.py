"""tests/ and bench/ do not import each other: what both need is in testkit/.

Every module of each tree is parsed (``ast``); an import of the other tree's top package,
absolute or by ``importlib``/``__import__`` with a literal name, fails here. testkit/
imports neither, and is not part of the shipped wheel.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: each tree and the top package its modules must not import
APART = {"tests": "bench", "bench": "tests", "testkit": ("tests", "bench")}


def _imported(tree: ast.AST) -> list[tuple[int, str]]:
    names: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names.append((node.lineno, node.args[0].value))
    return names


def _crossings(folder: str, forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, name in _imported(tree):
            if name.split(".")[0] in forbidden:
                found.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    return found


def test_neither_tree_imports_the_other() -> None:
    crossings = []
    for folder, forbidden in APART.items():
        crossings += _crossings(folder, (forbidden,) if isinstance(forbidden, str) else forbidden)
    assert not crossings, "move what both need into testkit/:\n" + "\n".join(crossings)


def test_the_check_sees_an_import_of_the_other_tree() -> None:
    tree = ast.parse("import bench.common\nfrom tests.support import x\nimportlib.import_module('bench.x')\n")
    assert [name for _, name in _imported(tree)] == ["bench.common", "tests.support", "bench.x"]
    assert _imported(ast.parse("from . import common\nfrom .data import generate\n")) == []


def test_both_test_trees_run_by_default_and_testkit_is_not_shipped() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["tool"]["pytest"]["ini_options"]["testpaths"] == ["tests", "bench/tests"]
    shipped = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    assert not any(Path("testkit").match(pattern) for pattern in shipped), shipped
