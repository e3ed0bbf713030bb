"""Entities: an entity's facts, profiles and relationships, the graph around it, merge and split.

* ``/entities?ns=&q=&offset=``: the live entities (not merged away) of the viewer's trees
  by name, with their kind, current facts and first aliases; ``q`` finds an alias
  containing it.
* ``/entities/<id>``: ``get_entity`` as the token would call it (another tree's entity is
  404, as over MCP): aliases, current facts with the profiles apart, relationships, the
  merges and splits it took part in, and the graph around it (``graph.draw``).
* ``/entities/<id>/merge`` and ``/entities/<id>/split``: GET previews what the correction
  would move (``neighbourhood.merge_preview`` / ``split_preview``, reads that check what
  the operation checks), POST makes it (``merge_entities`` / ``split_entity``). Both need
  the write right: the forms are hidden without it and a POST is refused (403).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from stash_pipeline import errors
from stash_pipeline.memory import neighbourhood
from stash_serve.console import graph
from stash_serve.console.app import Viewer, page, render, url

PAGE = neighbourhood.PAGE_MAX
#: rows of each of an entity's lists per page (get_entity's limit)
ENTITY_PAGE = 50


def can_write(viewer: Viewer) -> bool:
    return viewer.token is None or viewer.token.has("write")


def _int(value: str | None, default: int = 0) -> int:
    """A count or id from a form: digits, at most a bigint; anything else ``default``."""
    try:
        number = int(value or default)
    except ValueError:
        return default
    return number if 0 <= number < 2**63 else default


def _entity_id(request: Request) -> int:
    value = int(request.path_params["id"])
    if not 1 <= value < 2**63:
        raise errors.RecordNotFound(f"entity {value} not found")
    return value


def _refuse_write(request: Request, viewer: Viewer) -> Response | None:
    if can_write(viewer):
        return None
    return render(request, "error.html", status_code=403, title="Refused",
                  message="access denied: this token lacks the 'write' right; merging and splitting "
                          "entities needs it")


@page
async def listing(request: Request, viewer: Viewer) -> Response:
    ns = request.query_params.get("ns") or None
    q = (request.query_params.get("q") or "").strip()
    offset = _int(request.query_params.get("offset"))
    trees = viewer.trees(ns)
    rows, more = await viewer.run(neighbourhood.entities, viewer.store, trees, q=q or None, limit=PAGE,
                                  offset=offset)
    return render(request, "entities.html", title="Entities", rows=rows, more=more, ns=ns or "", q=q,
                  offset=offset, page_size=PAGE, trees=trees)


def _done_message(request: Request) -> str | None:
    done, other = request.query_params.get("done"), _int(request.query_params.get("other"))
    if done == "merge" and other:
        return f"Merged entity {other} into this one."
    if done == "split" and other:
        return f"Split the chosen aliases off to entity {other}."
    return None


@page
async def entity(request: Request, viewer: Viewer) -> Response:
    entity_id = _entity_id(request)
    offset = _int(request.query_params.get("offset"))
    view = await viewer.op("get_entity", id=entity_id, limit=ENTITY_PAGE, offset=offset)
    live = int(view.entity["id"])
    hood = await viewer.run(neighbourhood.graph, viewer.store, live, viewer.scope.by_id("read"))
    profiles = [f for f in view.facts if f.get("origin") == "profile"]
    facts = [f for f in view.facts if f.get("origin") != "profile"]
    names = {n.id: n.name for n in hood.nodes}
    return render(request, "entity.html", title=f"Entity: {view.entity['name']}", view=view, e=view.entity,
                  facts=facts, profiles=profiles, hood=hood, picture=graph.draw(hood), names=names,
                  can_write=can_write(viewer), offset=offset, done=_done_message(request))


async def _other(viewer: Viewer, value: str, namespace: str) -> int:
    """The entity a merge form names: an id (``12``, ``#12``) or a name in the entity's namespace."""
    value = value.strip()
    if value.lstrip("#").isdigit():
        other = int(value.lstrip("#"))
        if not 1 <= other < 2**63:
            raise errors.RecordNotFound(f"entity {other} not found")
        return other
    if not value:
        raise errors.InvalidInput("give the id or a name of the entity to merge into this one")
    found = await viewer.op("get_entity", name=value, namespaces=[namespace], limit=1)
    return int(found.entity["id"])


@page
async def merge(request: Request, viewer: Viewer) -> Response:
    refused = _refuse_write(request, viewer)
    if refused is not None:
        return refused
    entity_id = _entity_id(request)
    if request.method == "POST":
        form = await request.form(max_files=0, max_fields=8)
        merge_id = _int(str(form.get("merge_id", "")))
        note = str(form.get("note", "")).strip() or None
        if not merge_id:
            raise errors.InvalidInput("give the id of the entity to merge into this one")
        done = await viewer.op("merge_entities", id=entity_id, merge_id=merge_id, note=note)
        return RedirectResponse(url(f"/entities/{done.id}", done="merge", other=done.merged_id), status_code=303)
    view = await viewer.op("get_entity", id=entity_id, limit=1)
    merge_id = await _other(viewer, request.query_params.get("merge", ""), view.entity["namespace"])
    preview = await viewer.run(neighbourhood.merge_preview, viewer.store, entity_id, merge_id,
                               viewer.scope.by_id("read"))
    return render(request, "entity.html", title="Merge preview", e=view.entity, preview=preview,
                  note=request.query_params.get("note") or "")


@page
async def split(request: Request, viewer: Viewer) -> Response:
    refused = _refuse_write(request, viewer)
    if refused is not None:
        return refused
    entity_id = _entity_id(request)
    if request.method == "POST":
        form = await request.form(max_files=0, max_fields=neighbourhood.PAGE_MAX + 4)
        aliases = [str(a) for a in form.getlist("aliases") if str(a).strip()]
        note = str(form.get("note", "")).strip() or None
        done = await viewer.op("split_entity", id=entity_id, aliases=aliases, note=note)
        return RedirectResponse(url(f"/entities/{done.id}", done="split", other=done.new_id), status_code=303)
    aliases = [a for a in request.query_params.getlist("aliases") if a.strip()]
    view = await viewer.op("get_entity", id=entity_id, limit=1)
    preview = await viewer.run(neighbourhood.split_preview, viewer.store, entity_id, aliases,
                               viewer.scope.by_id("read"))
    return render(request, "entity.html", title="Split preview", e=view.entity, preview=preview,
                  aliases=aliases, note=request.query_params.get("note") or "")


ROUTES = [
    Route("/entities", listing, methods=["GET"]),
    Route("/entities/{id:int}", entity, methods=["GET"]),
    Route("/entities/{id:int}/merge", merge, methods=["GET", "POST"]),
    Route("/entities/{id:int}/split", split, methods=["GET", "POST"]),
]
