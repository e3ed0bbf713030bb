"""The console's home: the namespace tree with counts, backlog and the last write."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from stash_pipeline.consolidation.runner import status
from stash_pipeline.memory import browse
from stash_serve.console.app import Viewer, page, render


@page
async def namespaces(request: Request, viewer: Viewer) -> Response:
    trees = viewer.trees(request.query_params.get("ns") or None)
    rows = await viewer.run(browse.namespaces, viewer.store, trees)
    stages = await viewer.run(status, viewer.store, trees)
    backlog: dict[str, int] = {}
    for row in stages:
        backlog[row["namespace"]] = backlog.get(row["namespace"], 0) + int(row["backlog"])
    return render(request, "home.html", title="Namespaces", rows=rows, backlog=backlog, trees=trees)


ROUTES = [Route("/", namespaces, methods=["GET"])]
