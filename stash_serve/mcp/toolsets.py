"""Which tools a server offers: the ``default`` set, one toolset per subject, or all.

Every tool is in the toolset of its subject (``stash_pipeline.operations.SUBJECTS``:
``namespaces``, ``episodes`` … ``admin``); ``default`` holds the tools of an agent's
everyday loop, across subjects. A spec is ``default``, ``all`` or a comma-separated list
of toolset names (``default,graph``); the server offers their union, in subject order.
An unknown name is a start-up error listing the valid ones. The spec comes from
``STASH_TOOLSETS`` or ``stash serve mcp --toolsets``; ``stash tools`` lists the sets.
"""

from __future__ import annotations

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


__all__ = ["ALL", "DEFAULT", "DEFAULT_TOOLS", "every_operation", "names", "select", "subject_name", "toolsets"]
