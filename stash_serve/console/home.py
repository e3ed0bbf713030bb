"""The console's home: the namespace tree with counts, backlog and the last write."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from stash_pipeline.consolidation.runner import status
from stash_pipeline.memory import browse
from stash_serve.console.app import Viewer, page, render

#: a stage's backlog is counted up to this many items here (the Pipeline page counts them all)
BACKLOG_COUNT_MAX = 10_000


@page
async def namespaces(request: Request, viewer: Viewer) -> Response:
    trees = viewer.trees(request.query_params.get("ns") or None)
    rows = await viewer.run(browse.namespaces, viewer.store, trees)
    stages = await viewer.run(status, viewer.store, trees, count_limit=BACKLOG_COUNT_MAX)
    # the stage furthest behind: what waits longest (the stages read the same rows)
    backlog: dict[str, int] = {}
    for row in stages:
        backlog[row["namespace"]] = max(backlog.get(row["namespace"], 0), int(row["backlog"]))
    return render(request, "home.html", title="Namespaces", rows=rows, backlog=backlog, trees=trees,
                  backlog_max=BACKLOG_COUNT_MAX)


ROUTES = [Route("/", namespaces, methods=["GET"])]
