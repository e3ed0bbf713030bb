"""Reads for people looking at entities (the console): lists, the graph around one, previews.

The operations answer one entity at a time (``get_entity``) and move names for good
(``merge_entities``, ``split_entity``); a person also wants to find an entity by name,
see the entities around it, and see what a correction would move before making it.

Each function takes the caller's scope as by-id operations do (``namespaces``: a token's
trees, None: unrestricted) and reads only inside it; an entity outside it is
``RecordNotFound``, exactly as if it did not exist. Nothing here writes.
"""

from __future__ import annotations

from collections.abc import Sequence

from stash_pipeline import errors
from stash_pipeline.db.gateway import Session
from stash_pipeline.memory.entities import check_merge, check_split, normalise
from stash_pipeline.memory.scope import found_in_scope, read_scope, scope_ids
from stash_pipeline.models import (
    CorrectionPreview,
    EntityListing,
    EntityMoved,
    GraphEdge,
    GraphNode,
    Neighbourhood,
)
from stash_pipeline.store import Store

#: the most entities one page lists
PAGE_MAX = 50
#: the graph around an entity: this many nodes at most (the centre included), this many hops
GRAPH_NODES_MAX = 30
GRAPH_HOPS_MAX = 2
#: relationships read per hop at most (newest first): bounds a hub's reads
EDGES_PER_HOP = 300


def _where(tx: Session, namespaces: Sequence[str] | None) -> dict[str, object]:
    everywhere, ids = read_scope(tx, ["/"] if namespaces is None else list(namespaces))
    return {"all_namespaces": everywhere, "ns_ids": ids}


def entities(
    store: Store, namespaces: Sequence[str] | None, *, q: str | None = None, limit: int = PAGE_MAX, offset: int = 0
) -> tuple[list[EntityListing], bool]:
    """A page of the live entities of the trees by name (those with an alias containing
    ``q``, compared normalised), and whether another page follows."""
    limit = max(1, min(limit, PAGE_MAX))
    key = normalise(q or "") or None
    with store.db.transaction() as tx:
        rows = tx.all("neighbourhood_entities", q=key, limit=limit + 1, offset=max(0, offset),
                      **_where(tx, namespaces))
    return [EntityListing.from_row(r) for r in rows[:limit]], len(rows) > limit


def graph(
    store: Store,
    entity_id: int,
    namespaces: Sequence[str] | None,
    *,
    hops: int = GRAPH_HOPS_MAX,
    max_nodes: int = GRAPH_NODES_MAX,
) -> Neighbourhood:
    """The entities around ``entity_id`` through live relationships, breadth first, up to
    ``hops`` away and ``max_nodes`` nodes (nearer ones first, newer relationships first),
    with every relationship among the nodes kept."""
    hops = max(1, min(hops, GRAPH_HOPS_MAX))
    max_nodes = max(2, min(max_nodes, GRAPH_NODES_MAX))
    with store.db.transaction() as tx:
        found_in_scope(tx.one("entity_get", id=entity_id), scope_ids(tx, namespaces), f"entity {entity_id}")
        where = _where(tx, namespaces)
        hop_of = {entity_id: 0}
        edges: dict[int, GraphEdge] = {}
        frontier = [entity_id]
        truncated = False
        for hop in range(1, hops + 1):
            if not frontier:
                break
            rows = tx.all("neighbourhood_edges", ids=frontier, limit=EDGES_PER_HOP, **where)
            truncated = truncated or len(rows) == EDGES_PER_HOP
            reached: list[int] = []
            for row in rows:
                edge = GraphEdge.from_row(row)
                for end in (edge.from_id, edge.to_id):
                    if end in hop_of:
                        continue
                    if len(hop_of) >= max_nodes:
                        truncated = True
                        continue
                    hop_of[end] = hop
                    reached.append(end)
                if edge.from_id in hop_of and edge.to_id in hop_of:
                    edges[edge.id] = edge
            frontier = reached
        # the relationships among the outer nodes themselves
        if frontier:
            for row in tx.all("neighbourhood_edges", ids=frontier, limit=EDGES_PER_HOP, **where):
                edge = GraphEdge.from_row(row)
                if edge.from_id in hop_of and edge.to_id in hop_of:
                    edges[edge.id] = edge
        rows = {int(r["id"]): r for r in tx.all("neighbourhood_nodes", ids=list(hop_of))}
    nodes = [GraphNode.from_row(rows[i] | {"hop": hop}) for i, hop in hop_of.items() if i in rows]
    return Neighbourhood(centre=entity_id, nodes=nodes, edges=sorted(edges.values(), key=lambda e: e.id),
                         truncated=truncated)


def merge_preview(
    store: Store, keep_id: int, merge_id: int, namespaces: Sequence[str] | None
) -> CorrectionPreview:
    """What ``merge_entities(keep_id, merge_id)`` would move, and the refusal it would
    answer (the same errors, checked the same way) if it cannot be made."""
    if keep_id == merge_id:
        raise errors.InvalidInput("an entity cannot be merged into itself")
    with store.db.transaction() as tx:
        scope = scope_ids(tx, namespaces)
        keep = found_in_scope(tx.one("entity_get", id=keep_id), scope, f"entity {keep_id}")
        merge = found_in_scope(tx.one("entity_get", id=merge_id), scope, f"entity {merge_id}")
        check_merge(keep, merge)
        aliases = tx.all("entity_aliases_of", id=merge_id, limit=None, offset=0, all_namespaces=True, ns_ids=[])
        counts = tx.one("neighbourhood_merge_counts", id=merge_id) or {}
    return CorrectionPreview(
        action="merge", entity_id=keep_id, other_id=merge_id, other_name=merge["name"],
        moved=EntityMoved(aliases=sorted(a["normalised"] for a in aliases), facts=int(counts.get("facts", 0)),
                          relationship_ends=int(counts.get("relationship_ends", 0))),
    )


def split_preview(
    store: Store, entity_id: int, aliases: Sequence[str], namespaces: Sequence[str] | None
) -> CorrectionPreview:
    """What ``split_entity(entity_id, aliases)`` would move (the aliases, the facts and
    relationship ends written with them) and whether it would bring back the entity a
    merge brought exactly those aliases from; its refusals, checked the same way."""
    if not aliases or not all(normalise(a) for a in aliases):
        raise errors.InvalidInput("aliases must be a non-empty list of names")
    keys = sorted({normalise(a) for a in aliases})
    with store.db.transaction() as tx:
        source = found_in_scope(tx.one("entity_get", id=entity_id), scope_ids(tx, namespaces), f"entity {entity_id}")
        known, revived = check_split(tx, source, keys)
        wanted = set(keys)
        facts = sum(1 for f in tx.all("entity_fact_names", id=entity_id) if normalise(f["entity"]) in wanted)
        ends = sum(
            (r["from_entity_id"] == entity_id and normalise(r["from_entity"]) in wanted)
            + (r["to_entity_id"] == entity_id and normalise(r["to_entity"]) in wanted)
            for r in tx.all("entity_relationship_names", id=entity_id)
        )
        other = tx.one("entity_get", id=revived) if revived is not None else None
    return CorrectionPreview(
        action="split", entity_id=entity_id, other_id=revived, other_name=other["name"] if other else known[keys[0]],
        moved=EntityMoved(aliases=keys, facts=facts, relationship_ends=int(ends)), revived=revived is not None,
    )
