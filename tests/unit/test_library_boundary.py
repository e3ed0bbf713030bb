"""The memory library is typed at its boundary (``stash_pipeline.memory.validate``'s
docstring says which layer checks what).

For each subject listed here: every public function of ``memory/<subject>.py`` that takes
the store names parsed values and returns models — no ``Any`` in its signature, its answer
a pydantic model (or a list of them) — and ``operations/<subject>.py`` publishes what the
library returns as it is, without a ``model_validate`` around it. A subject joins the list
when its library is converted; the list only grows.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

#: the subjects whose library functions take parsed values and return models
TYPED_SUBJECTS = ("goals", "hypotheses", "failures", "context", "namespaces", "contradictions", "admin", "graph", "entities",
                  "facts", "episodes")


def _store_functions(subject: str) -> list[tuple[str, Any]]:
    module = importlib.import_module(f"stash_pipeline.memory.{subject}")
    found = []
    for name, value in vars(module).items():
        if name.startswith("_") or not inspect.isfunction(value) or value.__module__ != module.__name__:
            continue
        parameters = list(inspect.signature(value).parameters)
        if parameters and parameters[0] == "store":
            found.append((name, value))
    return found


def _mentions_any(annotation: Any) -> bool:
    if annotation is Any:
        return True
    return any(_mentions_any(arg) for arg in typing.get_args(annotation) if arg is not Ellipsis)


def _is_model_answer(annotation: Any) -> bool:
    """A model, a list of models, or one of them or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    origin = typing.get_origin(annotation)
    if origin is list:
        return _is_model_answer(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        arms = [arm for arm in typing.get_args(annotation) if arm is not type(None)]
        return bool(arms) and all(_is_model_answer(arm) for arm in arms)
    return False


@pytest.mark.parametrize("subject", TYPED_SUBJECTS)
def test_library_functions_take_parsed_values_and_return_models(subject: str) -> None:
    functions = _store_functions(subject)
    assert functions, f"memory/{subject}.py has no public function taking the store"
    for name, function in functions:
        hints = typing.get_type_hints(function)
        parameters = [p for p in inspect.signature(function).parameters if p != "store"]
        for parameter in parameters:
            assert parameter in hints, f"{subject}.{name}: {parameter} has no annotation"
            assert not _mentions_any(hints[parameter]), f"{subject}.{name}: {parameter} is {hints[parameter]}"
        assert "return" in hints, f"{subject}.{name} has no return annotation"
        assert _is_model_answer(hints["return"]), f"{subject}.{name} returns {hints['return']}, not a model"


@pytest.mark.parametrize("subject", TYPED_SUBJECTS)
def test_operations_publish_the_library_answer_as_it_is(subject: str) -> None:
    module = importlib.import_module(f"stash_pipeline.operations.{subject}")
    assert "model_validate" not in inspect.getsource(module), (
        f"operations/{subject}.py re-validates a library answer: the library returns the model"
    )


def test_the_checks_see_a_dict_answer_and_an_any() -> None:
    assert _mentions_any(dict[str, Any]) and _mentions_any(list[str] | Any)
    assert not _mentions_any(list[str] | None)
    assert not _is_model_answer(dict[str, Any])
    assert _is_model_answer(list[BaseModel]) and _is_model_answer(BaseModel | None)


def _any_in_signatures(folder: Path) -> list[str]:
    """``name:function`` for each ``Any`` in a parameter or return annotation under ``folder``."""
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            arguments += [a for a in (node.args.vararg, node.args.kwarg) if a is not None]
            annotations = [a.annotation for a in arguments if a.annotation is not None]
            annotations += [node.returns] if node.returns is not None else []
            found += [f"{path.name}:{node.name}" for annotation in annotations for name in ast.walk(annotation)
                      if isinstance(name, ast.Name) and name.id == "Any"]
    return found


def test_no_any_in_the_memory_library_signatures() -> None:
    """Ids, paths, times and settings are named; a database row is ``db.gateway.Row``, raw input
    to check is ``object`` (``validate``): ``Any`` says nothing a reader can rely on."""
    memory = Path(importlib.import_module("stash_pipeline.memory").__file__).parent
    assert _any_in_signatures(memory) == []


def test_the_any_count_sees_one(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def f(x: list[Any]) -> int: ...\ndef g(**kw: Any) -> None: ...\n")
    assert _any_in_signatures(tmp_path) == ["m.py:f", "m.py:g"]
