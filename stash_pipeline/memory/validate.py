"""Input checks shared by every memory operation. They raise before anything is written.

Which layer checks what — each rule once, where it belongs:

* **An operation's arguments model** (``stash_pipeline.operations``, built from the field
  types of ``operations/fields.py``) parses what a surface receives: types, ids (>= 1),
  bounds and closed sets (statuses, priorities, actions), namespace paths, times (a UTC
  datetime within [MIN_TIMESTAMP, MAX_TIMESTAMP)), pages and list caps, with the parsers,
  bounds and sets declared here. The operation passes the parsed values on and publishes
  what the library returns as it is.
* **The library** (``stash_pipeline.memory``) takes parsed values, typed as such (``int``
  ids, ``datetime`` times, checked paths as ``str`` or a sequence of them), and returns the
  models the operations publish (``stash_pipeline.models``). It checks only what needs the
  store: text and metadata against the store's limits (``content``, ``optional_text``,
  ``metadata``), existence and scope, transitions, and rules between records (a sub-goal's
  namespace line, ``parent_id`` with ``top_level_only``). The namespace lookups
  (``namespaces.get``, ``namespaces.resolve_trees``, ``scope.scope_ids``) normalise the
  path they resolve, so a path means one row whoever passes it. The schema's CHECK
  constraints hold the stored ranges (confidences in [0, 1], times in the supported range)
  for every caller, so the library does not repeat them.
* **A caller that is not an operation** (an importer, a stage, bench) parses its raw input
  at its own entry with the same functions (``slug``, ``timestamp``, ``record_id``,
  ``record_ids``), as the episode-file importer does for each line, before it calls the
  library; a stage passes values it read from the store.

``tests/unit/test_library_boundary.py`` keeps the typed subjects typed: no ``Any`` in the
signature of a public library function that takes the store, each answering a model, and
no operation that re-validates a library answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from stash_pipeline import errors
from stash_pipeline.config import Settings

SEGMENT = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
KIND = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
MAX_SLUG_LENGTH = 512
#: the supported range of every stored time, in UTC (the 0006 migration's CHECK constraints
#: hold the same bounds): far inside what PostgreSQL and Python can both represent, so
#: time arithmetic near a bound cannot overflow either
MIN_TIMESTAMP = datetime(1000, 1, 1, tzinfo=UTC)
MAX_TIMESTAMP = datetime(9000, 1, 1, tzinfo=UTC)

# --- the calls' bounds and closed sets, declared once: the operations' arguments models
# (``stash_pipeline.operations``) declare their fields with them, the library uses them too

#: a list's page: rows by default, and at most
LIST_LIMIT_DEFAULT = 100
LIST_LIMIT_MAX = 1000
#: recall: results by default and at most; turns of the same session around an episode hit
RECALL_LIMIT_DEFAULT = 10
RECALL_LIMIT_MAX = 100
RECALL_CONTEXT_DEFAULT = 1
RECALL_CONTEXT_MAX = 5
#: get_entity: rows per section of a page by default, and at most
ENTITY_PAGE_DEFAULT = 100
ENTITY_PAGE_MAX = 500
#: trace_causal_chain: chain length by default, and at most
TRACE_DEPTH_DEFAULT = 10
TRACE_DEPTH_MAX = 25
#: remember_batch: episodes in one call, at most
BATCH_MAX = 1000
#: list arguments, at most: namespace paths of a read, ids (``source_episode_ids``,
#: ``source_fact_ids``), and any other list a call takes (remember_batch's items — a batch —,
#: split_entity's aliases). Far above what a call needs (each path costs a lookup); a longer
#: list is refused whole, before any entry is looked at (the arguments models' ``ListCap``).
NAMESPACES_MAX = 1000
IDS_MAX = 1000
#: the largest id a record can have (PostgreSQL bigint)
MAX_RECORD_ID = 2**63 - 1
LIST_ITEMS_MAX = BATCH_MAX
#: the deepest nesting of objects and arrays in one JSON document: what the MCP transports'
#: parser (pydantic-core) takes in a request body, and so what ``stash import`` takes in a
#: line and ``metadata`` in any call (tests/reliability/test_json_depth.py pins the
#: parser's limit to this)
MAX_JSON_DEPTH = 200

FactOrigin = Literal["synthesis", "hypothesis", "failure_pattern", "asserted", "profile"]
GoalStatus = Literal["active", "completed", "abandoned"]
HypothesisStatus = Literal["proposed", "testing", "confirmed", "rejected"]
#: resolve_contradiction: what happens to the two facts
ContradictionAction = Literal["keep_new", "keep_old", "keep_both", "neither"]
#: trace_causal_chain: effects of the fact, or its causes
TraceDirection = Literal["forward", "backward"]
FACT_ORIGINS: tuple[str, ...] = get_args(FactOrigin)
GOAL_STATUSES: tuple[str, ...] = get_args(GoalStatus)
HYPOTHESIS_STATUSES: tuple[str, ...] = get_args(HypothesisStatus)
CONTRADICTION_ACTIONS: tuple[str, ...] = get_args(ContradictionAction)


def slug(value: object) -> str:
    """Normalise and validate a namespace path ('/a/b'; a trailing '/' is tolerated)."""
    if not isinstance(value, str):
        raise errors.InvalidNamespace(f"namespace must be a string, got {type(value).__name__}")
    text = value.strip()
    if text == "/":
        return "/"
    if len(text) > MAX_SLUG_LENGTH:
        raise errors.InvalidNamespace(f"namespace path is longer than {MAX_SLUG_LENGTH} characters")
    if text.endswith("/"):
        text = text[:-1]
    if not text.startswith("/"):
        raise errors.InvalidNamespace(f"namespace {value!r} must start with '/', e.g. /projects/x")
    for part in text[1:].split("/"):
        if not SEGMENT.match(part):
            raise errors.InvalidNamespace(
                f"namespace segment {part!r} in {value!r} is invalid: use lowercase letters, digits, "
                "'-' and '_', 1-64 characters, starting with a letter or digit"
            )
    return text


def too_many(value: object, maximum: int) -> int | None:
    """How many entries ``value`` (a list, or a comma-separated string) holds when that is
    more than ``maximum``, else None; counted without looking at any entry."""
    if isinstance(value, list | tuple | set | frozenset):
        count = len(value)
    elif isinstance(value, str):
        count = value.count(",") + 1
    else:
        return None
    return count if count > maximum else None


def slugs(value: object, *, default: str = "/") -> list[str]:
    """A list, or a comma-separated string, of at most NAMESPACES_MAX namespace paths;
    de-duplicated (in linear time), order kept."""
    if value is None or value == "" or value == []:
        return [default]
    count = too_many(value, NAMESPACES_MAX)
    if count is not None:
        raise errors.InvalidInput(f"namespaces: at most {NAMESPACES_MAX} paths (got {count})")
    if isinstance(value, str):
        items = [p.strip() for p in value.split(",")]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise errors.InvalidNamespace("namespaces must be a list or a comma-separated string")
    # dict.fromkeys keeps the first of each, in order: a list's `not in` made this quadratic
    out = list(dict.fromkeys(slug(item) for item in items if item != ""))
    if not out:
        raise errors.InvalidNamespace("at least one namespace is required")
    return out


def content(settings: Settings, value: object, field: str = "content") -> str:
    """Non-empty text within the size limit, without NUL bytes."""
    if not isinstance(value, str):
        raise errors.InvalidInput(f"{field} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise errors.EmptyContent(f"{field} must not be empty")
    if "\x00" in value:
        raise errors.InvalidInput(f"{field} must not contain NUL bytes")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise errors.InvalidInput(f"{field} is not valid Unicode (lone surrogate)") from None
    if size > settings.max_content_bytes:
        raise errors.ContentTooLarge(
            f"{field} is {size} bytes; the limit is {settings.max_content_bytes} (STASH_MAX_CONTENT_BYTES)"
        )
    return value


def optional_text(settings: Settings, value: object, field: str) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return content(settings, value, field)


def kind(value: object) -> str:
    if not isinstance(value, str) or not KIND.match(value):
        raise errors.InvalidInput("kind must be lowercase letters, digits and '_', starting with a letter")
    return value


def one_of(value: object, allowed: Sequence[str], field: str) -> str:
    """One of a fixed set of names; the error lists them all."""
    if value not in allowed:
        raise errors.InvalidInput(f"{field} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def parse_time(text: str) -> datetime | None:
    """ISO 8601 text (``Z`` for UTC) as a datetime, None when it is not one: the one parser
    of times, for ``timestamp`` and the operations' time arguments alike."""
    try:
        return datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None


def timestamp(value: object, field: str) -> datetime | None:
    """An ISO-8601 time with a time zone (a datetime or a string), in UTC; None or '' is None.

    The instant must lie in [MIN_TIMESTAMP, MAX_TIMESTAMP) once converted to UTC:
    ``9999-12-31T23:59:59-14:00`` is year 10000 in UTC, which PostgreSQL stores but no
    reader (Python's datetime) can load again, so one such row would break every read of
    its namespace. The database enforces the same range (CHECK constraints).
    """
    if value is None or value == "":
        return None
    if isinstance(value, str):
        parsed = parse_time(value)
        if parsed is None:
            # the value itself is not repeated: it may come from an imported file
            raise errors.InvalidInput(f"{field} is not an ISO-8601 timestamp (e.g. 2026-01-31T09:00:00Z)")
        value = parsed
    if not isinstance(value, datetime):
        raise errors.InvalidInput(f"{field} must be an ISO-8601 timestamp")
    if value.tzinfo is None or value.utcoffset() is None:
        raise errors.InvalidInput(f"{field} must carry a time zone (e.g. 2026-01-31T09:00:00Z)")
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not MIN_TIMESTAMP <= utc < MAX_TIMESTAMP:
        raise errors.InvalidInput(
            f"{field} must lie between {MIN_TIMESTAMP:%Y-%m-%d} and {MAX_TIMESTAMP:%Y-%m-%d} (UTC)"
        )
    return utc


def page(limit: object, offset: object, *, default: int = LIST_LIMIT_DEFAULT, maximum: int = LIST_LIMIT_MAX) -> tuple[int, int]:
    """Validate pagination. Negative or non-integer values are errors, not silently clamped."""
    limit = default if limit is None else limit
    offset = 0 if offset is None else offset
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise errors.InvalidInput("limit must be an integer")
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise errors.InvalidInput("offset must be an integer")
    if limit < 1 or limit > maximum:
        raise errors.InvalidInput(f"limit must be between 1 and {maximum}")
    if offset < 0:
        raise errors.InvalidInput("offset must not be negative")
    return limit, offset


def record_id(value: object, field: str = "id") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        else:
            raise errors.InvalidInput(f"{field} must be a positive integer")
    if value < 1 or value > MAX_RECORD_ID:
        raise errors.InvalidInput(f"{field} must be a positive integer")
    return value


def probability(value: object, field: str = "confidence") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise errors.InvalidInput(f"{field} must be a number between 0 and 1")
    if not 0.0 <= float(value) <= 1.0:
        raise errors.InvalidInput(f"{field} must be between 0 and 1")
    return float(value)


def deeper_than(value: object, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``value`` nests objects and arrays (dicts, lists, tuples) more than ``limit``
    deep, as a JSON parser counts them (``{}`` is 1, ``{"a": []}`` 2); walked without
    recursion, so any depth is measured without a RecursionError."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list | tuple) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list | tuple))
    return False


def metadata(value: object, settings: Settings | None = None) -> dict[str, object]:
    """A JSON object without NUL characters, nested at most MAX_JSON_DEPTH deep, at most
    ``settings.max_metadata_bytes`` as JSON."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise errors.InvalidInput("metadata must be a JSON object")
    if deeper_than(value):  # before anything below walks it recursively
        raise errors.InvalidInput(f"metadata is nested deeper than {MAX_JSON_DEPTH} levels")
    import json

    try:
        encoded = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise errors.InvalidInput(f"metadata is not JSON-serialisable: {type(exc).__name__}") from None
    if _has_nul(value):  # the JSON text cannot tell: it escapes a NUL as the text \u0000
        raise errors.InvalidInput("metadata must not contain NUL characters")
    if settings is not None:
        try:
            size = len(encoded.encode("utf-8"))
        except UnicodeEncodeError:
            raise errors.InvalidInput("metadata is not valid Unicode (lone surrogate)") from None
        if size > settings.max_metadata_bytes:
            raise errors.ContentTooLarge(
                f"metadata is {size} bytes as JSON; the limit is {settings.max_metadata_bytes} "
                "(STASH_MAX_METADATA_BYTES)"
            )
    return value


def _has_nul(value: object) -> bool:
    """Whether a NUL character is in any key or string of a JSON value (walked without recursion)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def record_ids(value: object, field: str) -> list[int]:
    """A list (or comma-separated string) of at most IDS_MAX positive ids; de-duplicated
    (in linear time), order kept.

    An entry that is not an id is an error, never dropped.
    """
    if value is None or value == "" or value == []:
        return []
    count = too_many(value, IDS_MAX)
    if count is not None:
        raise errors.InvalidInput(f"{field}: at most {IDS_MAX} ids (got {count})")
    if isinstance(value, str):
        items: list[Any] = [p.strip() for p in value.split(",") if p.strip()]
    elif isinstance(value, list | tuple | set | frozenset):
        items = list(value)
    else:
        raise errors.InvalidInput(f"{field} must be a list of ids or a comma-separated string")
    return list(dict.fromkeys(record_id(item, field) for item in items))
