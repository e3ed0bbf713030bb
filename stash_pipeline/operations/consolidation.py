"""Consolidation operations: consolidate (start the stages now), consolidation_status.

The library side is ``stash_pipeline.consolidation.runner`` (imported inside the calls, so
the declarations load without the database layer; the stage names reach the ``stage``
field's description when a schema is built, for the same reason). Both reach the
caller's whole scope, for the runs its server starts and sees (``Scope.runs``: Dagster's,
or its background jobs).

``consolidate`` never waits on a model: ``targets`` checks the call (the write right on
each tree, the namespaces, the stages it can run: without a reasoner all stages are those
that need no model, and a model stage asked for by name is refused), then the server's
runs start it and answer a handle at once. ``stash consolidate run`` takes the same arguments and
checks but runs the stages in the terminal (``stash_serve/cli/consolidation.py``: its
``--inline``, ``--wait`` and ``--dry-run`` have no tool counterpart).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, Field

from stash_pipeline.operations.base import Arguments, CliView, Operation, Scope
from stash_pipeline.operations.fields import Namespaces
from stash_pipeline.operations.results import ConsolidationStarted, ConsolidationStatus

if TYPE_CHECKING:
    from stash_pipeline.consolidation.runner import StageChoice


def _stage_names() -> tuple[str, ...]:
    from stash_pipeline.stages import STAGE_NAMES

    return STAGE_NAMES


def _describe_stage(schema: dict[str, Any]) -> None:
    schema["description"] = f"Only this stage (default: all): {', '.join(_stage_names())}."


def _known_stage(value: str | None) -> str | None:
    if value is not None and value not in _stage_names():
        raise ValueError(f"unknown stage {value[:64]!r}; use one of {', '.join(_stage_names())}")
    return value


Stage = Annotated[str | None, Field(json_schema_extra=_describe_stage), AfterValidator(_known_stage)]


class Consolidate(Arguments):
    namespaces: Namespaces = None
    stage: Stage = None


def targets(store: Any, a: Consolidate, scope: Scope) -> tuple[list[str], list[str], StageChoice]:
    """The trees a consolidate call covers (none inside another), their namespaces and the
    stages it runs, after its checks: the write right on each tree, known namespaces, a
    reasoner for a model stage asked for by name (``runner.choose_stages``). Nothing is
    started before they pass."""
    from stash_pipeline.consolidation.runner import choose_stages
    from stash_pipeline.memory.namespaces import resolve_trees

    paths = scope.read(a.namespaces)
    for path in paths:
        scope.write(path)
    # a tree inside another selected tree is already covered by it
    roots = [p for p in paths if not any(q != p and (q == "/" or p.startswith(q + "/")) for q in paths)]
    with store.db.transaction() as tx:
        slugs = sorted(set().union(*(resolve_trees(tx, path).values() for path in roots)))
    return roots, slugs, choose_stages(store.settings, a.stage)


def _consolidate(store: Any, a: Consolidate, scope: Scope) -> ConsolidationStarted:
    roots, slugs, choice = targets(store, a, scope)
    if scope.runs is None:  # a caller without a run board (a shell) runs the stages itself
        raise TypeError("consolidate needs the caller's runs; `stash consolidate run` runs in the terminal")
    started = scope.runs.consolidate(store, roots, slugs, choice.stages)
    return ConsolidationStarted(**started, skipped=choice.skipped or None, message=choice.skipped_because)


CONSOLIDATE = Operation(
    name="consolidate",
    description="Consolidate the namespace trees (episodes into facts, links, patterns…). "
    "Returns at once with Dagster run ids or a job handle; facts appear as the runs finish.",
    arguments=Consolidate,
    call=_consolidate,
    right="write",
    reach="scope",
    effect="write",
    result=ConsolidationStarted,
    cli=CliView(
        path=("consolidate", "run"),
        summary=(
            "Consolidate each namespace of the tree now (one stage or all). Exits 1 if a stage failed.\n\n"
            "When Dagster is running (STASH_DAGSTER_URL, or the one `stash up` started) it submits one run "
            "per namespace there and prints the run ids at once; otherwise, or with --inline, it runs the "
            "stages in this terminal. Without a reasoner configured it runs only the stages that need no "
            "model and says which model stages it skipped; a model stage asked for with --stage is refused "
            "before anything starts."
        ),
        example="stash consolidate run -n /projects/x --json\nstash consolidate run -n /projects/x --dry-run",
        help={"stage": "Run only this stage (default: all, in order)."},
    ),
)


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
        summary="Show cursor, backlog, last run and dead letters per namespace and stage, and Dagster's runs queued or in flight.",
        example="stash consolidate status -n /projects",
        columns=("namespace", "stage", "cursor", "head", "backlog", "last_run_at", "last_status",
                 "dead_letters_pending", "dead_letters_dead"),
    ),
)

OPERATIONS = (CONSOLIDATE, CONSOLIDATION_STATUS)
