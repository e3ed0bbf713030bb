"""What an operation is: its arguments model, the library call, its right and its result.

An ``Operation`` is the one declaration of a memory operation. The MCP tool
(``stash_serve.mcp.derive``) and the CLI command (``stash_serve.cli.derive``) are built
from it: the tool's input schema and description, the command's options and help, both
from the arguments model's fields, their types, defaults, descriptions and constraints.
Adding a parameter is one field here; both surfaces and the docs follow.

Validation lives in the arguments model: shapes, ranges, namespace paths, ids and times
are checked when the model is built, before the store is touched. A validator raises a
``StashError`` when the error has its own code (a bad namespace path), otherwise a
``ValueError`` that each surface reports under the argument's name on that surface
(``as_of`` to an agent, ``--as-of`` at a shell). Each value is parsed once, here, into
its typed form (a time into a UTC datetime, namespaces into checked paths), and the
scope and the library take it as it is: recall, the time arguments, ``remember``'s and
``remember_batch``'s namespace and ``trace_causal_chain``'s bounds are not checked
again. What needs the store's settings (content and metadata sizes) the library checks,
once. A caller that is not a surface (a stage, import, bench) parses raw input with the
same parsers (``stash_pipeline.memory.validate``).

``reach`` says how the caller's namespaces scope the call, and so what a token needs:
``trees`` (the ``namespaces`` trees, read, or changed with ``right``), ``namespace`` (a write to one exact
``namespace``), ``by_id`` (a record by id, in any namespace the caller may use with
``right``), ``trees_or_by_id`` (the ``namespaces`` trees when given, else by id),
``scope`` (the caller's whole ``Scope``, for a call whose answer depends on who asks:
``init`` answers a token without /self, ``create_namespace`` counts a token's creations
against its hourly allowance, ``consolidate`` starts its work on the caller's runs,
``create_goal`` / ``create_failure`` write to one namespace and look their ``parent_id`` /
``goal_id`` up within the caller's trees, ``list_goals`` / ``list_failures`` show those ids
only within them) or ``none``.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler, GetJsonSchemaHandler, ValidationError
from pydantic_core import PydanticCustomError, core_schema

from stash_pipeline import errors
from stash_pipeline.memory import validate

Right = Literal["read", "write", "admin"]
Reach = Literal["trees", "namespace", "by_id", "trees_or_by_id", "scope", "none"]
#: what a client may assume about a call: nothing changes, a change, a change that repeating
#: does not repeat, a change that loses data (and repeating it does or does not change more)
Effect = Literal["read", "write", "write_idempotent", "destructive", "destructive_idempotent"]


class Allowance(Protocol):
    """At most ``limit`` events per key in a window (``stash_serve.limits.SlidingWindow``)."""

    limit: int

    def acquire(self, key: Any, count: int = 1) -> bool: ...

    def record(self, key: Any, count: int = 1) -> None: ...

    def release(self, key: Any, count: int = 1) -> None: ...


class Runs(Protocol):
    """The consolidation runs a surface starts and sees (``stash_serve.runs.BackgroundJobs``):
    ``consolidate`` starts checked work and answers at once, ``in_flight`` lists it."""

    def consolidate(self, store: Any, roots: list[str], slugs: list[str], stages: list[str] | None) -> dict[str, Any]: ...

    def in_flight(self, settings: Any, paths: list[str], slugs: list[str]) -> dict[str, Any]: ...


class Scope(Protocol):
    """The caller's reach (``stash_serve.mcp.calls.Scope``; ``UNRESTRICTED`` at a shell).

    ``token`` is the caller's ``stash_pipeline.auth.TokenInfo`` (None: unrestricted);
    ``namespaces_created`` the allowance of namespaces a token creates an hour (None: no
    limit); ``runs`` the consolidation runs the caller's server started or sees (None at a
    shell, which starts none in the background).
    """

    @property
    def token(self) -> Any: ...

    @property
    def namespaces_created(self) -> Allowance | None: ...

    @property
    def runs(self) -> Runs | None: ...

    def read(self, namespaces: list[str] | None) -> list[str]: ...

    def write(self, namespace: str, right: str = "write") -> str: ...

    def by_id(self, right: str) -> list[str] | None: ...


class Unrestricted:
    """The reach of a local caller (the CLI, stdio without a token): any namespace.

    Like every ``Scope`` it takes the paths an arguments model checked (``Namespaces``,
    ``Namespace``): None is every tree.
    """

    token = None
    namespaces_created = None
    runs = None

    def read(self, namespaces: list[str] | None) -> list[str]:
        return namespaces or ["/"]

    def write(self, namespace: str, right: str = "write") -> str:
        return namespace

    def by_id(self, right: str) -> list[str] | None:
        return None


UNRESTRICTED = Unrestricted()


class ListCap:
    """The most entries a list argument takes, checked before any entry is.

    In a field's ``Annotated`` metadata: a longer list (or, with ``commas``, a comma
    string of more entries) is refused with "at most N <noun> (got M)" before pydantic
    looks at a single element, so the cost of a refusal does not grow with the list; the
    JSON schema advertises the cap as ``maxItems``. It is no pydantic validator class, so
    the MCP tool's signature (``stash_serve.mcp.derive``) keeps it: the SDK's own argument
    check refuses the list first, with the same words.

    The refusal's recorded input is a small stand-in (``TooLong``), not the list: the SDK
    formats its validation error with the input's ``repr``, which for 100,000 objects
    took longer than everything else about the refusal.
    """

    def __init__(self, maximum: int, noun: str = "items", *, commas: bool = False) -> None:
        self.maximum = maximum
        self.noun = noun
        self.commas = commas

    def __repr__(self) -> str:
        return f"ListCap({self.maximum}, {self.noun!r})"

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        # count (a too-long value becomes a TooLong), then refuse that or validate the value
        return core_schema.no_info_before_validator_function(
            self._count, core_schema.no_info_wrap_validator_function(self._refuse, handler(source))
        )

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler) -> Any:
        json_schema = handler(schema)
        target = handler.resolve_ref_schema(json_schema)
        for arm in target.get("anyOf", [target]):
            if isinstance(arm, dict) and arm.get("type") == "array":
                arm["maxItems"] = self.maximum
        return json_schema

    def _count(self, value: Any) -> Any:
        if isinstance(value, list | tuple) or (self.commas and isinstance(value, str)):
            count = validate.too_many(value, self.maximum)
            if count is not None:
                return TooLong(count)
        return value

    def _refuse(self, value: Any, handler: core_schema.ValidatorFunctionWrapHandler) -> Any:
        if isinstance(value, TooLong):
            raise PydanticCustomError(
                "too_long", "at most {maximum} {noun} (got {count})",
                {"maximum": self.maximum, "noun": self.noun, "count": value.count},
            )
        return handler(value)


@dataclass(frozen=True)
class TooLong:
    """What a list over its ``ListCap`` is recorded as in the refusal: its length only."""

    count: int


def _takes_list(annotation: Any) -> bool:
    """Whether a field's type accepts a list (alone or in a union)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_takes_list(arm) for arm in typing.get_args(annotation))
    return typing.get_origin(annotation) in (list, tuple, set, frozenset)


class Arguments(BaseModel):
    """Base of every arguments model: unknown names are errors; a built model is frozen.

    Every list argument has a cap: one declared with the field's type (``ListCap`` in
    ``fields.Namespaces``, ``fields.IdList``), else validate.LIST_ITEMS_MAX (remember_batch's
    items, split_entity's aliases), added here when the model is defined.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        capped = False
        for info in cls.model_fields.values():
            if _takes_list(info.annotation) and not any(isinstance(m, ListCap) for m in info.metadata):
                info.metadata.append(ListCap(validate.LIST_ITEMS_MAX))
                capped = True
        if capped:
            cls.model_rebuild(force=True)


@dataclass(frozen=True)
class CliView:
    """How the operation reads at a shell, where that differs from the derived default.

    ``path`` is the command (``("fact", "show")``; a one-word path is a top-level command),
    ``arguments`` the fields taken as positional arguments (``{field: METAVAR}``), ``names``
    extra option names kept for a field (``{"include_resolved": ("--all",)}``), ``help``
    per-field help where the shell wants other words than the agent, ``columns`` the table
    columns of a list answer, ``example`` the help's example line(s), ``stdin`` fields that
    read standard input when given as ``-``, ``hidden`` fields not offered at a shell.
    """

    path: tuple[str, ...]
    example: str
    arguments: dict[str, str] = field(default_factory=dict)
    names: dict[str, tuple[str, ...]] = field(default_factory=dict)
    help: dict[str, str] = field(default_factory=dict)
    summary: str | None = None
    columns: tuple[str, ...] | None = None
    stdin: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()


@dataclass(frozen=True)
class Operation:
    """One memory operation, declared once.

    ``call(store, args, namespaces)`` runs it: ``namespaces`` is what ``reach`` resolved
    from the caller's scope (read paths, the write path, the by-id scope, the scope itself or None).
    ``paged`` operations return one page's rows; surfaces wrap them (MCP: ``items`` and
    ``next_offset``). ``result`` is the model of the answer (of each row when paged), for
    the output schema and the docs; None where the answer is a plain JSON object.
    ``output_schema`` publishes ``result`` as the tool's output schema, for an answer whose
    shape agents parse (recall's); its descriptions then count against the budget.
    ``description`` is what an agent reads (kept short: every character goes to every
    agent, under the budget ``tests/mcp/test_tool_surface.py`` holds); ``cli.summary``,
    where given, is the shell's longer first line of help.
    """

    name: str
    description: str
    arguments: type[Arguments]
    call: Callable[[Any, Any, Any], Any]
    right: Right
    reach: Reach
    effect: Effect
    cli: CliView | None = None
    result: type[BaseModel] | None = None
    paged: bool = False
    output_schema: bool = False

    def resolve(self, scope: Scope, args: Arguments) -> Any:
        """The namespaces this call may act on, from the caller's scope and the arguments."""
        if self.reach == "trees":
            paths = scope.read(getattr(args, "namespaces", None))
            if self.right != "read":  # a change across trees (forget): the right on each of them
                for path in paths:
                    scope.write(path, self.right)
            return paths
        if self.reach == "namespace":
            return scope.write(args.namespace, self.right)  # type: ignore[attr-defined]
        if self.reach == "trees_or_by_id" and getattr(args, "namespaces", None) is not None:
            return scope.read(args.namespaces)  # type: ignore[attr-defined]
        if self.reach in ("by_id", "trees_or_by_id"):
            return scope.by_id(self.right)
        if self.reach == "scope":  # the call checks the scope itself
            return scope
        return None

    def parse(self, values: dict[str, Any], label: Callable[[str], str] = str) -> Arguments:
        """The arguments model of ``values``; a ``ValueError`` in it is an ``InvalidInput``
        naming each argument as ``label`` spells it on the caller's surface."""
        try:
            return self.arguments(**values)
        except ValidationError as exc:
            raise invalid_arguments(exc, label) from None

    def invoke(self, store: Any, scope: Scope, args: Arguments) -> Any:
        """Call the library with checked ``args`` within the caller's ``scope``."""
        return self.call(store, args, self.resolve(scope, args))


# --- validators the arguments models share ------------------------------------------------


def iso_time(value: str | None) -> datetime | None:
    """An ISO 8601 time (a value without an offset is UTC) as a UTC datetime; '' is None.

    The text is parsed here, once (``validate.parse_time``), with the library's range
    check; the library functions take the datetime as it is.
    """
    if value is None or value.strip() == "":
        return None
    parsed = validate.parse_time(value)
    if parsed is None:
        # the value is not repeated: it may be long, and the caller has it
        raise ValueError("not an ISO 8601 time, e.g. 2026-05-01T12:00:00Z")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    try:
        return validate.timestamp(parsed, "time")
    except errors.InvalidInput as exc:  # the range check's words, without its field name
        raise ValueError(exc.message.removeprefix("time ")) from None


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def duration(value: str | None) -> timedelta | None:
    """``90s``, ``30m``, ``1h``, ``2d``, ``1w`` (a bare number is seconds); None stays None."""
    if value is None:
        return None
    match = _DURATION.match(value)
    if not match or float(match.group(1)) <= 0:
        raise ValueError("not a positive duration like 90s, 30m, 1h or 2d")
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])


def invalid_arguments(exc: ValidationError, label: Callable[[str], str] = str) -> errors.InvalidInput:
    """One InvalidInput for a failed arguments model: each problem as ``<argument>: <why>``.

    The rejected values are not repeated: they are the caller's data (possibly huge).
    """
    parts = []
    for err in exc.errors()[:10]:
        loc = err.get("loc", ())
        why = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if loc and err.get("type") == "missing":
            parts.append(missing_argument(label(str(loc[0]))))
        else:
            parts.append(f"{label(str(loc[0]))}: {why}" if loc else why)
    return errors.InvalidInput("invalid arguments: " + "; ".join(parts))


def missing_argument(name: str) -> str:
    """``namespace is required (an exact namespace path, e.g. /projects/x)``: an argument left
    out, said as such (not as the type error its default would give), with an example for
    the namespace a write goes to."""
    example = " (an exact namespace path, e.g. /projects/x)" if name.lstrip("-") == "namespace" else ""
    return f"{name} is required{example}"


def namespaces_or_none(value: Any) -> list[str] | None:
    """Read trees (a list or a comma string), checked; None/''/[] (the caller's default) stays None."""
    if value in (None, "", []):
        return None
    return validate.slugs(value)


__all__ = [
    "UNRESTRICTED",
    "Allowance",
    "Arguments",
    "CliView",
    "Effect",
    "ListCap",
    "Operation",
    "Reach",
    "Right",
    "Runs",
    "Scope",
    "Unrestricted",
    "duration",
    "invalid_arguments",
    "iso_time",
    "missing_argument",
    "namespaces_or_none",
]
