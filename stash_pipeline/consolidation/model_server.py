"""What the reasoner needs to live with real model servers.

* **Format refusals.** Servers refuse a ``response_format`` they do not support with
  different statuses: 400 (OpenAI, LM Studio), 422 (FastAPI-based servers), even 500
  (older llama.cpp ``llama-server``: ``"response_format" must be one of "text" or
  "json_object"``). ``is_format_refusal`` recognises the refusal from the error *body*,
  so a 500 that names the format steps the mode down while a bare 500/502/503 stays an
  outage.
* **Mode memory.** The mode that works is kept per endpoint + model in the database table
  ``reasoner_modes`` (and cached in the process), so each run and each process starts
  from the mode that worked instead of being refused again.
* **Output budget.** ``output_budget`` sizes ``max_tokens`` from the answer schema and the
  number of items the prompt lists, capped by ``STASH_REASONER_MAX_OUTPUT_TOKENS``: a
  model that never stops costs a bounded number of tokens and seconds.
* **Endpoint slots.** ``endpoint_slot`` lets at most ``STASH_REASONER_CONCURRENCY``
  requests (default 1) be in flight per endpoint in this process: local servers often
  have one generation slot, and a second request only queues behind the first and
  times out.
"""

from __future__ import annotations

import contextlib
import re
import threading
import types
import typing
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

if TYPE_CHECKING:
    from stash_pipeline.db import Database

MODES = ("json_schema", "json_object", "none")
#: the next mode to try when a server refuses the current one
FALLBACK = {"json_schema": "json_object", "json_object": "none"}

# -- format refusals ---------------------------------------------------------------------------
#: phrases of servers refusing a response_format (matched case-insensitively in the error body)
_REFUSAL = re.compile(
    r"response[_ ]format|json[_ ]schema|json[_ ]object|guided[_ ](json|decoding)|structured[_ ]output"
    r"|grammar|must be (one of )?.{0,4}text|type must be",
    re.IGNORECASE,
)
#: statuses a refusal comes with (never 401/403/404/429: those mean something else)
_REFUSAL_STATUSES = frozenset({400, 422, 500, 501})


def is_format_refusal(status: int | None, body: str) -> bool:
    """Whether an error response refuses the request's ``response_format`` (judged by its body)."""
    return status in _REFUSAL_STATUSES and bool(_REFUSAL.search(body or ""))


def error_body(exc: Exception) -> str:
    """The text of an ``openai.APIStatusError``: its message plus the raw body, if any."""
    parts = [str(getattr(exc, "message", "") or exc)]
    body = getattr(exc, "body", None)
    if body is not None:
        parts.append(str(body))
    response = getattr(exc, "response", None)
    if response is not None:
        with contextlib.suppress(Exception):
            parts.append(response.text)
    return " ".join(parts)


# -- mode memory -------------------------------------------------------------------------------
_CACHE: dict[tuple[str, str], str] = {}
#: (endpoint, model, mode) whose success is already written, so answers do not write each time
_VERIFIED: set[tuple[str, str, str]] = set()
_LOCK = threading.Lock()


def remembered_mode(db: Database | None, endpoint: str, model: str) -> str:
    """The mode to start with: the process cache, then the database, else ``json_schema``."""
    key = (endpoint, model)
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
    mode = "json_schema"
    if db is not None:
        row = db.one("reasoner_mode_get", endpoint=endpoint, model=model)
        if row and row["mode"] in MODES:
            mode = str(row["mode"])
    with _LOCK:
        _CACHE.setdefault(key, mode)
        return _CACHE[key]


def step_down(db: Database | None, endpoint: str, model: str, refused: str, reason: str) -> str | None:
    """Record that ``refused`` was refused; return the next mode (None when there is none)."""
    following = FALLBACK.get(refused)
    if following is None:
        return None
    with _LOCK:
        _CACHE[(endpoint, model)] = following
    if db is not None:
        db.execute("reasoner_mode_set", endpoint=endpoint, model=model, mode=following, reason=reason[:500])
    return following


def mark_verified(db: Database | None, endpoint: str, model: str, mode: str) -> None:
    """Record (once per process) that ``mode`` answered on this endpoint + model."""
    key = (endpoint, model, mode)
    with _LOCK:
        if key in _VERIFIED:
            return
        _VERIFIED.add(key)
        _CACHE[(endpoint, model)] = mode
    if db is not None:
        db.execute("reasoner_mode_verified", endpoint=endpoint, model=model, mode=mode)


def forget(endpoint: str | None = None, model: str | None = None) -> None:
    """Drop the process cache (all of it, or one endpoint + model) so the database is read again."""
    with _LOCK:
        if endpoint is None:
            _CACHE.clear()
            _VERIFIED.clear()
            return
        _CACHE.pop((endpoint, model or ""), None)
        for key in [k for k in _VERIFIED if k[:2] == (endpoint, model)]:
            _VERIFIED.discard(key)


def renegotiate(endpoint: str, model: str) -> None:
    """Start this process from ``json_schema`` again (``stash doctor``: has the server changed?)."""
    with _LOCK:
        _CACHE[(endpoint, model)] = "json_schema"
        for key in [k for k in _VERIFIED if k[:2] == (endpoint, model)]:
            _VERIFIED.discard(key)


def known_modes(db: Database) -> list[dict[str, Any]]:
    """Every remembered endpoint + model mode (for doctor and status)."""
    return db.all("reasoner_modes_all")


# -- output budget -----------------------------------------------------------------------------
#: rough token counts of one JSON value of each kind, key and punctuation included; generous
#: (about twice what a terse answer uses) so honest answers are never cut off
_TOKENS_NUMBER = 8
_TOKENS_TEXT = 28
_TOKENS_LIST = 20
_TOKENS_PER_ITEM = 8
_TOKENS_BASE = 48
_MIN_BUDGET = 128
_CLUSTER = re.compile(r"^Cluster \d+:\s*$", re.MULTILINE)
_LISTED = re.compile(r"^\[\d+\]", re.MULTILINE)


def _field_tokens(annotation: Any) -> int:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return max(_field_tokens(a) for a in typing.get_args(annotation) if a is not type(None))
    if origin is list:
        return _TOKENS_LIST
    if origin is typing.Literal:
        return _TOKENS_NUMBER
    if annotation in (int, float, bool):
        return _TOKENS_NUMBER
    return _TOKENS_TEXT


def _item_schema(schema: type[BaseModel]) -> type[BaseModel]:
    """The model of the answer's list items (the one-list answers of the stages), else the schema."""
    for field in schema.model_fields.values():
        if typing.get_origin(field.annotation) is list:
            (item,) = typing.get_args(field.annotation) or (None,)
            if isinstance(item, type) and issubclass(item, BaseModel):
                return item
    return schema


def tokens_per_item(schema: type[BaseModel]) -> int:
    item = _item_schema(schema)
    return _TOKENS_PER_ITEM + sum(_field_tokens(f.annotation) for f in item.model_fields.values())


def listed_items(user: str) -> int:
    """How many answers a prompt asks for: its clusters, else its ``[id]`` lines (at least 1)."""
    clusters = len(_CLUSTER.findall(user))
    return max(1, clusters or len(_LISTED.findall(user)))


def output_budget(schema: type[BaseModel], user: str, cap: int) -> int:
    """``max_tokens`` for one call: base + items × tokens per item, within [128, cap]."""
    wanted = _TOKENS_BASE + listed_items(user) * tokens_per_item(schema)
    return max(min(wanted, cap), min(_MIN_BUDGET, cap))


# -- endpoint slots ----------------------------------------------------------------------------
_SLOTS: dict[str, threading.BoundedSemaphore] = {}
_SLOTS_LOCK = threading.Lock()


@contextlib.contextmanager
def endpoint_slot(endpoint: str, concurrency: int) -> Iterator[None]:
    """Hold one of the ``concurrency`` request slots of ``endpoint`` (process-wide)."""
    key = f"{endpoint}#{concurrency}"
    with _SLOTS_LOCK:
        slot = _SLOTS.get(key)
        if slot is None:
            slot = _SLOTS[key] = threading.BoundedSemaphore(concurrency)
    with slot:
        yield
