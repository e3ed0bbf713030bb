"""Which tools a server offers: the ``default`` set, one toolset per subject, or all.

Every tool is in the toolset of its subject (``stash_pipeline.operations.SUBJECTS``:
``namespaces``, ``episodes`` … ``admin``); ``default`` holds the tools of an agent's
everyday loop, across subjects. A spec is ``default``, ``all`` or a comma-separated list
of toolset names (``default,graph``); the server offers their union, in subject order.
An unknown name is a start-up error listing the valid ones. The spec comes from
``STASH_TOOLSETS`` or ``stash serve mcp --toolsets``; ``stash tools`` lists the sets.
A call of a tool the server does not offer is answered by ``unknown_tool_message``.
"""

from __future__ import annotations

import difflib

from stash_pipeline import errors
from stash_pipeline.operations import SUBJECTS
from stash_pipeline.operations.base import Operation

DEFAULT = "default"
ALL = "all"

#: the everyday loop: open the session, recall before answering, remember what lasts,
#: keep the focus, read facts and goals, forget on request, consolidate at the end
DEFAULT_TOOLS = (
    "init",
    "create_namespace",
    "list_namespaces",
    "remember",
    "forget",
    "recall",
    "set_context",
    "get_context",
    "query_facts",
    "list_goals",
    "create_goal",
    "update_goal",
    "complete_goal",
    "consolidate",
)


def subject_name(subject: object) -> str:
    """``stash_pipeline.operations.goals`` → ``goals``."""
    return str(getattr(subject, "__name__", "")).rsplit(".", 1)[-1]


def every_operation() -> tuple[Operation, ...]:
    """Every operation, in the order clients list their tools."""
    return tuple(op for subject in SUBJECTS for op in subject.OPERATIONS)


def toolsets() -> dict[str, tuple[Operation, ...]]:
    """Each toolset's operations: ``default`` first, then one per subject."""
    everything = every_operation()
    found = {DEFAULT: tuple(op for op in everything if op.name in DEFAULT_TOOLS)}
    for subject in SUBJECTS:
        found[subject_name(subject)] = tuple(subject.OPERATIONS)
    return found


def names() -> list[str]:
    """Every name a spec may hold."""
    return [*toolsets(), ALL]


def select(spec: str) -> tuple[Operation, ...]:
    """The operations ``spec`` turns on, in subject order; ConfigurationError for a bad spec."""
    wanted = [part.strip() for part in str(spec).split(",") if part.strip()]
    if not wanted:
        raise errors.ConfigurationError(f"STASH_TOOLSETS / --toolsets is empty; use one or more of: {', '.join(names())}")
    sets = toolsets()
    unknown = [name for name in wanted if name not in sets and name != ALL]
    if unknown:
        raise errors.ConfigurationError(
            f"unknown toolset(s) {', '.join(repr(name[:40]) for name in unknown)}; "
            f"valid: {', '.join(names())} (comma-separated, e.g. default,graph)"
        )
    if ALL in wanted:
        return every_operation()
    chosen = {op.name for name in wanted for op in sets[name]}
    return tuple(op for op in every_operation() if op.name in chosen)


def unknown_tool_message(name: str, spec: str) -> str:
    """Why a server of ``spec`` does not know the tool ``name``, and what to do.

    A Stash tool of another toolset: which one, and the spec (flag and variable) that adds
    it. Any other name: says no tool has it and suggests the closest names, each with the
    toolset it is in when this server does not offer it.
    """
    shown = repr(name[:100])
    in_use = ",".join(part.strip() for part in str(spec).split(",") if part.strip())
    offered = {op.name for op in select(spec)}
    homes = {op.name: set_name for set_name, ops in toolsets().items() if set_name != DEFAULT for op in ops}
    if name in homes:
        wider = f"{in_use},{homes[name]}"
        return (
            f"{name} is not offered by this server (toolsets: {in_use}); it is in the {homes[name]!r} toolset: "
            f"start the server with --toolsets {wider} (or STASH_TOOLSETS={wider})"
        )
    close = difflib.get_close_matches(name[:100], list(homes), n=3, cutoff=0.6)
    hints = [c if c in offered else f"{c} (in the {homes[c]!r} toolset)" for c in close]
    guess = f"; did you mean {' or '.join(hints)}?" if hints else "."
    return f"unknown tool {shown}: no Stash tool has this name{guess} This server's toolsets: {in_use} (tools/list shows its tools)."


__all__ = [
    "ALL",
    "DEFAULT",
    "DEFAULT_TOOLS",
    "every_operation",
    "names",
    "select",
    "subject_name",
    "toolsets",
    "unknown_tool_message",
]
