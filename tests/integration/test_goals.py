"""Goals: the tree, notes, ancestor auto-complete, cascade delete and scope."""

from __future__ import annotations

import pytest

from stash_pipeline import errors
from stash_pipeline.memory import facts, goals, lineage, namespaces
from stash_pipeline.operations.goals import CREATE_GOAL, LIST_GOALS


@pytest.fixture
def ns(store):
    namespaces.create(store, "/p/a")
    namespaces.create(store, "/p/b")
    namespaces.create(store, "/other")
    return store


def _ns_id(store, slug):
    with store.db.transaction() as tx:
        return namespaces.resolve_id(tx, slug)


# --- create --------------------------------------------------------------------------------


def test_create_top_level_and_sub_goals(ns):
    store = ns
    root = goals.create(store, "/p", "Ship v2", priority=5)
    assert (root.namespace, root.status, root.priority, root.parent_id) == ("/p", "active", 5, None)
    same = goals.create(store, "/p", "Write docs", parent_id=root.id)
    below = goals.create(store, "/p/a", "Migrate API", parent_id=root.id)
    assert (same.parent_id, below.parent_id, below.namespace) == (root.id, root.id, "/p/a")


def test_create_parent_rules(ns):
    store = ns
    root = goals.create(store, "/p/a", "Migrate API")
    # a parent below the new goal's namespace: refused with the rule spelled out
    with pytest.raises(errors.InvalidInput, match="parent's namespace or a descendant"):
        goals.create(store, "/p", "Ship v2", parent_id=root.id)
    # a parent in an unrelated namespace (sibling or other tree): not found
    with pytest.raises(errors.RecordNotFound):
        goals.create(store, "/p/b", "x", parent_id=root.id)
    with pytest.raises(errors.RecordNotFound):
        goals.create(store, "/other", "x", parent_id=root.id)
    with pytest.raises(errors.RecordNotFound):
        goals.create(store, "/p/a", "x", parent_id=999999)
    done = goals.create(store, "/p/a", "Done already")
    goals.complete(store, done.id)
    with pytest.raises(errors.InvalidTransition, match="completed"):
        goals.create(store, "/p/a", "x", parent_id=done.id)
    gone = goals.create(store, "/p/a", "Deleted")
    goals.delete(store, gone.id)
    with pytest.raises(errors.RecordNotFound):
        goals.create(store, "/p/a", "x", parent_id=gone.id)
    assert [g.id for g in goals.list_(store)] == [root.id, done.id]


@pytest.mark.parametrize(
    ("content", "kwargs", "error"),
    [
        ("", {}, errors.EmptyContent),
        ("x" * 10_001, {}, errors.ContentTooLarge),
    ],
)
def test_create_validates(ns, content, kwargs, error):
    with pytest.raises(error):
        goals.create(ns, "/p", content, **kwargs)
    assert goals.list_(ns) == []


@pytest.mark.parametrize(
    ("operation", "values"),
    [
        (CREATE_GOAL, {"priority": "high"}),
        (CREATE_GOAL, {"priority": 2**31}),
        (CREATE_GOAL, {"parent_id": 0}),
        (LIST_GOALS, {"status": "open"}),
        (LIST_GOALS, {"parent_id": -1}),
    ],
)
def test_arguments_are_parsed_by_the_operation(operation, values):
    """Shapes and bounds are the arguments model's to check; the library takes the parsed values."""
    base = {"content": "ok", "namespace": "/p"} if operation is CREATE_GOAL else {}
    with pytest.raises(errors.InvalidInput):
        operation.parse({**base, **values})


def test_create_in_unknown_namespace(ns):
    with pytest.raises(errors.NamespaceNotFound):
        goals.create(ns, "/nope", "x")


# --- list / show ---------------------------------------------------------------------------


def test_list_defaults_to_every_goal_and_filters(ns):
    store = ns
    root = goals.create(store, "/p", "Ship v2", priority=1)
    child = goals.create(store, "/p/a", "Migrate API", parent_id=root.id, priority=3)
    other = goals.create(store, "/other", "Elsewhere")
    done = goals.create(store, "/p", "Old", priority=0)
    goals.complete(store, done.id)
    # default: all statuses, sub-goals included; priority desc then oldest first
    assert [g.id for g in goals.list_(store)] == [child.id, root.id, other.id, done.id]
    assert [g.id for g in goals.list_(store, ["/p"])] == [child.id, root.id, done.id]
    assert [g.id for g in goals.list_(store, ["/p"], top_level_only=True)] == [root.id, done.id]
    assert [g.id for g in goals.list_(store, status="completed")] == [done.id]
    assert [g.id for g in goals.list_(store, parent_id=root.id)] == [child.id]
    assert [g.id for g in goals.list_(store, ["/p/a"])] == [child.id]
    assert [g.id for g in goals.list_(store, limit=2, offset=1)] == [root.id, other.id]
    with pytest.raises(errors.InvalidInput, match="exclude"):
        goals.list_(store, parent_id=root.id, top_level_only=True)


def test_show_counts_sub_goals_and_lists_notes(ns):
    store = ns
    root = goals.create(store, "/p", "Ship v2")
    kids = [goals.create(store, "/p", f"step {i}", parent_id=root.id) for i in range(4)]
    goals.complete(store, kids[0].id)
    goals.abandon(store, kids[1].id, note="not needed")
    goals.delete(store, kids[3].id)
    goals.update(store, root.id, note="kick-off done")
    shown = goals.show(store, root.id)
    assert shown.sub_goals == {"total": 3, "active": 1, "completed": 1, "abandoned": 1}
    assert [(n.author, n.kind, n.content) for n in shown.notes] == [("caller", "note", "kick-off done")]
    assert goals.show(store, kids[1].id).notes[0].kind == "abandoned"
    with pytest.raises(errors.RecordNotFound):
        goals.show(store, root.id, namespaces=["/other"])
    with pytest.raises(errors.RecordNotFound):
        goals.show(store, kids[3].id)


# --- update ----------------------------------------------------------------------------


def test_update_priority_zero_content_and_note(ns):
    store = ns
    g = goals.create(store, "/p", "Ship v2", priority=7)
    updated = goals.update(store, g.id, priority=0)
    assert (updated.priority, updated.content) == (0, "Ship v2")
    updated = goals.update(store, g.id, content="Ship v2.1")
    assert (updated.priority, updated.content) == (0, "Ship v2.1")
    updated = goals.update(store, g.id, note="scope cut")
    assert [n.content for n in updated.notes] == ["scope cut"]
    with pytest.raises(errors.InvalidInput, match="nothing to update"):
        goals.update(store, g.id)
    with pytest.raises(errors.EmptyContent):
        goals.update(store, g.id, content="")
    with pytest.raises(errors.RecordNotFound):
        goals.update(store, g.id, priority=1, namespaces=["/other"])
    assert goals.show(store, g.id).priority == 0


# --- notes ---------------------------------------------------------------------------------


def test_caller_note_after_model_note_keeps_both(ns):
    store = ns
    g = goals.create(store, "/p", "Ship v2")
    fact = facts.assert_fact(store, "/p", "v2 passed QA").fact.id
    ns_id = _ns_id(store, "/p")
    with store.db.transaction() as tx:
        model = goals.add_note(
            tx, goal_id=g.id, namespace_id=ns_id, author="model", kind="suggested_complete",
            content="QA passed; looks done", confidence=0.9, fact_id=fact,
        )
        repeat = goals.add_note(
            tx, goal_id=g.id, namespace_id=ns_id, author="model", kind="suggested_complete",
            content="QA passed again", confidence=0.9, fact_id=fact,
        )
        parents = lineage.parents_of(tx, "goal_note", model["id"])
    assert repeat is None  # model notes are idempotent per (goal, fact, kind)
    assert [(p.kind, p.id) for p in parents] == [("fact", fact)]
    out = goals.complete(store, g.id, note="released to prod")
    notes = out.goal.notes
    assert [(n.author, n.kind, n.content) for n in notes] == [
        ("model", "suggested_complete", "QA passed; looks done"),
        ("caller", "completed", "released to prod"),
    ]
    assert notes[0].fact_id == fact and notes[0].confidence == pytest.approx(0.9)


def test_add_note_validates(ns):
    store = ns
    g = goals.create(store, "/p", "Ship v2")
    ns_id = _ns_id(store, "/p")
    with store.db.transaction() as tx:
        for bad in ({"author": "user"}, {"kind": "done"}, {"content": " "}):
            args = {"goal_id": g.id, "namespace_id": ns_id, "author": "caller", "kind": "note", "content": "x"}
            args.update(bad)
            with pytest.raises(errors.InvalidInput):
                goals.add_note(tx, **args)
    assert goals.show(store, g.id).notes == []


# --- complete / abandon --------------------------------------------------------------------


def test_complete_only_from_active(ns):
    store = ns
    g = goals.create(store, "/p", "Ship v2")
    out = goals.complete(store, g.id)
    assert out.goal.status == "completed" and out.goal.completed_at is not None
    assert out.auto_completed == []
    with pytest.raises(errors.InvalidTransition, match="completed → completed"):
        goals.complete(store, g.id)
    with pytest.raises(errors.InvalidTransition, match="completed → abandoned"):
        goals.abandon(store, g.id)
    a = goals.create(store, "/p", "Dropped")
    assert goals.abandon(store, a.id).goal.status == "abandoned"
    with pytest.raises(errors.InvalidTransition, match="abandoned → completed"):
        goals.complete(store, a.id)


def test_ancestor_auto_complete_is_recursive(ns):
    store = ns
    root = goals.create(store, "/p", "Ship v2")
    mid = goals.create(store, "/p", "Backend", parent_id=root.id)
    leaf1 = goals.create(store, "/p/a", "API", parent_id=mid.id)
    leaf2 = goals.create(store, "/p/a", "DB", parent_id=mid.id)
    assert goals.complete(store, leaf1.id).auto_completed == []  # sibling still active
    assert goals.show(store, mid.id).status == "active"
    out = goals.complete(store, leaf2.id)
    assert out.auto_completed == [mid.id, root.id]
    assert goals.show(store, mid.id).status == "completed"
    assert goals.show(store, root.id).status == "completed"


def test_no_auto_complete_while_a_sibling_is_active(ns):
    store = ns
    root = goals.create(store, "/p", "Ship v2")
    a = goals.create(store, "/p", "A", parent_id=root.id)
    goals.create(store, "/p", "B", parent_id=root.id)
    assert goals.complete(store, a.id).auto_completed == []
    assert goals.show(store, root.id).status == "active"


def test_abandoned_children_do_not_count_but_one_completed_is_needed(ns):
    store = ns
    root = goals.create(store, "/p", "Ship v2")
    a = goals.create(store, "/p", "A", parent_id=root.id)
    b = goals.create(store, "/p", "B", parent_id=root.id)
    # abandoning every child never completes the parent (no completed child)
    assert goals.abandon(store, a.id).auto_completed == []
    assert goals.show(store, root.id).status == "active"
    # abandoning/completing so that all non-abandoned children are completed does
    c = goals.create(store, "/p", "C", parent_id=root.id)
    goals.complete(store, c.id)
    assert goals.show(store, root.id).status == "active"  # b still active
    assert goals.abandon(store, b.id).auto_completed == [root.id]


def test_deleted_children_are_ignored_by_auto_complete(ns):
    store = ns
    root = goals.create(store, "/p", "Ship v2")
    a = goals.create(store, "/p", "A", parent_id=root.id)
    b = goals.create(store, "/p", "B", parent_id=root.id)
    goals.delete(store, b.id)
    assert goals.complete(store, a.id).auto_completed == [root.id]


# --- delete ---------------------------------------------------------------------------------


def test_delete_cascades_to_descendants(ns):
    store = ns
    root = goals.create(store, "/p", "Ship v2")
    mid = goals.create(store, "/p", "Backend", parent_id=root.id)
    leaf = goals.create(store, "/p/a", "API", parent_id=mid.id)
    keep = goals.create(store, "/p", "Unrelated")
    out = goals.delete(store, root.id)
    assert out.to_json() == {"ok": True, "id": root.id, "deleted_ids": sorted([root.id, mid.id, leaf.id])}
    assert [g.id for g in goals.list_(store)] == [keep.id]
    for gid in (root.id, mid.id, leaf.id):
        with pytest.raises(errors.RecordNotFound):
            goals.show(store, gid)
        with pytest.raises(errors.RecordNotFound):
            goals.complete(store, gid)
    with pytest.raises(errors.RecordNotFound):
        goals.delete(store, root.id)


def test_delete_and_act_respect_scope(ns):
    store = ns
    g = goals.create(store, "/other", "Elsewhere")
    for op in (goals.delete, goals.complete, goals.abandon):
        with pytest.raises(errors.RecordNotFound):
            op(store, g.id, namespaces=["/p"])
    assert goals.show(store, g.id).status == "active"
    assert goals.complete(store, g.id, namespaces=["/other"]).goal.status == "completed"


def test_siblings_completed_concurrently_still_complete_the_parent(ns):
    """T1 completes A and holds its transaction open; T2 completes B meanwhile. T2 must
    wait for the parent's lock and then see A completed, so the parent completes."""
    import threading

    store = ns
    root = goals.create(store, "/p", "Ship v2")
    a = goals.create(store, "/p", "A", parent_id=root.id)
    b = goals.create(store, "/p", "B", parent_id=root.id)
    result: dict[str, goals.GoalFinish] = {}

    with store.db.transaction() as tx:  # T1, the library's complete() steps, not yet committed
        goals.load(tx, a.id, lock=True)
        tx.execute("goal_set_completed", id=a.id)
        assert goals.auto_complete_ancestors(tx, root.id) == []  # B still active for T1

        def other() -> None:
            result["finish"] = goals.complete(store, b.id)

        worker = threading.Thread(target=other)
        worker.start()
        worker.join(timeout=1.0)
        assert worker.is_alive()  # T2 waits on the parent's lock held by T1
    worker.join(timeout=20)
    assert result["finish"].auto_completed == [root.id]
    assert goals.show(store, root.id).status == "completed"


def test_scoped_auto_complete_stops_at_the_scope(ns):
    store = ns
    root = goals.create(store, "/p", "Ship v2")
    mid = goals.create(store, "/p/a", "API", parent_id=root.id)
    leaf = goals.create(store, "/p/a", "Endpoint", parent_id=mid.id)
    out = goals.complete(store, leaf.id, namespaces=["/p/a"])
    assert out.auto_completed == [mid.id]  # /p's root is outside the caller's scope
    assert goals.show(store, root.id).status == "active"
