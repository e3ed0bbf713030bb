"""Erasure with a preview of everything a purge takes with it (admin only).

``/console/erase/<kind>/<id>`` with kind ``episode``, ``fact`` or ``entity``. GET shows
the record and every row the purge would erase with it, by kind: found by running the
real purge and rolling it back (``episodes.purge_preview`` and its kin), so it names
exactly what goes, and only rows inside the viewer's trees (as the purge's report does).
POST, with the confirmation ticked, runs the purge operation as the viewer
(``purge_episode``, ``purge_fact``, ``purge_entity``) and shows what it erased.

Who may: a record outside the viewer's trees does not exist (404, as every by-id read
answers); inside them, erasing needs the admin right (403), although the MCP purge tools
need only write: a person at a browser erases nothing by a stray click.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from stash_pipeline.memory import entities, episodes, facts
from stash_pipeline.models import ErasurePreview
from stash_serve.console.app import Viewer, page, render


@dataclass(frozen=True)
class Kind:
    """What erasing one kind of record takes: the read that finds it in the viewer's trees,
    the preview, the purge operation, and where the record's own page is."""

    label: str
    get: str
    get_args: dict[str, object]
    preview: Callable[..., ErasurePreview]
    purge: str
    path: str


KINDS = {
    "episode": Kind("episode", "get_episode", {"include_deleted": True}, episodes.purge_preview, "purge_episode",
                    "/episodes"),
    "fact": Kind("fact", "get_fact", {}, facts.purge_preview, "purge_fact", "/facts"),
    "entity": Kind("entity", "get_entity", {}, entities.purge_preview, "purge_entity", "/entities"),
}
#: the words a kind's rows go by on the page
PLURALS = {
    "episode": "episodes", "fact": "facts", "entity": "entities", "entity_correction": "entity corrections",
    "relationship": "relationships", "causal_link": "causal links", "pattern": "patterns",
    "contradiction": "contradictions", "hypothesis": "hypotheses", "hypothesis_evidence": "hypothesis evidence",
    "goal_note": "goal notes", "failure": "failures", "dead_letter": "dead letters",
}


@page
async def erase(request: Request, viewer: Viewer) -> Response:
    name, ident = request.path_params["kind"], request.path_params["id"]
    kind = KINDS.get(name)
    if kind is None:
        return render(request, "error.html", status_code=404, title="not found",
                      message=f"nothing to erase called {name!r}: erase an episode, a fact or an entity")
    # outside the viewer's trees the record does not exist (404), whatever their rights
    await viewer.op(kind.get, id=ident, **kind.get_args)
    if not viewer.is_admin:
        return render(request, "error.html", status_code=403, title="Refused",
                      message="erasing memory from the console needs the admin right; this token lacks it")
    context = {"kind": kind, "ident": ident, "plurals": PLURALS}
    if request.method == "POST":
        form = await request.form(max_files=0, max_fields=4)
        if form.get("confirm") == "yes":
            done = await viewer.op(kind.purge, id=ident)
            return render(request, "erase.html", title=f"Erased {kind.label} {ident}", done=done,
                          erased=done.erased, preview=None, message=None, **context)
        message = "tick the box to confirm: nothing was erased"
    else:
        message = None
    preview = await viewer.run(kind.preview, viewer.store, ident, viewer.scope.by_id("admin"))
    total = sum(len(ids) for ids in preview.ids.values())
    return render(request, "erase.html", status_code=400 if message else 200, title=f"Erase {kind.label} {ident}",
                  done=None, erased=None, preview=preview, total=total, message=message, **context)


ROUTES = [Route("/erase/{kind}/{id:int}", erase, methods=["GET", "POST"])]
