"""The knowledge graph: relationships, patterns and causal links.

Relationships and patterns are written by consolidation stages; here they are read.
Causal links are written by the
causal stage (method 'extracted') and by callers (``create_causal_link``, method
'asserted'); both are listed, traced and soft-deleted here.

Rules:

* a link is created in ONE exact namespace, and its cause, effect fact or effect
  failure must be current / non-deleted and inside that namespace's tree;
* ``trace_causal_chain`` never leaves its scope, terminates on cycles (a visited-path
  array per branch) and caps the depth at 25; fact→failure edges are included;
* every by-id operation accepts a ``namespaces`` scope; outside it a record is
  ``RecordNotFound``, and so is a soft-deleted one.

Reads take the two times of ``query_facts``: ``as_of`` (event time) and ``known_at``
(system time). With neither, the lists return every state (withdrawn rows only when
asked) and a trace walks the live links; with either (the other defaulting to now), a
relationship is returned when it was recorded by ``known_at``, not withdrawn by then,
and its source fact was valid at ``as_of`` as Stash knew it at ``known_at`` (a
relationship holds over its source fact's interval); a causal link when it was recorded
by ``known_at``, not withdrawn by then, and ``as_of`` lies in its own interval.

The functions take parsed values (``validate``'s module docstring says which layer checks
what): ids as ints, confidences within [0, 1], times as UTC datetimes; they check the
names and the rationale against the store's limits, the ends of a link against its
namespace's tree, and the rules between its arguments (exactly one effect, no fact
causing itself).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from stash_pipeline import errors
from stash_pipeline.db.gateway import Row, Session
from stash_pipeline.memory import lineage, validate
from stash_pipeline.memory.namespaces import get as get_namespace
from stash_pipeline.memory.namespaces import resolve_trees
from stash_pipeline.memory.paging import Page
from stash_pipeline.memory.scope import found_in_scope, scope_ids
from stash_pipeline.models import CausalLink, CausalStep, Deleted, Pattern, Relationship
from stash_pipeline.store import Store

# --- relationships and patterns -------------------------------------------------------


def query_relationships(
    store: Store,
    namespaces: Sequence[str] = ("/",),
    *,
    entity: str | None = None,
    relation_type: str | None = None,
    include_withdrawn: bool = False,
    as_of: datetime | None = None,
    known_at: datetime | None = None,
    limit: int = validate.LIST_LIMIT_DEFAULT,
    offset: int = 0,
) -> list[Relationship]:
    """Relationships in the namespace trees, oldest first.

    ``entity`` matches either end (case-insensitive, exact name); ``relation_type`` is the
    identifier the stage stores (e.g. ``depends_on``; case is ignored). ``as_of`` /
    ``known_at``: those holding then, as known then (module docstring).
    """
    times = {"as_of": as_of, "known_at": known_at}
    entity = _optional_name(entity, "entity")
    if relation_type is not None:
        if not isinstance(relation_type, str) or not validate.KIND.match(relation_type.strip().lower()):
            raise errors.InvalidInput(
                "relation_type must be an identifier of letters, digits and '_' starting with a letter, "
                "e.g. depends_on"
            )
        relation_type = relation_type.strip().lower()
    return Page(limit, offset).in_trees(
        store,
        "graph_query_relationships",
        Relationship,
        namespaces,
        entity=entity,
        relation_type=relation_type,
        include_withdrawn=include_withdrawn,
        **times,
    )


def query_patterns(
    store: Store,
    namespaces: Sequence[str] = ("/",),
    *,
    include_withdrawn: bool = False,
    limit: int = validate.LIST_LIMIT_DEFAULT,
    offset: int = 0,
) -> list[Pattern]:
    """Patterns in the namespace trees with the fact and relationship ids each one cites."""
    return Page(limit, offset).in_trees(
        store, "graph_query_patterns", Pattern, namespaces, include_withdrawn=include_withdrawn
    )


# --- causal links ----------------------------------------------------------------------


def create_causal_link(
    store: Store,
    namespace: str,
    cause_id: int,
    *,
    effect_id: int | None = None,
    effect_failure_id: int | None = None,
    confidence: float = 0.8,
    rationale: str | None = None,
) -> CausalLink:
    """Assert that fact ``cause_id`` causes fact ``effect_id`` or failure ``effect_failure_id``.

    Exactly one effect. Both ends must be live (current fact / non-deleted failure) and in
    ``namespace``'s tree. A duplicate live link is a ``Conflict``. Lineage points at the
    cause and the effect, so withdrawing either withdraws the link.
    """
    cause, effect_fact, effect_failure = cause_id, effect_id, effect_failure_id
    if (effect_fact is None) == (effect_failure is None):
        raise errors.InvalidInput("give exactly one effect: effect_id (a fact) or effect_failure_id (a failure)")
    if effect_fact is not None and effect_fact == cause:
        raise errors.InvalidInput(f"a fact cannot cause itself (cause_id and effect_id are both {cause})")
    rationale = validate.optional_text(store.settings, rationale, "rationale")

    with store.db.transaction() as tx:
        target = get_namespace(tx, namespace)
        tree = set(resolve_trees(tx, target["slug"]))
        _live_fact_in(tx, cause, tree, target["slug"], "cause")
        parents: list[tuple[str, int]] = [("fact", cause)]
        if effect_fact is not None:
            _live_fact_in(tx, effect_fact, tree, target["slug"], "effect")
            parents.append(("fact", effect_fact))
        else:
            assert effect_failure is not None
            failure = tx.one("graph_get_failure", id=effect_failure)
            if failure is None or failure["deleted_at"] is not None or failure["namespace_id"] not in tree:
                raise errors.RecordNotFound(
                    f"failure {effect_failure} not found in namespace {target['slug']!r} or its descendants"
                )
            parents.append(("failure", effect_failure))
        row = tx.one(
            "graph_insert_causal_link",
            namespace_id=target["id"],
            cause_fact_id=cause,
            effect_fact_id=effect_fact,
            effect_failure_id=effect_failure,
            confidence=confidence,
            rationale=rationale,
        )
        if row is None:
            what = f"fact {effect_fact}" if effect_fact is not None else f"failure {effect_failure}"
            raise errors.Conflict(f"causal link already exists: fact {cause} -> {what}")
        lineage.add(tx, target["id"], "causal_link", row["id"], parents)
        link = tx.one("graph_get_causal_link", id=row["id"])
    assert link is not None
    return CausalLink.from_row(link)


def list_causal_links(
    store: Store,
    namespaces: Sequence[str] = ("/",),
    *,
    include_withdrawn: bool = False,
    as_of: datetime | None = None,
    known_at: datetime | None = None,
    limit: int = validate.LIST_LIMIT_DEFAULT,
    offset: int = 0,
) -> list[CausalLink]:
    """Non-deleted causal links in the namespace trees, oldest first; with ``as_of`` /
    ``known_at`` those holding then, as known then (module docstring)."""
    times = {"as_of": as_of, "known_at": known_at}
    return Page(limit, offset).in_trees(
        store, "graph_list_causal_links", CausalLink, namespaces, include_withdrawn=include_withdrawn, **times
    )


def get_causal_link(store: Store, link_id: int, namespaces: Sequence[str] | None = None) -> CausalLink:
    """One non-deleted causal link."""
    with store.db.transaction() as tx:
        row = _causal_link_in_scope(tx, link_id, scope_ids(tx, namespaces))
    return CausalLink.from_row(row)


def trace_causal_chain(
    store: Store,
    fact_id: int,
    *,
    direction: validate.TraceDirection = "forward",
    max_depth: int = validate.TRACE_DEPTH_DEFAULT,
    namespaces: Sequence[str] | None = None,
    as_of: datetime | None = None,
    known_at: datetime | None = None,
) -> list[CausalStep]:
    """The causal chain from (forward) or into (backward) a fact, ordered by depth.

    Scope: the given ``namespaces`` trees; when None, the tree of the starting fact's own
    namespace. Every walked link, and both of its ends, must lie in the scope, so a trace
    never crosses into another namespace. Withdrawn and deleted links are skipped. A
    cycle is reported once (the edge that closes it) and not followed; each link appears
    once, at the shallowest depth it is reached. Forward traces include fact→failure
    edges, whose ``effect`` is the failure's text. ``as_of`` / ``known_at`` walk only the
    links holding then, as known then (module docstring). ``direction``, ``max_depth`` and
    the times arrive checked (the ``trace_causal_chain`` operation's model).
    """
    times = {"as_of": as_of, "known_at": known_at}
    with store.db.transaction() as tx:
        fact = tx.one("fact_get", id=fact_id, as_of=None, known_at=None)
        scope = scope_ids(tx, namespaces)
        fact = found_in_scope(fact, scope, f"fact {fact_id}")
        if scope is None:
            scope = set(resolve_trees(tx, fact["namespace"]))
        query_name = "graph_trace_forward" if direction == "forward" else "graph_trace_backward"
        rows = tx.all(query_name, fact_id=fact_id, ns_ids=sorted(scope), max_depth=max_depth, **times)
    return [CausalStep.from_row(r) for r in rows]


def delete_causal_link(store: Store, link_id: int, namespaces: Sequence[str] | None = None) -> Deleted:
    """Soft-delete a causal link; a deleted or out-of-scope link is RecordNotFound."""
    with store.db.transaction() as tx:
        _causal_link_in_scope(tx, link_id, scope_ids(tx, namespaces))
        tx.execute("graph_delete_causal_link", id=link_id)
    return Deleted(ok=True, id=link_id)


# --- helpers -----------------------------------------------------------------------------


def _live_fact_in(tx: Session, fact_id: int, tree: set[int], slug: str, role: str) -> Row:
    fact = tx.one("fact_get", id=fact_id, as_of=None, known_at=None)
    if fact is None or fact["namespace_id"] not in tree:
        raise errors.RecordNotFound(f"{role} fact {fact_id} not found in namespace {slug!r} or its descendants")
    if not fact["current"]:
        raise errors.InvalidInput(
            f"{role} fact {fact_id} is not current (withdrawn, superseded or expired); "
            "causal links join current facts only"
        )
    return fact


def _causal_link_in_scope(tx: Session, link_id: int, scope: set[int] | None) -> Row:
    return found_in_scope(tx.one("graph_get_causal_link", id=link_id), scope, f"causal link {link_id}")


def _optional_name(value: object, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise errors.InvalidInput(f"{field} must be a string")
    value = value.strip()
    if not value:
        return None
    if "\x00" in value or len(value) > 1000:
        raise errors.InvalidInput(f"{field} must be at most 1000 characters without NUL bytes")
    return value
