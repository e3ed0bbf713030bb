"""Pipeline health per namespace and stage: cursor, backlog, dead letters, model calls.

``/console/pipeline?ns=<tree>&days=<window>&offset=<n>``: a page of the viewer's
namespaces (``consolidation.health.pipeline``), each with every stage of the stage table:
where its cursor stands against the head, the backlog (with a bar against the page's
largest), its last run, open dead letters and model calls in the window (a namespace
whose stages never ran and have nothing waiting is one line); below, the trees' newest
open dead letters with their errors. With a Dagster UI configured, a
namespace links to its runs and a stage to its asset.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import groupby
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from stash_pipeline import errors
from stash_pipeline.consolidation import health
from stash_pipeline.models import StageHealth
from stash_serve.console.app import Viewer, page, render

#: the windows of model calls a person can pick, in days (the first is the default)
WINDOWS = (7, 1, 30)
#: the widest backlog bar, in pixels
BAR_WIDTH = 100


def runs_url(dagster: str, slug: str) -> str:
    """The Dagster UI's runs of one namespace (its partition, the runs' ``dagster/partition`` tag)."""
    return f"{dagster}/runs?" + urlencode({"q[]": f"tag:dagster/partition={slug}"})


def asset_url(dagster: str, stage: str) -> str:
    """The Dagster UI's page of a stage's asset (its key is the stage's name)."""
    return f"{dagster}/assets/{quote(stage, safe='')}"


def bar(value: int, most: int) -> int:
    """A backlog bar's width: proportional to the page's largest, at least 2 px when not 0."""
    if value <= 0 or most <= 0:
        return 0
    return max(2, round(BAR_WIDTH * value / most))


def idle(row: StageHealth) -> bool:
    """A stage that never ran, has nothing waiting, no dead letter and no model call: among
    several, a namespace of such stages is one line rather than a table of zeros."""
    return (row.last_run_at is None and not row.has_work and row.backlog == 0 and row.calls == 0
            and row.dead_letters_pending == 0 and row.dead_letters_dead == 0)


def _number(text: str | None, name: str, default: int) -> int:
    if text in (None, ""):
        return default
    try:
        value = int(text)
    except ValueError:
        raise errors.InvalidInput(f"{name} must be a whole number, not {text!r}") from None
    if value < 0:
        raise errors.InvalidInput(f"{name} must be 0 or more")
    return value


@page
async def pipeline(request: Request, viewer: Viewer) -> Response:
    asked = request.query_params.get("ns") or None
    trees = viewer.trees(asked)
    days = _number(request.query_params.get("days"), "days", WINDOWS[0])
    if days not in WINDOWS:
        raise errors.InvalidInput(f"days must be one of {', '.join(map(str, sorted(WINDOWS)))}")
    offset = _number(request.query_params.get("offset"), "offset", 0)
    since = datetime.now(UTC) - timedelta(days=days)
    found = await viewer.run(health.pipeline, viewer.store, trees, since=since, offset=offset)
    groups: list[tuple[str, list[StageHealth]]] = []
    quiet: list[str] = []
    several = len({r.namespace for r in found.stages}) > 1
    for slug, rows in groupby(found.stages, key=lambda r: r.namespace):
        stages = list(rows)
        if several and all(idle(r) for r in stages):
            quiet.append(slug)
        else:
            groups.append((slug, stages))
    most = max((r.backlog for r in found.stages), default=0)
    step = health.NAMESPACES_PER_PAGE
    return render(
        request, "pipeline.html", title="Pipeline", health=found, groups=groups, quiet=quiet, trees=trees,
        asked=asked or "",
        days=days, windows=sorted(WINDOWS), offset=offset, step=step, bar_width=BAR_WIDTH,
        bars={(r.namespace, r.stage): bar(r.backlog, most) for r in found.stages},
        runs_url=runs_url, asset_url=asset_url,
        previous=max(0, offset - step) if offset > 0 else None,
        next=offset + step if offset + step < found.namespaces else None,
    )


ROUTES = [Route("/pipeline", pipeline, methods=["GET"])]
