"""Rebuild one stage: withdraw what it derived in a namespace (tree), rewind its cursor.

After a prompt, schema or model change, a stage's old output stays because its cursor
is at the head. ``rebuild(store, "/projects/x", "facts", apply=True)``, for each
namespace of the tree, in ONE transaction per namespace, under the stage's run lock:

1. withdraws every live row the stage derived there (``facts``: synthesised facts, not
   asserted ones; ``relationships``, ``causal_links`` (extracted only), ``patterns``);
2. withdraws, through lineage (``memory.lineage.withdraw_cascade``), what later stages
   derived only from those rows — relationships and causal links of a withdrawn fact,
   patterns left with no living source — and flags facts that lost one source of
   several for re-check;
3. rewinds the stage's cursor to 0 and records the rebuild (``stage_rebuilds``).

The next run of the stage (Dagster, ``stash consolidate run``) re-derives from all its
input. Later stages need no rewind: re-derived rows get new ids above their cursors (or
are brought back when a withdrawn identical row is derived again), so they flow
downstream as new input. Episodes, asserted facts and links, goal notes, hypothesis
verdicts and everything derived from other inputs stay.

Safe to interrupt and re-run: a namespace is rebuilt entirely or not at all. A rebuild
given a ``token`` (Dagster passes the root run id) runs at most once per token and
namespace, so a retried step does not withdraw what it has re-derived since.
``apply=False`` runs the same statements and rolls them back: the preview is exactly
what would be withdrawn.

Only stages whose outputs can be withdrawn are rebuildable: those whose ``STAGES`` entry
names a ``rebuild_query`` (withdrawing rows of its first output kind); goal notes, hypothesis
verdicts and failure patterns are append-only history, and decay has no derived rows.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from stash_pipeline import errors
from stash_pipeline.db.locks import session_lock, stage_lock
from stash_pipeline.memory import lineage
from stash_pipeline.memory.namespaces import resolve_trees
from stash_pipeline.stages import REBUILDABLE, get_stage

if TYPE_CHECKING:
    from stash_pipeline.db.gateway import Session
    from stash_pipeline.store import Store

__all__ = ["RebuildReport", "check_rebuildable", "rebuild", "rebuild_namespace"]

@dataclass
class RebuildReport:
    """What a rebuild of one stage did (or, previewed, would do) in one namespace."""

    namespace: str
    stage: str
    applied: bool
    #: "rebuilt", "preview", or "skipped" (already done under this token)
    status: str = "rebuilt"
    cursor_was: int = 0
    #: rows of the stage's own kind withdrawn
    withdrawn: int = 0
    #: rows withdrawn through lineage, by kind (facts, relationships, causal links, patterns)
    cascade: dict[str, int] = field(default_factory=dict)
    #: facts that lost one of several sources (flagged needs_recheck)
    recheck: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class _Preview(Exception):
    """Raised to roll a previewed rebuild back."""


def check_rebuildable(stage: str) -> str:
    spec = get_stage(stage)
    if spec.rebuild_query is None:
        raise errors.InvalidInput(
            f"stage {spec.name!r} cannot be rebuilt (its outputs are kept as history); "
            f"rebuildable: {', '.join(REBUILDABLE)}"
        )
    return spec.name


def rebuild(
    store: Store, path: str, stage: str, *, apply: bool, token: str | None = None, wait: bool = True
) -> list[RebuildReport]:
    """Rebuild (or preview) ``stage`` in every namespace of the tree at ``path``."""
    check_rebuildable(stage)
    with store.db.transaction() as tx:
        tree = resolve_trees(tx, path)
    return [
        rebuild_namespace(store, namespace_id, slug, stage, apply=apply, token=token, wait=wait)
        for namespace_id, slug in sorted(tree.items(), key=lambda item: item[1])
    ]


def rebuild_namespace(
    store: Store,
    namespace_id: int,
    slug: str,
    stage: str,
    *,
    apply: bool,
    token: str | None = None,
    wait: bool = True,
) -> RebuildReport:
    """Rebuild one stage of one namespace in one transaction, holding the stage's run lock."""
    stage = check_rebuildable(stage)
    report = RebuildReport(namespace=slug, stage=stage, applied=apply, status="rebuilt" if apply else "preview")
    with store.db.connection() as lock_conn, session_lock(lock_conn, stage_lock(stage, namespace_id), wait=wait) as held:
        if not held:
            raise errors.StageBusy(f"a runner is consolidating {slug} / {stage}; rebuild it when the run ends")
        try:
            with store.db.transaction() as tx:
                if token is not None:
                    row = tx.one("rebuild_done", namespace_id=namespace_id, stage=stage, token=token) or {}
                    if row.get("done"):
                        report.status = "skipped"
                        return report
                _withdraw_and_rewind(tx, namespace_id, stage, report, store.settings)
                if not apply:
                    raise _Preview
                tx.execute(
                    "rebuild_record",
                    namespace_id=namespace_id,
                    stage=stage,
                    token=token,
                    cursor_was=report.cursor_was,
                    withdrawn=json.dumps({"own": report.withdrawn, "cascade": report.cascade}),
                )
        except _Preview:
            pass
    return report


def _withdraw_and_rewind(
    tx: Session, namespace_id: int, stage: str, report: RebuildReport, settings: Any
) -> None:
    spec = get_stage(stage)
    kind, query = spec.lineage_kind, spec.rebuild_query
    assert kind is not None and query is not None  # StageSpec refuses a rebuild query without an output kind
    own = [int(r["id"]) for r in tx.all(query, namespace_id=namespace_id, reason=f"rebuild of {stage}")]
    report.withdrawn = len(own)
    if own:
        cascade = lineage.withdraw_cascade(tx, [(kind, i) for i in own], f"rebuild of {stage}", settings=settings)
        report.cascade = {k: n for k, n in cascade.withdrawn.items() if n}
        report.recheck = len(cascade.recheck_fact_ids)
    row = tx.one("rebuild_rewind_checkpoint", namespace_id=namespace_id, stage=stage) or {}
    report.cursor_was = int(row.get("cursor_was") or 0)
