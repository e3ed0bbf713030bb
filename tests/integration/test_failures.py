"""Failures: create with required texts, goal rules, list, show, soft delete, scope."""

from __future__ import annotations

import pytest

from stash_pipeline import errors
from stash_pipeline.memory import failures, goals, namespaces
from stash_pipeline.operations.failures import CREATE_FAILURE, LIST_FAILURES


@pytest.fixture
def ns(store):
    namespaces.create(store, "/p/a")
    namespaces.create(store, "/p/b")
    namespaces.create(store, "/other")
    return store


def test_create_and_show(ns):
    store = ns
    f = failures.create(store, "/p/a", "Deploy broke prod", "migration raced", "lock migrations")
    assert (f.namespace, f.content, f.reason, f.lesson, f.goal_id) == (
        "/p/a", "Deploy broke prod", "migration raced", "lock migrations", None
    )
    assert failures.show(store, f.id) == f
    assert failures.show(store, f.id, namespaces=["/p"]).id == f.id


@pytest.mark.parametrize(
    ("texts", "error", "field"),
    [
        (("", "why", "lesson"), errors.EmptyContent, "content"),
        (("what", " ", "lesson"), errors.EmptyContent, "reason"),
        (("what", "why", ""), errors.EmptyContent, "lesson"),
        (("what", "why", None), errors.InvalidInput, "lesson"),
        (("what", "why\x00", "lesson"), errors.InvalidInput, "reason"),
        (("x" * 10_001, "why", "lesson"), errors.ContentTooLarge, "content"),
    ],
)
def test_create_requires_all_three_texts(ns, texts, error, field):
    with pytest.raises(error, match=field):
        failures.create(ns, "/p/a", *texts)
    assert failures.list_(ns) == []


def test_create_goal_must_be_live_and_on_the_namespace_line(ns):
    store = ns
    top = goals.create(store, "/p", "Ship v2")
    below = goals.create(store, "/p/a", "Migrate API")
    sibling = goals.create(store, "/p/b", "Other work")
    foreign = goals.create(store, "/other", "Elsewhere")
    # same namespace, an ancestor's goal, or a descendant's goal
    assert failures.create(store, "/p/a", "w", "r", "l", goal_id=below.id).goal_id == below.id
    assert failures.create(store, "/p/a", "w", "r", "l", goal_id=top.id).goal_id == top.id
    assert failures.create(store, "/p", "w", "r", "l", goal_id=below.id).goal_id == below.id
    for bad in (sibling.id, foreign.id, 999999):
        with pytest.raises(errors.RecordNotFound):
            failures.create(store, "/p/a", "w", "r", "l", goal_id=bad)
    goals.delete(store, top.id)
    with pytest.raises(errors.RecordNotFound):
        failures.create(store, "/p/a", "w", "r", "l", goal_id=top.id)
    with pytest.raises(errors.NamespaceNotFound):
        failures.create(store, "/missing", "w", "r", "l")
    assert len(failures.list_(store)) == 3


@pytest.mark.parametrize(
    ("operation", "values"),
    [
        (CREATE_FAILURE, {"goal_id": "first"}),
        (CREATE_FAILURE, {"goal_id": 0}),
        (LIST_FAILURES, {"limit": -1}),
        (LIST_FAILURES, {"goal_id": "x"}),
    ],
)
def test_arguments_are_parsed_by_the_operation(operation, values):
    """Shapes and bounds are the arguments model's to check; the library takes the parsed values."""
    base = {"content": "w", "reason": "r", "lesson": "l", "namespace": "/p/a"} if operation is CREATE_FAILURE else {}
    with pytest.raises(errors.InvalidInput):
        operation.parse({**base, **values})


def test_list_newest_first_with_filters(ns):
    store = ns
    g = goals.create(store, "/p", "Ship v2")
    f1 = failures.create(store, "/p/a", "one", "r", "l", goal_id=g.id)
    f2 = failures.create(store, "/p/b", "two", "r", "l")
    f3 = failures.create(store, "/other", "three", "r", "l")
    assert [f.id for f in failures.list_(store)] == [f3.id, f2.id, f1.id]
    assert [f.id for f in failures.list_(store, ["/p"])] == [f2.id, f1.id]
    assert [f.id for f in failures.list_(store, ["/p/a", "/other"])] == [f3.id, f1.id]
    assert [f.id for f in failures.list_(store, goal_id=g.id)] == [f1.id]
    assert [f.id for f in failures.list_(store, limit=1, offset=2)] == [f1.id]
    with pytest.raises(errors.NamespaceNotFound):
        failures.list_(store, ["/nope"])


def test_delete_is_soft_and_scoped(ns):
    store = ns
    mine = failures.create(store, "/p/a", "one", "r", "l")
    theirs = failures.create(store, "/other", "two", "r", "l")
    with pytest.raises(errors.RecordNotFound):
        failures.delete(store, theirs.id, namespaces=["/p"])
    with pytest.raises(errors.RecordNotFound):
        failures.show(store, theirs.id, namespaces=["/p"])
    assert failures.delete(store, mine.id).to_json() == {"ok": True, "id": mine.id}
    assert [f.id for f in failures.list_(store)] == [theirs.id]
    with pytest.raises(errors.RecordNotFound):
        failures.show(store, mine.id)
    with pytest.raises(errors.RecordNotFound):
        failures.delete(store, mine.id)
    with store.db.transaction() as tx:  # soft: the row is still there
        row = tx.conn.execute("SELECT deleted_at FROM failures WHERE id = %s", (mine.id,)).fetchone()
    assert row["deleted_at"] is not None
