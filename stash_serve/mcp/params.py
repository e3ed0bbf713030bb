"""Argument types, result models and annotations that several tools share.

The MCP SDK builds each tool's input schema from its signature and resolves the
annotations from the globals of the module that defines the tool, so every tools module
imports the names it uses from here at module level.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from stash_serve.mcp.calls import to_json

# --- annotations: what a client may assume about a tool ----------------------------------

READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
WRITE_IDEMPOTENT = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
DESTRUCTIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)
DESTRUCTIVE_IDEMPOTENT = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)

# --- parameter types ---------------------------------------------------------------------

Namespaces = Annotated[
    list[str] | str | None,
    Field(
        description="Namespace paths to read, as a list or a comma-separated string; each covers its "
        "descendants; '/' = everything. Default: everything you may read."
    ),
]
Namespace = Annotated[str, Field(description="One exact, existing namespace path, e.g. /projects/x.")]
RootNamespace = Annotated[
    str, Field(description="One exact, existing namespace path, e.g. /projects/x (default '/', the root).")
]
Limit = Annotated[int, Field(description="Page size (1-1000).", ge=1, le=1000)]
Offset = Annotated[int, Field(description="Items to skip (for the next page use next_offset).", ge=0)]
RecordId = Annotated[int, Field(description="Record id.", ge=1)]
Confidence = Annotated[float, Field(description="Confidence between 0 and 1.", ge=0, le=1)]
OptionalText = Annotated[str | None, Field(description="Optional text.")]
Timestamp = Annotated[
    str | None, Field(description="ISO 8601 timestamp, e.g. 2026-01-31T09:00:00Z (UTC if no offset).")
]
Metadata = Annotated[
    dict[str, Any] | None, Field(description="Optional JSON object stored with the episode.")
]
IdList = Annotated[
    list[int] | str | None, Field(description="Record ids, as a list or comma-separated string.")
]

# --- paged lists -------------------------------------------------------------------------


class Page(BaseModel):
    """A page of a list: pass ``next_offset`` as ``offset`` for the next one (null = last page)."""

    items: list[dict[str, Any]]
    limit: int
    offset: int
    next_offset: int | None


def page(items: list[Any], limit: int, offset: int) -> dict[str, Any]:
    """A paginated list result: {"items", "limit", "offset", "next_offset"}."""
    return {
        "items": to_json(items),
        "limit": limit,
        "offset": offset,
        "next_offset": offset + len(items) if len(items) >= limit else None,
    }


__all__ = [
    "DESTRUCTIVE",
    "DESTRUCTIVE_IDEMPOTENT",
    "READ",
    "WRITE",
    "WRITE_IDEMPOTENT",
    "Confidence",
    "IdList",
    "Limit",
    "Metadata",
    "Namespace",
    "Namespaces",
    "Offset",
    "OptionalText",
    "Page",
    "RecordId",
    "RootNamespace",
    "Timestamp",
    "page",
]
