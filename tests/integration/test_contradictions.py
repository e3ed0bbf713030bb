"""Contradictions: listing and resolution actions that change the facts."""

from __future__ import annotations

import pytest

from stash_pipeline import errors
from stash_pipeline.memory import contradictions, facts, graph, namespaces
from stash_pipeline.operations.contradictions import LIST_CONTRADICTIONS, RESOLVE_CONTRADICTION


@pytest.fixture
def ns(store):
    namespaces.create(store, "/p/a")
    namespaces.create(store, "/other")
    return store


def _pair(store, namespace="/p/a", *, supersede=False, entity="api", prop="port"):
    old = facts.assert_fact(store, namespace, f"{entity} {prop} is 8080", entity=entity, property=prop, value="8080")
    new = facts.assert_fact(
        store, namespace, f"{entity} {prop} is 9090", entity=entity, property=prop, value="9090", supersede=supersede
    )
    assert len(new.contradictions) == 1
    return old.fact.id, new.fact.id, new.contradictions[0].id


def _fact(store, fact_id):
    return facts.get(store, fact_id)


def test_list_unresolved_by_default_scoped_and_paginated(ns):
    store = ns
    _, _, open_a = _pair(store, "/p/a")
    _, _, auto_a = _pair(store, "/p/a", supersede=True, entity="db")
    _, _, open_other = _pair(store, "/other")
    assert [c.id for c in contradictions.list_(store)] == [open_other, open_a]
    assert [c.id for c in contradictions.list_(store, ["/p"])] == [open_a]
    assert [c.id for c in contradictions.list_(store, ["/p"], include_resolved=True)] == [auto_a, open_a]
    assert [c.id for c in contradictions.list_(store, limit=1, offset=1)] == [open_a]
    c = contradictions.list_(store, ["/p"])[0]
    assert (c.namespace, c.entity, c.property, c.old_value, c.new_value, c.resolved) == (
        "/p/a", "api", "port", "8080", "9090", False
    )
    with pytest.raises(errors.NamespaceNotFound):
        contradictions.list_(store, ["/nope"])


def test_keep_new_retires_the_old_fact(ns):
    store = ns
    old, new, cid = _pair(store)
    out = contradictions.resolve(store, cid, "keep_new")
    c = out.contradiction
    assert (c.resolved, c.resolution) == (True, "keep_new") and c.resolved_at is not None
    old_fact, new_fact = _fact(store, old), _fact(store, new)
    assert old_fact.current is False and old_fact.superseded_by == new and old_fact.valid_until is not None
    assert old_fact.withdrawn_at is None
    assert new_fact.current is True and new_fact.superseded_by is None
    assert out.old_fact.current is False and out.new_fact.current is True
    assert [f.id for f in facts.query(store, "/p/a", entity="api")] == [new]
    assert contradictions.list_(store) == []


def test_keep_old_retires_the_new_fact(ns):
    store = ns
    old, new, cid = _pair(store)
    contradictions.resolve(store, cid, "keep_old")
    assert _fact(store, new).current is False and _fact(store, new).superseded_by == old
    assert _fact(store, old).current is True and _fact(store, old).valid_until is None


def test_keep_old_restores_an_auto_superseded_old_fact(ns):
    store = ns
    old, new, cid = _pair(store, supersede=True)
    before = _fact(store, old)
    assert before.current is False and before.superseded_by == new
    out = contradictions.resolve(store, cid, "keep_old", note="the port change was rolled back")
    assert out.contradiction.resolution == "keep_old"
    assert out.note == "the port change was rolled back"
    stored = contradictions.get(store, cid)
    assert stored.resolution_note == "the port change was rolled back"
    restored, retired = _fact(store, old), _fact(store, new)
    assert (restored.current, restored.valid_until, restored.superseded_by) == (True, None, None)
    assert (retired.current, retired.superseded_by) == (False, old)


def test_keep_both_makes_both_current(ns):
    store = ns
    old, new, cid = _pair(store, supersede=True)
    contradictions.resolve(store, cid, "keep_both")
    assert _fact(store, old).current is True and _fact(store, old).superseded_by is None
    assert _fact(store, new).current is True
    assert sorted(f.id for f in facts.query(store, "/p/a", entity="api")) == sorted([old, new])


def test_neither_withdraws_both_and_cascades(ns):
    store = ns
    old, new, cid = _pair(store)
    other = facts.assert_fact(store, "/p/a", "unrelated fact").fact.id
    link = graph.create_causal_link(store, "/p/a", old, effect_id=other)
    out = contradictions.resolve(store, cid, "neither", note="both were guesses")
    assert out.withdrawn.withdrawn_fact_ids == sorted([old, new])
    assert out.withdrawn.withdrawn["causal_link"] == 1
    for fid in (old, new):
        f = _fact(store, fid)
        assert f.current is False and f.withdrawn_at is not None and f.withdrawn_reason == "both were guesses"
    assert _fact(store, other).current is True
    assert graph.list_causal_links(store) == []
    assert [x.id for x in graph.list_causal_links(store, include_withdrawn=True)] == [link.id]
    assert out.contradiction.resolution == "neither"


def test_resolving_twice_is_an_invalid_transition(ns):
    store = ns
    old, new, cid = _pair(store)
    contradictions.resolve(store, cid, "keep_new")
    with pytest.raises(errors.InvalidTransition, match="already resolved"):
        contradictions.resolve(store, cid, "keep_old")
    # nothing changed by the refused call
    assert _fact(store, new).current is True and _fact(store, old).current is False
    assert contradictions.get(store, cid).resolution == "keep_new"


def test_auto_resolution_can_be_overridden_once(ns):
    store = ns
    _, _, cid = _pair(store, supersede=True)
    assert contradictions.get(store, cid).resolution == "superseded"
    contradictions.resolve(store, cid, "keep_new")
    with pytest.raises(errors.InvalidTransition):
        contradictions.resolve(store, cid, "keep_both")


@pytest.mark.parametrize(
    ("operation", "values"),
    [
        (RESOLVE_CONTRADICTION, {"id": 1, "resolution": "resolved"}),
        (RESOLVE_CONTRADICTION, {"id": "abc", "resolution": "keep_new"}),
        (RESOLVE_CONTRADICTION, {"id": 0, "resolution": "keep_new"}),
        (LIST_CONTRADICTIONS, {"limit": -1}),
    ],
)
def test_arguments_are_parsed_by_the_operation(operation, values):
    """Shapes, bounds and actions are the arguments model's to check; the library takes
    the parsed values."""
    with pytest.raises(errors.InvalidInput):
        operation.parse(values)


def test_unknown_or_foreign_ids(ns):
    store = ns
    old, new, cid = _pair(store)
    with pytest.raises(errors.RecordNotFound):
        contradictions.resolve(store, 999999, "keep_new")
    with pytest.raises(errors.RecordNotFound):
        contradictions.resolve(store, cid, "keep_new", namespaces=["/other"])
    with pytest.raises(errors.RecordNotFound):
        contradictions.get(store, cid, namespaces=["/other"])
    assert contradictions.get(store, cid, namespaces=["/p"]).resolved is False
    assert _fact(store, old).current is True and _fact(store, new).current is True
    contradictions.resolve(store, cid, "keep_old", namespaces=["/p"])
    assert contradictions.get(store, cid).resolution == "keep_old"


def test_a_withdrawn_fact_cannot_be_kept(ns):
    store = ns
    old, new, cid = _pair(store, supersede=True)
    facts.withdraw(store, new, "typo")
    assert _fact(store, old).current is True  # the withdrawn replacement gave its time back
    with pytest.raises(errors.InvalidTransition, match=f"fact {new} was withdrawn"):
        contradictions.resolve(store, cid, "keep_new")
    with pytest.raises(errors.InvalidTransition):
        contradictions.resolve(store, cid, "keep_both")
    out = contradictions.resolve(store, cid, "keep_old")
    assert out.old_fact.current is True


def test_withdrawing_a_fact_resolves_its_open_contradiction(ns):
    store = ns
    _, new, cid = _pair(store)
    facts.withdraw(store, new, "typo")
    got = contradictions.get(store, cid)
    assert (got.resolved, got.resolution) == (True, "withdrawn")
    with pytest.raises(errors.InvalidTransition, match="already resolved"):
        contradictions.resolve(store, cid, "keep_old")


def test_neither_without_note_gives_a_default_reason(ns):
    store = ns
    old, new, cid = _pair(store)
    contradictions.resolve(store, cid, "neither")
    assert _fact(store, old).withdrawn_reason == f"contradiction {cid} resolved: neither fact holds"
    assert _fact(store, new).withdrawn_reason == f"contradiction {cid} resolved: neither fact holds"
