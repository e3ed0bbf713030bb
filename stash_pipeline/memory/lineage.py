"""Lineage: where every derived row came from, and withdrawal when its sources go.

Every derived row (fact, relationship, causal link, pattern, contradiction, goal note,
hypothesis verdict) records its parents in the generic ``lineage`` table, written in the
SAME transaction as the row (``add``). ``withdraw_cascade`` is truth maintenance:
when episodes are forgotten or facts withdrawn (or rebuilt), the
rows derived only from them are withdrawn, rows that keep another living source are
flagged for re-check (facts), and this repeats until nothing changes — transitively
through relationships, causal links and patterns. The facts gone then give back the event
time they took on their keys' timelines (``timeline.gone``). Each round is a handful of set-based
statements, never a loop over rows. A purge erases instead (``erasure``).
"""

from __future__ import annotations

from collections.abc import Iterable

from stash_pipeline import errors
from stash_pipeline.config import Settings
from stash_pipeline.db import catalog
from stash_pipeline.db.gateway import Row, Session
from stash_pipeline.db.sql import named
from stash_pipeline.memory import timeline
from stash_pipeline.models import Cascade, LineageRef

#: the id spaces a lineage edge may name, from the table catalog
KINDS = catalog.LINEAGE_KINDS
#: kinds the cascade can withdraw (they have a withdrawn_at column), from the table catalog
WITHDRAWABLE = catalog.WITHDRAWABLE
#: a safety net: a cascade deeper than this means a lineage cycle, which add() cannot create
MAX_ROUNDS = 1000


def _check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise errors.InvalidInput(f"unknown lineage kind {kind!r}; kinds: {', '.join(sorted(KINDS))}")
    return kind


def add(
    tx: Session,
    namespace_id: int,
    child_kind: str,
    child_id: int,
    parents: Iterable[tuple[str, int]],
) -> int:
    """Record the parents of one derived row in the caller's transaction; returns edges given."""
    _check_kind(child_kind)
    pairs = [(_check_kind(kind), int(pid)) for kind, pid in parents]
    if any(kind == child_kind and pid == child_id for kind, pid in pairs):
        raise errors.InvalidInput(f"a {child_kind} cannot be its own parent")
    if not pairs:
        return 0
    _hold_parents(tx, pairs)
    tx.execute(
        "lineage_add",
        child_kind=child_kind,
        child_id=int(child_id),
        namespace_id=int(namespace_id),
        parent_kinds=[k for k, _ in pairs],
        parent_ids=[i for _, i in pairs],
    )
    return len(pairs)


def _hold_parents(tx: Session, pairs: list[tuple[str, int]]) -> None:
    """Lock the parents against a purge until the caller's transaction ends; one a purge
    erased meanwhile is a conflict (the caller's batch is rolled back and read again)."""
    by_kind: dict[str, set[int]] = {}
    for kind, ident in pairs:
        by_kind.setdefault(kind, set()).add(ident)
    for kind, ids in sorted(by_kind.items()):
        found = tx.conn.execute(named("lineage_lock_parents", table=catalog.BY_KIND[kind].name),
                                {"ids": sorted(ids)}).fetchall()
        if len(found) < len(ids):
            gone = sorted(ids - {int(r["id"]) for r in found})
            raise errors.Conflict(f"the {kind} {', '.join(map(str, gone))} a derived row names was erased meanwhile")


def _where(scope: set[int] | None) -> dict[str, object]:
    """The SQL parameters of a namespace scope (``scope.scope_ids``: None is every namespace)."""
    return {"all_namespaces": scope is None, "ns_ids": sorted(scope or ())}


def parents_of(tx: Session, kind: str, id: int, scope: set[int] | None = None) -> list[LineageRef]:
    """The parents of one row: those in ``scope`` (namespace ids; None: all)."""
    rows = tx.all("lineage_parents_of", kind=_check_kind(kind), id=int(id), **_where(scope))
    return [LineageRef.from_row(r) for r in rows]


def children_of(tx: Session, kind: str, id: int, scope: set[int] | None = None) -> list[LineageRef]:
    """The rows derived from one row: those in ``scope`` (None: all)."""
    rows = tx.all("lineage_children_of", kind=_check_kind(kind), id=int(id), **_where(scope))
    return [LineageRef.from_row(r) for r in rows]


def withdraw_cascade(
    tx: Session,
    roots: list[tuple[str, int]],
    reason: str,
    *,
    settings: Settings | None = None,
    scope: set[int] | None = None,
) -> Cascade:
    """Withdraw what was derived only from ``roots`` (already removed/withdrawn), to a fixpoint.

    ``settings`` names the multi-valued properties (``timeline.multi_valued``; the built-in
    list when None) whose keys have no timeline to give time back on.

    Roots are treated as dead even if their row still exists. Returns the facts withdrawn,
    the facts to re-check and counts by kind.

    The cascade crosses namespace boundaries (a parent namespace's fact derived only from
    a child's forgotten turn must not stay current), but the report names and counts only
    the rows in ``scope`` (the caller's namespace ids; None: all): rows outside the
    caller's trees are changed without a word about them (docs/mcp.md, "Access").
    """
    root_pairs = [(_check_kind(k), int(i)) for k, i in roots]
    root_kinds = [k for k, _ in root_pairs]
    root_ids = [i for _, i in root_pairs]
    withdrawn: dict[str, list[int]] = {kind: [] for kind in WITHDRAWABLE}
    recheck: set[int] = set()
    hidden: set[tuple[str, int]] = set()  # changed, outside the caller's scope: not reported

    def changed(kind: str, rows: list[Row]) -> list[int]:
        if scope is not None:
            hidden.update((kind, int(r["id"])) for r in rows if int(r["namespace_id"]) not in scope)
        return _ids(rows)

    frontier = root_pairs
    rounds = 0
    while frontier:
        rounds += 1
        if rounds > MAX_ROUNDS:  # pragma: no cover - lineage is acyclic by construction
            raise errors.InvalidInput("lineage cascade did not converge (cycle in lineage?)")
        children = tx.all(
            "lineage_cascade_children",
            kinds=[k for k, _ in frontier],
            ids=[i for _, i in frontier],
            root_kinds=root_kinds,
            root_ids=root_ids,
        )
        dead: dict[str, list[int]] = {kind: [] for kind in WITHDRAWABLE}
        survivors: list[int] = []
        for row in children:
            if row["has_live_parent"]:
                if row["kind"] == "fact":
                    survivors.append(int(row["id"]))
            else:
                dead[row["kind"]].append(int(row["id"]))

        new_facts = (
            changed("fact", tx.all("lineage_withdraw_facts", ids=dead["fact"], reason=reason)) if dead["fact"] else []
        )
        if survivors:
            recheck.update(changed("fact", tx.all("lineage_mark_recheck", ids=survivors)))
        # relationships and causal links also die with their source/cause/effect fact,
        # whether or not a lineage edge names it
        gone_facts = [i for k, i in frontier if k == "fact"] + new_facts
        new_rels = changed("relationship", tx.all("lineage_withdraw_relationships", ids=dead["relationship"],
                                                  fact_ids=gone_facts))
        new_links = changed("causal_link", tx.all("lineage_withdraw_causal_links", ids=dead["causal_link"],
                                                  fact_ids=gone_facts))
        new_patterns = (
            changed("pattern", tx.all("lineage_withdraw_patterns", ids=dead["pattern"])) if dead["pattern"] else []
        )
        withdrawn["fact"] += new_facts
        withdrawn["relationship"] += new_rels
        withdrawn["causal_link"] += new_links
        withdrawn["pattern"] += new_patterns
        frontier = (
            [("fact", i) for i in new_facts]
            + [("relationship", i) for i in new_rels]
            + [("causal_link", i) for i in new_links]
            + [("pattern", i) for i in new_patterns]
        )
    withdrawn_facts = sorted(withdrawn["fact"])
    # the facts gone give back the event time they took on their keys' timelines
    timeline.gone(tx, settings, [i for k, i in root_pairs if k == "fact"] + withdrawn_facts)

    def shown(kind: str, ids: Iterable[int]) -> list[int]:
        return sorted(i for i in ids if (kind, i) not in hidden)

    return Cascade(
        withdrawn_fact_ids=shown("fact", withdrawn_facts),
        recheck_fact_ids=shown("fact", recheck - set(withdrawn_facts)),
        withdrawn={kind: len(shown(kind, ids)) for kind, ids in withdrawn.items()},
    )


def _ids(rows: list[Row]) -> list[int]:
    return [int(r["id"]) for r in rows]
