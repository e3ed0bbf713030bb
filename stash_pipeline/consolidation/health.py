"""Pipeline health for people (the console): where consolidation stands in each namespace.

``pipeline`` answers one page of the trees' namespaces, each with every stage of the
stage table: its cursor against the head, the backlog between them, whether it has work,
its last run, its open dead letters, and its model calls (calls, tokens, failures) since
a time the caller gives. It reads the same queries as ``runner.status`` (``stage_backlog``
and its counts) but for the page's namespaces only, so a store with many namespaces is
read a page at a time; with them come the trees' newest open dead letters, bounded.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from stash_pipeline.memory.scope import read_scope
from stash_pipeline.models import DeadLetter, PipelineHealth, StageHealth
from stash_pipeline.stages import STAGE_NAMES, STAGES, backlog_parameters
from stash_pipeline.store import Store

#: namespaces a page shows (each with every stage: 5 x 9 stages = 45 rows)
NAMESPACES_PER_PAGE = 5
#: the newest open dead letters shown
DEAD_LETTERS_MAX = 50


def pipeline(
    store: Store, paths: Sequence[str], *, since: datetime, offset: int = 0,
    limit: int = NAMESPACES_PER_PAGE, dead_letters: int = DEAD_LETTERS_MAX,
) -> PipelineHealth:
    """The stages of the namespaces ``offset`` to ``offset + limit`` (by path) of the trees
    ``paths``, their model calls since ``since``, and the trees' newest open dead letters."""
    with store.db.transaction() as tx:
        all_namespaces, ids = read_scope(tx, list(paths))
        scope = {"all_namespaces": all_namespaces, "ids": ids}
        page = tx.all("health_namespaces", **scope, limit=max(1, limit), offset=max(0, offset))
        page_ids = [int(r["id"]) for r in page]
        rows = tx.all("stage_backlog", **backlog_parameters(page_ids)) if page_ids else []
        letters = {(r["namespace_id"], r["stage"]): r
                   for r in tx.all("consolidation_dead_letter_counts", namespace_ids=page_ids)}
        sources = {spec.name: spec.source for spec in STAGES}
        backlog = {(r["namespace_id"], r["stage"]): int(r["backlog"]) for r in tx.all(
            "consolidation_backlog_counts",
            namespace_ids=[r["namespace_id"] for r in rows], stages=[r["stage"] for r in rows],
            sources=[sources.get(r["stage"], "none") for r in rows],
            cursors=[int(r["cursor"]) for r in rows], heads=[int(r["head"]) for r in rows], count_limit=None,
        )}
        calls = {(r["namespace_id"], r["stage"]): r for r in tx.all(
            "health_model_calls", namespace_ids=page_ids, stages=list(STAGE_NAMES), since=since)}
        open_letters = tx.all("health_dead_letters", **scope, limit=max(0, dead_letters))
    stages = []
    for r in rows:
        key = (r["namespace_id"], r["stage"])
        counted, called = letters.get(key, {}), calls.get(key, {})
        stages.append(StageHealth(
            namespace=r["slug"], stage=r["stage"], cursor=int(r["cursor"]), head=int(r["head"]),
            backlog=backlog.get(key, 0), has_work=bool(r["has_work"]), last_run_at=r["last_run_at"],
            last_status=r["last_status"], dead_letters_pending=int(counted.get("pending", 0)),
            dead_letters_dead=int(counted.get("dead", 0)), calls=int(called.get("calls", 0)),
            tokens_in=int(called.get("tokens_in", 0)), tokens_out=int(called.get("tokens_out", 0)),
            errors=int(called.get("errors", 0)), last_error=called.get("last_error"),
            last_call_at=called.get("last_call_at"),
        ))
    return PipelineHealth(
        stages=stages,
        namespaces=int(page[0]["total"]) if page else 0,
        dead_letters=[DeadLetter.from_row(r) for r in open_letters],
        dead_letters_open=int(open_letters[0]["total"]) if open_letters else 0,
        since=since,
    )
