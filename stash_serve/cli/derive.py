"""CLI commands derived from the operation declarations (``stash_pipeline.operations``).

Every field of an operation's arguments model is an option named after it
(``include_history`` → ``--include-history``; ``namespace`` and ``namespaces`` are both
``-n/--namespace``, as every command has them) or,
where the operation's ``CliView`` says so, a positional argument. Help comes from the
field's description; the command's help is the operation's description (or the view's
longer summary) and the view's example. The options are checked by the arguments model
before the store opens, so bad input fails without a database. The answer prints as
``--json``, a table of the view's columns (lists), ``key: value`` lines, or the way a
subject's ``render`` says.

Nothing here imports the library at module level: building the command tree must not
load the database layer (``stash --help`` works offline).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any, Literal

import click
from pydantic.fields import FieldInfo

from stash_serve.cli import base
from stash_serve.cli.output import emit_json, show

if typing.TYPE_CHECKING:
    from stash_pipeline.operations.base import Operation

#: help wording of the shared arguments at a shell (an agent reads the shorter field descriptions)
SHARED_HELP = {
    "namespace": "Namespace path, e.g. /projects/x.",
    "namespaces": "Namespace path(s) to read, comma-separated; descendants are included.",
    "limit": "Maximum rows.",
    "offset": "Rows to skip.",
    "as_of": "What was true at this time (event time, ISO 8601; default now).",
    "known_at": "As Stash knew it at this time (system time, ISO 8601; default now).",
}

#: how a subject prints an answer for people: (answer, --json given, the checked arguments,
#: then the values of the command's own ``extra`` options by name)
Render = Callable[..., None]
#: before an erasing command runs: (store, arguments) → a line describing what goes
Describe = Callable[[Any, Any], str]
#: before a command that asks in its own way runs: (store, arguments, --yes given) → go on?
Ask = Callable[[Any, Any, bool], bool]
#: a command that runs its operation the shell's way: (store, arguments, then the values of
#: its ``extra`` options by name) → the answer ``render`` prints
Call = Callable[..., Any]


def sentence(text: Callable[[Any, Any], str]) -> Render:
    """A render that prints ``--json`` records, or else one line: ``text(answer, arguments)``."""

    def render(result: Any, as_json: bool, args: Any) -> None:
        if as_json:
            emit_json(result)
        else:
            click.echo(text(result, args))

    return render


def _options(annotation: Any) -> list[Any]:
    """The types a field accepts, None left out."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(annotation) if a is not type(None)]
    return [annotation]


def _click_type(info: FieldInfo) -> Any:
    kinds = _options(info.annotation)
    if len(kinds) == 1:
        kind = kinds[0]
        if typing.get_origin(kind) is Literal:
            return click.Choice([str(v) for v in typing.get_args(kind)])
        if kind in (int, float, bool):
            return kind
    return str  # text, and lists given as a comma string, parsed by the model


def _is_list(info: FieldInfo) -> bool:
    return all(typing.get_origin(k) is list for k in _options(info.annotation))


def _is_object(info: FieldInfo) -> bool:
    return any(typing.get_origin(k) is dict or k is dict for k in _options(info.annotation))


def _parameter(op: Operation, name: str, info: FieldInfo) -> click.Parameter:
    view = op.cli
    assert view is not None
    if name in view.arguments:
        many = _is_list(info)
        return click.Argument(
            [name], type=_click_type(info) if not many else str, metavar=view.arguments[name] + ("..." if many else ""),
            required=info.is_required(), nargs=-1 if many else 1,
        )
    # at a shell one namespace or several are both `-n/--namespace` (a comma string)
    flag = "--namespace" if name == "namespaces" else "--" + name.replace("_", "-")
    decls = [flag, *view.names.get(name, ())]
    if name in ("namespace", "namespaces"):
        decls.append("-n")
    help_text = view.help.get(name) or SHARED_HELP.get(name) or info.description or ""
    kind = _click_type(info)
    if kind is bool:
        return click.Option([*decls, name], is_flag=True, default=bool(info.default), help=help_text)
    if info.is_required() or name == "namespace":  # a write always names where it goes
        example = base.NAMESPACE_EXAMPLE if name == "namespace" else None
        return base.RequiredOption([*decls, name], type=kind, example=example, help=help_text)
    default = "/" if name == "namespaces" and op.reach in ("trees", "scope") else info.default
    return click.Option(
        [*decls, name], type=kind, default=default, show_default=default is not None, help=help_text,
    )


def command(
    op: Operation,
    *,
    render: Render | None = None,
    describe: Describe | None = None,
    name: str | None = None,
    summary: str | None = None,
    example: str | None = None,
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    extra: tuple[click.Option, ...] = (),
    question: str = "erase it permanently?",
    ask: Ask | None = None,
    call: Call | None = None,
) -> click.Command:
    """The click command of ``op``: named by the last word of its view's path.

    ``describe`` makes it an erasing command: it shows what goes and asks first (``--yes``
    does not ask); ``ask`` does the asking itself (``forget`` previews its match first).
    ``name``, ``summary`` and ``example`` serve a second name of the same
    command (``stash fact purge`` beside ``stash purge fact``). ``prepare`` reshapes the
    given values before they are checked, where a shell argument stands for more than one
    field (an entity given by id or by name). ``extra`` options belong to the shell alone
    (how to print, ``--mermaid``); their values go to ``render``, and to ``call`` where the
    shell runs the operation its own way (``consolidate run`` works in this terminal, where
    the tool answers a handle at once) after the same checks of the same arguments.
    """
    view = op.cli
    assert view is not None, f"{op.name} has no CLI view"
    fields = {n: f for n, f in op.arguments.model_fields.items() if n not in view.hidden}
    labels = {n: view.arguments.get(n) or "--" + n.replace("_", "-") for n in fields}

    def callback(as_json: bool = False, yes: bool = False, **given: Any) -> None:
        from stash_pipeline.operations.base import UNRESTRICTED

        own = {option.name: given.pop(option.name) for option in extra if option.name}
        values: dict[str, Any] = {}
        for name, value in given.items():
            if isinstance(value, tuple):
                value = list(value)
            if name in view.stdin and isinstance(value, str):
                value = base.read_content(value)
            if value is not None and _is_object(fields[name]) and isinstance(value, str):
                value = base.parse_json_object(value, labels[name])
            values[name] = value
        if prepare is not None:
            values = prepare(values)
        args = op.parse(values, lambda field: labels.get(field, field))
        store = base.store()
        if describe is not None:
            if not yes:
                click.echo(describe(store, args), err=True)
            base.confirm(question, yes)
        if ask is not None and not ask(store, args, yes):
            return
        result = op.invoke(store, UNRESTRICTED, args) if call is None else call(store, args, **own)
        if render is not None:
            render(result, as_json, args, **own)
        else:
            show(result, as_json, view.columns)

    params = [*(_parameter(op, n, f) for n, f in fields.items()), *extra]
    if describe is not None or ask is not None:
        params.append(click.Option(["--yes", "-y", "yes"], is_flag=True, help="Do not ask for confirmation."))
    params.append(click.Option(["--json", "as_json"], is_flag=True, help="Print JSON records instead of a table."))
    lines = "\n".join("  " + line for line in (example or view.example).splitlines())
    text = f"{summary or view.summary or op.description}\n\n\b\nExample:\n{lines}"
    return click.Command(name or view.path[-1], params=params, callback=callback, help=text)


__all__ = ["SHARED_HELP", "command", "sentence"]
