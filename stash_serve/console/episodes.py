"""The episode timeline (search, filters) and an episode with what was derived from it.

``/episodes``: the live episodes of the viewer's trees (or of ``ns``, checked against the
token), newest first, 50 a page, paged by id (``before``: the last id of the page before).
Filters: ``q`` (words, as recall reads them), ``kind``, ``since``/``until`` (when it
happened, UTC) and ``meta`` (``key=value``: the metadata holds that value).

``/episodes/<id>``: the episode through ``get_episode`` (another tree's id is not found,
as over MCP) and the rows derived from it inside the viewer's trees.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from stash_pipeline import errors
from stash_pipeline.memory import browse, validate
from stash_serve.console.app import Viewer, page, render

#: episodes a page of the timeline shows
PAGE_SIZE = 50
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_LOCAL = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$")


def moment(value: str | None, field: str) -> datetime | None:
    """A time from a filter field: a date (midnight UTC), a date and time without a zone
    (UTC, as a browser's datetime field sends it) or ISO 8601 with a zone."""
    value = (value or "").strip()
    if not value:
        return None
    if _DATE.match(value):
        value += "T00:00:00Z"
    elif _LOCAL.match(value):
        value += "Z"
    return validate.timestamp(value, field)


def metadata_filter(value: str | None) -> list[dict[str, Any]] | None:
    """``key=value`` as the objects an episode's metadata may contain: the value as text,
    and also as JSON when it reads as a number, true, false or null (``n=3`` finds 3 and "3")."""
    value = (value or "").strip()
    if not value:
        return None
    key, sep, raw = value.partition("=")
    key = key.strip()
    if not sep or not key:
        raise errors.InvalidInput("the metadata filter is key=value, e.g. session=s1")
    candidates: list[dict[str, Any]] = [{key: raw.strip()}]
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if isinstance(parsed, int | float | bool) or (parsed is None and raw.strip() == "null"):
        candidates.append({key: parsed})
    return candidates


def record_id(value: str | None, field: str) -> int | None:
    value = (value or "").strip()
    if not value:
        return None
    if not value.isdigit() or len(value) > 18:
        raise errors.InvalidInput(f"{field} must be an episode id")
    return int(value)


def metadata_pairs(metadata: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """Each metadata entry as (key, shown value, whether it can be a ``meta`` filter)."""
    out = []
    for key, value in metadata.items():
        scalar = isinstance(value, str | int | float | bool) or value is None
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        out.append((key, shown, scalar and "=" not in key))
    return out


@page
async def timeline(request: Request, viewer: Viewer) -> Response:
    query = request.query_params
    ns = query.get("ns") or None
    trees = viewer.trees(ns)
    form = {name: query.get(name, "") for name in ("ns", "q", "kind", "since", "until", "meta")}
    error = None
    rows: list[Any] = []
    try:
        rows = await viewer.run(
            browse.episodes, viewer.store, trees,
            before=record_id(query.get("before"), "before"), kind=form["kind"].strip() or None,
            since=moment(form["since"], "since"), until=moment(form["until"], "until"),
            metadata=metadata_filter(form["meta"]), words=form["q"], limit=PAGE_SIZE + 1,
        )
    except errors.InvalidInput as exc:
        error = exc.message
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    filtered = any(form[name] for name in ("q", "kind", "since", "until", "meta"))
    return render(request, "episodes.html", title="Episodes", rows=rows, form=form, trees=trees, error=error,
                  filtered=filtered, paged=bool(query.get("before")), metadata_pairs=metadata_pairs,
                  next_before=rows[-1].id if more and rows else None)


@page
async def episode(request: Request, viewer: Viewer) -> Response:
    ident = int(request.path_params["id"])
    # a forgotten episode is still shown (a fact may cite it), marked as forgotten
    found = await viewer.op("get_episode", id=ident, include_deleted=True)
    derived = await viewer.run(browse.derived, viewer.store, viewer.trees(), "episode", found.id)
    return render(request, "episode.html", title=f"Episode {found.id}", episode=found, derived=derived,
                  metadata_pairs=metadata_pairs)


ROUTES = [
    Route("/episodes", timeline, methods=["GET"]),
    Route("/episodes/{id:int}", episode, methods=["GET"]),
]
