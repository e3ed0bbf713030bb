"""Facts current and historical, a fact's sources, a property's bi-temporal timeline, contradictions.

``/facts``: ``query_facts`` as the viewer's token runs it (current facts; every state with
``history=1``; with ``as_of`` and/or ``known_at`` the facts true then as Stash knew them
then), filtered by ``ns``, ``entity`` and ``property``, 50 a page by ``offset``.

``/facts/<id>``: the fact through ``get_fact`` with its lineage (another tree's id is not
found, as over MCP): its sources down to the episodes' text, what was derived from it,
supersessions both ways, the contradictions it is part of, and for a fact on an entity's
property that property's timeline (every value, history included) as a picture and a table.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from stash_pipeline import errors
from stash_pipeline.memory import browse
from stash_pipeline.models import Fact
from stash_serve.console import timeline
from stash_serve.console.app import Viewer, page, render
from stash_serve.console.episodes import moment

#: facts a page lists
PAGE_SIZE = 50
#: the most values one property's timeline draws
TIMELINE_MAX = 200


def offset_of(value: str | None) -> int:
    value = (value or "").strip()
    if not value:
        return 0
    if not value.isdigit() or len(value) > 9:
        raise errors.InvalidInput("offset must be a whole number of rows")
    return int(value)


@page
async def facts(request: Request, viewer: Viewer) -> Response:
    query = request.query_params
    ns = query.get("ns") or None
    trees = viewer.trees(ns)
    form = {name: query.get(name, "").strip() for name in ("ns", "entity", "property", "as_of", "known_at")}
    history = query.get("history") in ("1", "on", "true")
    error = None
    rows: list[Fact] = []
    offset = 0
    try:
        offset = offset_of(query.get("offset"))
        as_of, known_at = (moment(form[name], label) for name, label in (("as_of", "true at"), ("known_at", "known at")))
        rows = await viewer.op("query_facts", namespaces=trees, entity=form["entity"] or None,
                               property=form["property"] or None, include_history=history,
                               as_of=as_of.isoformat() if as_of else None,
                               known_at=known_at.isoformat() if known_at else None,
                               limit=PAGE_SIZE + 1, offset=offset)
    except errors.InvalidInput as exc:
        error = exc.message
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    return render(request, "facts.html", title="Facts", rows=rows, form=form, history=history, trees=trees,
                  error=error, offset=offset, page_size=PAGE_SIZE, more=more, state=timeline.state,
                  filtered=any(form[name] for name in ("entity", "property", "as_of", "known_at")),
                  bitemporal=bool(form["as_of"] or form["known_at"]))


@page
async def fact(request: Request, viewer: Viewer) -> Response:
    ident = int(request.path_params["id"])
    found = await viewer.op("get_fact", id=ident, include_lineage=True)
    the = found.fact
    trees = viewer.trees()
    sources = await viewer.run(browse.records, viewer.store, trees, [(p.kind, p.id) for p in found.parents])
    derived = await viewer.run(browse.records, viewer.store, trees, [(c.kind, c.id) for c in found.children])
    contradictions = await viewer.run(browse.fact_contradictions, viewer.store, trees, the.id)
    history: list[Fact] = []
    picture: Any = ""
    if the.entity and the.property:
        values = await viewer.op("query_facts", namespaces=[the.namespace], entity=the.entity,
                                 property=the.property, include_history=True, limit=TIMELINE_MAX)
        history = timeline.ordered([f for f in values if f.namespace == the.namespace])
        picture = timeline.draw(history, highlight=the.id)
    superseded = [f for f in history if f.superseded_by == the.id]
    return render(request, "fact.html", title=f"Fact {the.id}", fact=the, sources=sources, derived=derived,
                  contradictions=contradictions, history=history, picture=picture, superseded=superseded,
                  state=timeline.state, known_since=timeline.known_since, retired=timeline.retired,
                  timeline_max=TIMELINE_MAX)


ROUTES = [
    Route("/facts", facts, methods=["GET"]),
    Route("/facts/{id:int}", fact, methods=["GET"]),
]
