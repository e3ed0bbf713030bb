"""Relationships, patterns and causal links against a real Postgres."""

from __future__ import annotations

import itertools

import pytest

from stash_pipeline import errors
from stash_pipeline.memory import facts, failures, graph, lineage, namespaces
from stash_pipeline.models import Deleted
from stash_pipeline.operations.graph import CREATE_CAUSAL_LINK, QUERY_RELATIONSHIPS, TRACE_CAUSAL_CHAIN


def _fact(store, namespace: str, text: str) -> int:
    return facts.assert_fact(store, namespace, text).fact.id


def _ns_id(store, slug: str) -> int:
    with store.db.transaction() as tx:
        return namespaces.resolve_id(tx, slug)


def _relationship(store, namespace: str, source_fact_id: int, frm: str, rel: str, to: str) -> int:
    with store.db.transaction() as tx:
        row = tx.conn.execute(
            "INSERT INTO relationships (namespace_id, from_entity, relation_type, to_entity, confidence, "
            "source_fact_id) VALUES (%s, %s, %s, %s, 0.9, %s) RETURNING id",
            (_ns_id(store, namespace), frm, rel, to, source_fact_id),
        ).fetchone()
        lineage.add(tx, _ns_id(store, namespace), "relationship", row["id"], [("fact", source_fact_id)])
    return int(row["id"])


@pytest.fixture
def tree(store):
    namespaces.create(store, "/p/a")
    namespaces.create(store, "/p/b")
    namespaces.create(store, "/other")
    return store


# --- relationships and patterns ---------------------------------------------------------


def test_query_relationships_filters_and_scopes(tree):
    store = tree
    f1 = _fact(store, "/p/a", "Service api depends on postgres")
    f2 = _fact(store, "/other", "Billing depends on stripe")
    r1 = _relationship(store, "/p/a", f1, "api", "depends_on", "Postgres")
    r2 = _relationship(store, "/p/a", f1, "api", "owned_by", "team-x")
    r3 = _relationship(store, "/other", f2, "billing", "depends_on", "stripe")

    assert [r.id for r in graph.query_relationships(store)] == [r1, r2, r3]
    assert [r.id for r in graph.query_relationships(store, ["/p"])] == [r1, r2]
    # entity matches either end, case-insensitively
    assert [r.id for r in graph.query_relationships(store, entity="postgres")] == [r1]
    assert [r.id for r in graph.query_relationships(store, entity="API")] == [r1, r2]
    assert [r.id for r in graph.query_relationships(store, relation_type="depends_on")] == [r1, r3]
    assert [r.id for r in graph.query_relationships(store, relation_type="Owned_By")] == [r2]
    assert [r.id for r in graph.query_relationships(store, limit=1, offset=1)] == [r2]
    rel = graph.query_relationships(store, ["/p/a"], relation_type="owned_by")[0]
    assert (rel.namespace, rel.from_entity, rel.to_entity, rel.source_fact_id) == ("/p/a", "api", "team-x", f1)


def test_query_relationships_hides_withdrawn_unless_asked(tree):
    store = tree
    f1 = _fact(store, "/p/a", "Service api depends on postgres")
    r1 = _relationship(store, "/p/a", f1, "api", "depends_on", "postgres")
    facts.withdraw(store, f1, "wrong")
    assert graph.query_relationships(store) == []
    withdrawn = graph.query_relationships(store, include_withdrawn=True)
    assert [r.id for r in withdrawn] == [r1] and withdrawn[0].withdrawn_at is not None


def test_query_relationships_rejects_bad_input(tree):
    with pytest.raises(errors.InvalidInput, match="relation_type"):
        graph.query_relationships(tree, relation_type="depends on")
    with pytest.raises(errors.InvalidInput):
        QUERY_RELATIONSHIPS.parse({"limit": 0})
    with pytest.raises(errors.NamespaceNotFound):
        graph.query_relationships(tree, ["/nope"])


def test_query_patterns_reports_cited_sources(tree):
    store = tree
    f1 = _fact(store, "/p/a", "Deploys fail on Fridays")
    f2 = _fact(store, "/p/a", "Friday deploys skip review")
    r1 = _relationship(store, "/p/a", f1, "deploy", "fails_on", "friday")
    ns_id = _ns_id(store, "/p/a")
    with store.db.transaction() as tx:
        row = tx.conn.execute(
            "INSERT INTO patterns (namespace_id, content, confidence, coherence) "
            "VALUES (%s, 'Friday deploys are risky', 0.7, 0.8) RETURNING id",
            (ns_id,),
        ).fetchone()
        lineage.add(tx, ns_id, "pattern", row["id"], [("fact", f2), ("fact", f1), ("relationship", r1)])
        other = tx.conn.execute(
            "INSERT INTO patterns (namespace_id, content) VALUES (%s, 'elsewhere') RETURNING id",
            (_ns_id(store, "/other"),),
        ).fetchone()
    patterns = graph.query_patterns(store, ["/p"])
    assert len(patterns) == 1
    p = patterns[0]
    assert (p.id, p.namespace, p.content) == (row["id"], "/p/a", "Friday deploys are risky")
    assert p.source_fact_ids == sorted([f1, f2])
    assert p.source_relationship_ids == [r1]
    assert [x.id for x in graph.query_patterns(store)] == [row["id"], other["id"]]
    # withdrawing a cited fact leaves the pattern alive (another source lives) ...
    facts.withdraw(store, f2, "wrong")
    assert [x.id for x in graph.query_patterns(store, ["/p"])] == [row["id"]]
    # ... withdrawing every source withdraws it; include_withdrawn shows it again
    facts.withdraw(store, f1, "wrong")
    assert graph.query_patterns(store, ["/p"]) == []
    assert [x.id for x in graph.query_patterns(store, ["/p"], include_withdrawn=True)] == [row["id"]]


# --- create causal links -------------------------------------------------------------------


def test_create_causal_link_fact_to_fact_with_lineage(tree):
    store = tree
    cause = _fact(store, "/p/a", "The cache was disabled")
    effect = _fact(store, "/p/b", "Latency doubled")
    link = graph.create_causal_link(store, "/p", cause, effect_id=effect, confidence=0.7, rationale="timing")
    assert (link.namespace, link.cause_fact_id, link.effect_fact_id, link.effect_failure_id) == (
        "/p", cause, effect, None
    )
    assert (link.method, link.confidence, link.rationale) == ("asserted", pytest.approx(0.7), "timing")
    with store.db.transaction() as tx:
        parents = lineage.parents_of(tx, "causal_link", link.id)
    assert sorted((p.kind, p.id) for p in parents) == sorted([("fact", cause), ("fact", effect)])
    assert [x.id for x in graph.list_causal_links(store, ["/p"])] == [link.id]


def test_create_causal_link_to_failure(tree):
    store = tree
    cause = _fact(store, "/p/a", "The migration ran without a lock")
    failure = failures.create(store, "/p/a", "Deploy broke prod", "schema race", "lock migrations")
    link = graph.create_causal_link(store, "/p/a", cause, effect_failure_id=failure.id)
    assert (link.effect_fact_id, link.effect_failure_id, link.confidence) == (None, failure.id, pytest.approx(0.8))


def test_create_causal_link_requires_exactly_one_effect(tree):
    store = tree
    cause = _fact(store, "/p/a", "x happened")
    effect = _fact(store, "/p/a", "y happened")
    failure = failures.create(store, "/p/a", "z broke", "x", "avoid x")
    with pytest.raises(errors.InvalidInput, match="exactly one effect"):
        graph.create_causal_link(store, "/p/a", cause)
    with pytest.raises(errors.InvalidInput, match="exactly one effect"):
        graph.create_causal_link(store, "/p/a", cause, effect_id=effect, effect_failure_id=failure.id)


def test_create_causal_link_rejects_self_link_and_duplicate(tree):
    store = tree
    cause = _fact(store, "/p/a", "x happened")
    effect = _fact(store, "/p/a", "y happened")
    with pytest.raises(errors.InvalidInput, match="cannot cause itself"):
        graph.create_causal_link(store, "/p/a", cause, effect_id=cause)
    graph.create_causal_link(store, "/p/a", cause, effect_id=effect)
    with pytest.raises(errors.Conflict, match="already exists"):
        graph.create_causal_link(store, "/p/a", cause, effect_id=effect)
    assert len(graph.list_causal_links(store)) == 1


def test_create_causal_link_rejects_ids_outside_the_namespace_tree(tree):
    store = tree
    mine = _fact(store, "/p/a", "x happened")
    sibling = _fact(store, "/p/b", "y happened")
    foreign = _fact(store, "/other", "z happened")
    foreign_failure = failures.create(store, "/other", "w broke", "z", "avoid z")
    with pytest.raises(errors.RecordNotFound, match="effect fact"):
        graph.create_causal_link(store, "/p/a", mine, effect_id=sibling)
    with pytest.raises(errors.RecordNotFound, match="cause fact"):
        graph.create_causal_link(store, "/p/a", foreign, effect_id=mine)
    with pytest.raises(errors.RecordNotFound, match="failure"):
        graph.create_causal_link(store, "/p/a", mine, effect_failure_id=foreign_failure.id)
    with pytest.raises(errors.RecordNotFound):
        graph.create_causal_link(store, "/p/a", mine, effect_id=999999)
    with pytest.raises(errors.NamespaceNotFound):
        graph.create_causal_link(store, "/missing", mine, effect_id=sibling)
    assert graph.list_causal_links(store) == []


def test_create_causal_link_rejects_retired_fact_and_deleted_failure(tree):
    store = tree
    cause = _fact(store, "/p/a", "x happened")
    gone = _fact(store, "/p/a", "y happened")
    facts.withdraw(store, gone, "wrong")
    with pytest.raises(errors.InvalidInput, match="not current"):
        graph.create_causal_link(store, "/p/a", cause, effect_id=gone)
    failure = failures.create(store, "/p/a", "z broke", "x", "avoid x")
    failures.delete(store, failure.id)
    with pytest.raises(errors.RecordNotFound):
        graph.create_causal_link(store, "/p/a", cause, effect_failure_id=failure.id)


def test_create_causal_link_checks_the_rationale(tree):
    store = tree
    cause = _fact(store, "/p/a", "x happened")
    effect = _fact(store, "/p/a", "y happened")
    with pytest.raises(errors.InvalidInput, match="NUL"):
        graph.create_causal_link(store, "/p/a", cause, effect_id=effect, rationale="a\x00b")


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"confidence": 1.5}, "confidence"),
        ({"confidence": "high"}, "confidence"),
        ({"cause_id": -1}, "cause_id"),
    ],
)
def test_create_causal_link_arguments_are_parsed_by_the_operation(values, match):
    """Shapes and bounds are the arguments model's to check; the library takes the parsed values."""
    with pytest.raises(errors.InvalidInput, match=match):
        CREATE_CAUSAL_LINK.parse({"cause_id": 1, "effect_id": 2, "namespace": "/p/a", **values})


# --- list / get / delete -----------------------------------------------------------------


def test_list_get_delete_causal_links_with_scope(tree):
    store = tree
    a1, a2 = _fact(store, "/p/a", "a1"), _fact(store, "/p/a", "a2")
    o1, o2 = _fact(store, "/other", "o1"), _fact(store, "/other", "o2")
    mine = graph.create_causal_link(store, "/p/a", a1, effect_id=a2)
    theirs = graph.create_causal_link(store, "/other", o1, effect_id=o2)
    assert [x.id for x in graph.list_causal_links(store)] == [mine.id, theirs.id]
    assert [x.id for x in graph.list_causal_links(store, ["/p"])] == [mine.id]
    assert graph.get_causal_link(store, mine.id, namespaces=["/p"]).id == mine.id
    with pytest.raises(errors.RecordNotFound):
        graph.get_causal_link(store, theirs.id, namespaces=["/p"])
    with pytest.raises(errors.RecordNotFound):
        graph.delete_causal_link(store, theirs.id, namespaces=["/p"])
    assert graph.delete_causal_link(store, mine.id, namespaces=["/p/a"]) == Deleted(ok=True, id=mine.id)
    assert [x.id for x in graph.list_causal_links(store)] == [theirs.id]
    with pytest.raises(errors.RecordNotFound):
        graph.delete_causal_link(store, mine.id)
    with pytest.raises(errors.RecordNotFound):
        graph.get_causal_link(store, mine.id)
    # a deleted link no longer blocks re-creating the same edge
    again = graph.create_causal_link(store, "/p/a", a1, effect_id=a2)
    assert again.id != mine.id


def test_withdrawing_a_cause_withdraws_its_links(tree):
    store = tree
    a1, a2 = _fact(store, "/p/a", "a1"), _fact(store, "/p/a", "a2")
    link = graph.create_causal_link(store, "/p/a", a1, effect_id=a2)
    facts.withdraw(store, a1, "wrong")
    assert graph.list_causal_links(store) == []
    assert [x.id for x in graph.list_causal_links(store, include_withdrawn=True)] == [link.id]


# --- trace ---------------------------------------------------------------------------------


def _chain(store, namespace: str, n: int) -> list[int]:
    ids = [_fact(store, namespace, f"event {namespace} {i}") for i in range(n)]
    for a, b in itertools.pairwise(ids):
        graph.create_causal_link(store, namespace, a, effect_id=b)
    return ids


def test_trace_forward_and_backward(tree):
    store = tree
    f = _chain(store, "/p/a", 4)
    failure = failures.create(store, "/p/a", "outage", "event chain", "watch events")
    graph.create_causal_link(store, "/p/a", f[3], effect_failure_id=failure.id)

    forward = graph.trace_causal_chain(store, f[0])
    assert [(s.depth, s.cause_fact_id, s.effect_fact_id, s.effect_failure_id) for s in forward] == [
        (1, f[0], f[1], None),
        (2, f[1], f[2], None),
        (3, f[2], f[3], None),
        (4, f[3], None, failure.id),
    ]
    assert forward[0].cause == "event /p/a 0" and forward[0].effect == "event /p/a 1"
    assert forward[3].effect == "outage"  # the failure's text is the effect

    backward = graph.trace_causal_chain(store, f[3], direction="backward")
    assert [(s.depth, s.cause_fact_id, s.effect_fact_id) for s in backward] == [
        (1, f[2], f[3]),
        (2, f[1], f[2]),
        (3, f[0], f[1]),
    ]
    assert graph.trace_causal_chain(store, f[0], direction="backward") == []


def test_trace_terminates_on_a_cycle(tree):
    store = tree
    a, b, c = (_fact(store, "/p/a", t) for t in ("a", "b", "c"))
    ab = graph.create_causal_link(store, "/p/a", a, effect_id=b)
    bc = graph.create_causal_link(store, "/p/a", b, effect_id=c)
    ca = graph.create_causal_link(store, "/p/a", c, effect_id=a)
    steps = graph.trace_causal_chain(store, a, max_depth=25)
    # each edge once; the closing edge c->a is reported, then the walk stops
    assert [(s.link_id, s.depth) for s in steps] == [(ab.id, 1), (bc.id, 2), (ca.id, 3)]
    back = graph.trace_causal_chain(store, a, direction="backward", max_depth=25)
    assert [(s.link_id, s.depth) for s in back] == [(ca.id, 1), (bc.id, 2), (ab.id, 3)]


def test_trace_is_depth_capped(tree):
    store = tree
    f = _chain(store, "/p/a", 6)
    steps = graph.trace_causal_chain(store, f[0], max_depth=2)
    assert [(s.depth, s.cause_fact_id) for s in steps] == [(1, f[0]), (2, f[1])]
    assert len(graph.trace_causal_chain(store, f[0], max_depth=25)) == 5
    # the bounds are the operation's to check, once (the library takes its values)
    for bad in (0, 26, -1, 2.5):
        with pytest.raises(errors.InvalidInput, match="max_depth: Input should be"):
            TRACE_CAUSAL_CHAIN.parse({"fact_id": f[0], "max_depth": bad})
    with pytest.raises(errors.InvalidInput, match="direction: Input should be 'forward' or 'backward'"):
        TRACE_CAUSAL_CHAIN.parse({"fact_id": f[0], "direction": "sideways"})


def test_trace_does_not_cross_namespaces(tree):
    store = tree
    a1, a2 = _fact(store, "/p/a", "a1"), _fact(store, "/p/a", "a2")
    b1 = _fact(store, "/p/b", "b1")
    graph.create_causal_link(store, "/p/a", a1, effect_id=a2)
    # a link made in /p joins /p/a and /p/b
    cross = graph.create_causal_link(store, "/p", a2, effect_id=b1)
    # default scope = the start fact's own tree (/p/a): the /p link is not followed
    assert [s.effect_fact_id for s in graph.trace_causal_chain(store, a1)] == [a2]
    # widen the scope to /p: the chain continues into /p/b
    assert [s.effect_fact_id for s in graph.trace_causal_chain(store, a1, namespaces=["/p"])] == [a2, b1]
    assert graph.trace_causal_chain(store, a1, namespaces=["/p"])[1].link_id == cross.id
    # a scope that excludes the start fact: not found
    with pytest.raises(errors.RecordNotFound):
        graph.trace_causal_chain(store, a1, namespaces=["/other"])
    with pytest.raises(errors.RecordNotFound):
        graph.trace_causal_chain(store, 999999)


def test_trace_skips_deleted_and_withdrawn_links(tree):
    store = tree
    f = _chain(store, "/p/a", 4)
    links = graph.list_causal_links(store)
    graph.delete_causal_link(store, links[1].id)  # f1 -> f2
    assert [s.effect_fact_id for s in graph.trace_causal_chain(store, f[0])] == [f[1]]
    facts.withdraw(store, f[0], "wrong")  # withdraws f0 -> f1
    assert graph.trace_causal_chain(store, f[0]) == []
    assert [s.effect_fact_id for s in graph.trace_causal_chain(store, f[2])] == [f[3]]


def test_trace_on_a_dense_cyclic_graph_terminates_quickly(tree):
    """Every fact causes every other: without per-branch visited paths the walk would
    enumerate 5**25 paths at max_depth=25; with them it stops after 5! orderings."""
    import time

    store = tree
    ids = [_fact(store, "/p/a", f"node {i}") for i in range(6)]
    for a in ids:
        for b in ids:
            if a != b:
                graph.create_causal_link(store, "/p/a", a, effect_id=b)
    started = time.monotonic()
    steps = graph.trace_causal_chain(store, ids[0], max_depth=25)
    assert time.monotonic() - started < 10
    assert len(steps) == 30  # every edge exactly once
    assert {s.depth for s in steps} == {1, 2}  # edges out of ids[0] at 1, all others first seen at 2
