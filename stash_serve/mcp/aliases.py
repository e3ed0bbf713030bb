"""Deprecated argument names, still accepted for one release.

Every tool names one concept one way (the rule is in ``stash_serve.mcp.params``). A few
tools used to take other names for the same thing; a call that still uses one is
rewritten to the current name before the arguments are checked, and the server logs a
deprecation warning once per tool and name. The old names are not in the tool schemas, so
agents only ever see the current ones. Remove this table in the release after next.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("stash.mcp")

#: tool → {deprecated argument: current argument}
DEPRECATED_ARGUMENTS: dict[str, dict[str, str]] = {
    "create_namespace": {"slug": "namespace"},
    "delete_namespace": {"slug": "namespace"},
    "get_fact": {"lineage": "include_lineage"},
    "complete_goal": {"notes": "note"},
    "abandon_goal": {"notes": "note"},
}

_warned: set[tuple[str, str]] = set()


def current_names(tool: str, arguments: Any) -> tuple[Any, str | None]:
    """``arguments`` with deprecated names replaced by current ones, and a problem message
    (or None) when a call gives both the old and the new name of one argument."""
    renames = DEPRECATED_ARGUMENTS.get(tool)
    if not renames or not isinstance(arguments, dict) or not any(old in arguments for old in renames):
        return arguments, None
    renamed = dict(arguments)
    for old, new in renames.items():
        if old not in renamed:
            continue
        if new in renamed:
            return arguments, f"{tool}: give {new} only ({old} is its deprecated name)"
        renamed[new] = renamed.pop(old)
        if (tool, old) not in _warned:
            _warned.add((tool, old))
            log.warning("%s: argument %r is deprecated; use %r", tool, old, new)
    return renamed, None


__all__ = ["DEPRECATED_ARGUMENTS", "current_names"]
