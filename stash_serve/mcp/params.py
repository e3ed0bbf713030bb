"""What every derived tool shares: annotations, the argument types' wire form, paging.

``stash_serve.mcp.derive`` builds each tool's signature with ``without_validators`` and
answers paged lists as ``Page``.
"""

from __future__ import annotations

from typing import Annotated, Any, get_args

from mcp_types import ToolAnnotations
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, PlainValidator, WrapValidator

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
# The argument types are declared once, in stash_pipeline.operations.fields and the
# operations' arguments models. A tool's signature takes them without their validators:
# there the SDK would run them, and their errors would not be tool errors.

_VALIDATORS = (AfterValidator, BeforeValidator, PlainValidator, WrapValidator)


def without_validators(annotated: Any) -> Any:
    """``Annotated[T, *metadata]`` with the pydantic validators left out of the metadata."""
    kind, *metadata = get_args(annotated)
    kept = [item for item in metadata if not isinstance(item, _VALIDATORS)]
    return Annotated[(kind, *kept)] if kept else kind


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
    "Page",
    "page",
    "without_validators",
]
