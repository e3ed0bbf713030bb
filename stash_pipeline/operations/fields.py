"""Argument types every operation shares: one name, one type, one description per concept.

One name for one concept, in every operation (tests/mcp/test_tool_surface.py enforces it):
  namespace         one exact namespace path: where a write goes, what a context call acts on
  namespaces        namespace trees a read covers (list or comma string; default: all readable)
  id                the record the call acts on; <role>_id another record it refers to
                    (fact_id, goal_id, parent_id, cause_id…); <kind>_ids a list of them
  limit, offset     paging of lists (answer: items, next_offset)
  since, until, as_of, <event>_at, valid_from, valid_until
                    times, ISO 8601 text (as_of: event time, known_at: system time)
  include_<what>    a switch that adds records or fields to a read
  note              free text appended to a record's history

The descriptions are what an agent reads with every tool list, so they stay short;
shared conventions are explained once, in the MCP server's instructions. Validators ride
in the ``Annotated`` metadata: they run when an arguments model is built.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field

from stash_pipeline.memory import validate
from stash_pipeline.operations.base import ListCap, iso_time, namespaces_or_none


def _ids(value: Any) -> list[int]:
    # the field name in errors stays "id", as clients have always seen it
    return validate.record_ids(value, "id")


#: a list argument is refused whole past its cap (``ListCap``, checked before any entry)
Namespaces = Annotated[
    list[str] | str | None,
    Field(description="Trees to read."),
    ListCap(validate.NAMESPACES_MAX, "paths", commas=True),
    AfterValidator(namespaces_or_none),
]
Namespace = Annotated[str, Field(description="Exact namespace path."), AfterValidator(validate.slug)]
Limit = Annotated[int, Field(description="Page size.", ge=1, le=validate.LIST_LIMIT_MAX)]
Offset = Annotated[int, Field(description="Items to skip.", ge=0)]
RecordId = Annotated[int, Field(description="Record id.", ge=1, le=validate.MAX_RECORD_ID)]
Confidence = Annotated[float, Field(description="0 to 1.", ge=0, le=1)]
Timestamp = Annotated[str | None, Field(description="ISO 8601 time (UTC if no offset)."), AfterValidator(iso_time)]
#: the two read times of facts (see stash_pipeline.memory.facts): event and system time
AsOf = Annotated[str | None, Field(description="ISO 8601 event time."), AfterValidator(iso_time)]
KnownAt = Annotated[str | None, Field(description="ISO 8601 system time."), AfterValidator(iso_time)]
Metadata = Annotated[dict[str, Any] | None, Field(description="JSON object stored with it.")]
IdList = Annotated[
    list[int] | str | None,
    Field(description="Ids (list or comma string)."),
    ListCap(validate.IDS_MAX, "ids", commas=True),
    AfterValidator(_ids),
]

__all__ = [
    "AsOf",
    "Confidence",
    "IdList",
    "KnownAt",
    "Limit",
    "Metadata",
    "Namespace",
    "Namespaces",
    "Offset",
    "RecordId",
    "Timestamp",
]
