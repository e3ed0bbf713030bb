"""Argument types, result models and annotations that several tools share.

The MCP SDK builds each tool's input schema from its signature and resolves the
annotations from the globals of the module that defines the tool, so every tools module
imports the names it uses from here at module level.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

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
#
# One name for one concept, in every tool (tests/mcp/test_tool_surface.py enforces it):
#   namespace         one exact namespace path: where a write goes, what a context tool acts on
#   namespaces        namespace trees a read covers (list or comma string; default: all readable)
#   id                the record the tool acts on; <role>_id another record it refers to
#                     (fact_id, goal_id, parent_id, cause_id…); <kind>_ids a list of them
#   limit, offset     paging of list tools (answer: items, next_offset)
#   since, until, as_of, <event>_at, valid_from, valid_until
#                     times, ISO 8601 text (as_of: event time, known_at: system time)
#   include_<what>    a switch that adds records or fields to a read
#   note              free text appended to a record's history
# Shared conventions are explained once, in the server instructions, so the descriptions
# below stay short: every character here is sent to every agent with the tool list.

Namespaces = Annotated[
    list[str] | str | None,
    Field(description="Trees to read."),
]
Namespace = Annotated[str, Field(description="Exact namespace path.")]
#: a write's namespace where the tool defaults to the root, "/"
RootNamespace = Annotated[str, Field(description="Exact namespace path.")]
Limit = Annotated[int, Field(description="Page size.", ge=1, le=1000)]
Offset = Annotated[int, Field(description="Items to skip.", ge=0)]
RecordId = Annotated[int, Field(description="Record id.", ge=1)]
Confidence = Annotated[float, Field(description="0 to 1.", ge=0, le=1)]
Timestamp = Annotated[str | None, Field(description="ISO 8601 time (UTC if no offset).")]
#: the two read times of facts (see stash_pipeline.memory.facts): event and system time
AsOf = Annotated[str | None, Field(description="ISO 8601 event time.")]
KnownAt = Annotated[str | None, Field(description="ISO 8601 system time.")]
Metadata = Annotated[dict[str, Any] | None, Field(description="JSON object stored with it.")]
IdList = Annotated[list[int] | str | None, Field(description="Ids (list or comma string).")]

# --- paged lists -------------------------------------------------------------------------


def _without_description(schema: dict[str, Any]) -> None:
    schema.pop("description", None)


class Page(BaseModel):
    """A page of a list: pass ``next_offset`` as ``offset`` for the next one (null = last page)."""

    # the server instructions explain paging once; not again in the schema of every list tool
    model_config = ConfigDict(json_schema_extra=_without_description)

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
    "AsOf",
    "Confidence",
    "IdList",
    "KnownAt",
    "Limit",
    "Metadata",
    "Namespace",
    "Namespaces",
    "Offset",
    "Page",
    "RecordId",
    "RootNamespace",
    "Timestamp",
    "page",
]
