"""Consolidation operations: consolidation_status.

The library side is ``stash_pipeline.consolidation.runner`` (imported inside the call, so
the declaration loads without the database layer). The status reaches the caller's
whole scope for the runs its server sees (Dagster's, or its background jobs).

``consolidate`` is not declared here: the tool must never wait on a model, so it submits
Dagster runs or starts a background job and answers a handle, while ``stash consolidate
run`` runs the stages in the terminal (``--inline``, ``--wait``, ``--dry-run``, exit 1
when a stage failed). Their arguments, checks and answers differ; each is written in its
surface (``stash_serve/mcp/tools/consolidation.py``, ``stash_serve/cli/consolidation.py``),
beside the commands no tool matches (rebuild, dead letters).
"""

from __future__ import annotations

from typing import Any

from stash_pipeline.operations.base import Arguments, CliView, Operation, Scope
from stash_pipeline.operations.fields import Namespaces
from stash_pipeline.operations.results import ConsolidationStatus


class Status(Arguments):
    namespaces: Namespaces = None


def _status(store: Any, a: Status, scope: Scope) -> ConsolidationStatus:
    from stash_pipeline.consolidation import runner

    paths = scope.read(a.namespaces)
    items = runner.status(store, paths)
    if scope.runs is None:
        return ConsolidationStatus(items=items, mode=None, runs=[])
    slugs = sorted({row["namespace"] for row in items})
    return ConsolidationStatus(items=items, **scope.runs.in_flight(store.settings, paths, slugs))


CONSOLIDATION_STATUS = Operation(
    name="consolidation_status",
    description="Per namespace and stage: cursor, backlog, last run and dead letters; runs queued or in flight.",
    arguments=Status,
    call=_status,
    right="read",
    reach="scope",
    effect="read",
    result=ConsolidationStatus,
    cli=CliView(
        path=("consolidate", "status"),
        summary="Show cursor, backlog, last run and dead letters per namespace and stage.",
        example="stash consolidate status -n /projects",
        columns=("namespace", "stage", "cursor", "head", "backlog", "last_run_at", "last_status",
                 "dead_letters_pending", "dead_letters_dead"),
    ),
)

OPERATIONS = (CONSOLIDATION_STATUS,)
