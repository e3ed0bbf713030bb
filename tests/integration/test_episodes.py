from __future__ import annotations

from datetime import UTC, datetime

import pytest

from stash_pipeline import errors
from stash_pipeline.memory import episodes, facts, lineage, namespaces
from stash_pipeline.operations.episodes import REMEMBER


@pytest.fixture
def ns(store):
    namespaces.create(store, "/projects/x")
    return "/projects/x"


def count(store, sql):
    with store.db.connection() as conn:
        return conn.execute(sql).fetchone()["count"]


def test_remember_and_get_round_trips_metadata(store, ns):
    when = datetime(2026, 1, 31, 9, 0, tzinfo=UTC)
    out = episodes.remember(
        store, ns, "The deploy uses blue-green on Fridays", occurred_at=when, kind="session_summary",
        metadata={"source": "chat", "tags": ["deploy"], "n": 3, "nested": {"ok": True}},
    )
    assert out.created is True and out.namespace == ns and out.id > 0
    ep = episodes.get(store, out.id)
    assert ep.content == "The deploy uses blue-green on Fridays"
    assert ep.kind == "session_summary"
    assert ep.metadata == {"source": "chat", "tags": ["deploy"], "n": 3, "nested": {"ok": True}}
    assert ep.occurred_at == when
    assert ep.namespace == ns
    assert "embedding" not in ep.to_json()


def test_metadata_may_hold_the_text_backslash_u0000_but_not_a_nul(store, ns):
    # a regex or a JSON snippet in metadata: the six characters \u0000, no NUL among them
    text = {"pattern": "[\\u0000-\\u001f]", "\\u0000 key": ["\\u0000"]}
    out = episodes.remember(store, ns, "Strip control characters before parsing", metadata=text)
    assert episodes.get(store, out.id).metadata == text
    for nul in ({"k": "a\x00b"}, {"a\x00": 1}, {"k": [{"deep": "\x00"}]}):
        with pytest.raises(errors.InvalidInput, match="NUL"):
            episodes.remember(store, ns, "with a NUL", metadata=nul)


def test_remember_needs_exact_existing_namespace(store, ns):
    with pytest.raises(errors.NamespaceNotFound):
        episodes.remember(store, "/projects/y", "hello")
    with pytest.raises(errors.InvalidNamespace):  # the path is the operation's to check, once
        REMEMBER.parse({"content": "hello", "namespace": "projects"})
    assert count(store, "SELECT count(*) FROM episodes") == 0


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("", errors.EmptyContent),
        ("   \n", errors.EmptyContent),
        ("a\x00b", errors.InvalidInput),
        ("lone \ud800 surrogate", errors.InvalidInput),
        ("x" * 10_001, errors.ContentTooLarge),
        (42, errors.InvalidInput),
    ],
)
def test_bad_content_rejected_and_nothing_written(store, ns, content, error):
    with pytest.raises(error):
        episodes.remember(store, ns, content)
    assert count(store, "SELECT count(*) FROM episodes") == 0
    assert count(store, "SELECT count(*) FROM embedding_cache") == 0


def test_content_at_the_limit_is_accepted(store, ns):
    assert episodes.remember(store, ns, "é" * 5000).created is True  # 10,000 bytes


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "Bad Kind"}, "kind"),
        ({"metadata": ["not", "an", "object"]}, "metadata"),
        ({"metadata": {"x": object()}}, "metadata"),
        ({"metadata": {"x": "a\x00b"}}, "NUL"),
        ({"idempotency_key": ""}, "idempotency_key"),
    ],
)
def test_bad_fields_rejected(store, ns, kwargs, message):
    with pytest.raises(errors.InvalidInput, match=message):
        episodes.remember(store, ns, "hello", **kwargs)
    assert count(store, "SELECT count(*) FROM episodes") == 0


@pytest.mark.parametrize(
    ("occurred_at", "message"),
    [("yesterday", "item 0: occurred_at is not an ISO-8601 timestamp"),
     (datetime(2026, 1, 1), "item 0: occurred_at must carry a time zone")],
)
def test_an_item_given_as_an_object_has_its_time_parsed(store, ns, occurred_at, message):
    """remember takes a parsed time; an episode given as an object (a batch item, an
    imported row) has it parsed by ``prepare``, with validate.timestamp."""
    with pytest.raises(errors.InvalidInput, match=message):
        episodes.remember_batch(store, ns, [{"content": "hello", "occurred_at": occurred_at}])
    assert count(store, "SELECT count(*) FROM episodes") == 0


def test_idempotency_key_replay_and_conflict(store, ns):
    first = episodes.remember(store, ns, "note one", idempotency_key="k-1")
    again = episodes.remember(store, ns, "note one", idempotency_key="k-1")
    assert again.model_dump() == {"id": first.id, "namespace": ns, "created": False}
    with pytest.raises(errors.Conflict, match=r"k-1.*different content"):
        episodes.remember(store, ns, "note two", idempotency_key="k-1")
    # keys are per namespace
    namespaces.create(store, "/projects/z")
    other = episodes.remember(store, "/projects/z", "note one", idempotency_key="k-1")
    assert other.created is True and other.id != first.id
    assert count(store, "SELECT count(*) FROM episodes") == 2


def test_batch_inserts_in_order_with_replays(store, ns):
    episodes.remember(store, ns, "already here", idempotency_key="old")
    out = episodes.remember_batch(
        store,
        ns,
        [
            {"content": "first", "metadata": {"i": 0}},
            {"content": "already here", "idempotency_key": "old"},
            {"content": "third", "idempotency_key": "new", "kind": "note"},
            {"content": "third", "idempotency_key": "new"},
        ],
    )
    assert [r.created for r in out] == [True, False, True, False]
    assert out[3].id == out[2].id
    assert out[0].id < out[2].id
    assert episodes.get(store, out[0].id).metadata == {"i": 0}
    assert episodes.get(store, out[2].id).kind == "note"
    assert count(store, "SELECT count(*) FROM episodes") == 3


def test_batch_is_all_or_nothing_and_names_the_item(store, ns):
    items = [{"content": f"item {i}"} for i in range(5)] + [{"content": ""}]
    with pytest.raises(errors.EmptyContent, match="item 5"):
        episodes.remember_batch(store, ns, items)
    with pytest.raises(errors.InvalidInput, match="item 1: unknown episode field"):
        episodes.remember_batch(store, ns, [{"content": "a"}, {"content": "b", "colour": "red"}])
    with pytest.raises(errors.Conflict, match="item 1"):
        episodes.remember_batch(
            store, ns, [{"content": "a", "idempotency_key": "k"}, {"content": "b", "idempotency_key": "k"}]
        )
    with pytest.raises(errors.InvalidInput, match="at most 1000"):
        episodes.remember_batch(store, ns, [{"content": "x"}] * 1001)
    with pytest.raises(errors.InvalidInput):
        episodes.remember_batch(store, ns, [])
    assert count(store, "SELECT count(*) FROM episodes") == 0


def test_batch_database_failure_rolls_back_everything(store, ns):
    # a CHECK violation on the 3rd row (kind passes _validate but the row is fine);
    # simulate a failure by dropping the namespace mid-way is racy, so use a trigger
    with store.db.connection() as conn:
        conn.execute(
            "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.content = 'poison' THEN RAISE check_violation USING MESSAGE = 'poison'; END IF; "
            "RETURN NEW; END $$"
        )
        conn.execute("CREATE TRIGGER boom BEFORE INSERT ON episodes FOR EACH ROW EXECUTE FUNCTION boom()")
        conn.commit()
    with pytest.raises(errors.InvalidInput):
        episodes.remember_batch(store, ns, [{"content": "ok 1"}, {"content": "ok 2"}, {"content": "poison"}])
    assert count(store, "SELECT count(*) FROM episodes") == 0


def test_batch_of_1000_in_one_embedding_call(store, ns):
    calls = []
    model = store.embedder.inner
    inner = model.embed

    def spy(texts):
        calls.append(len(texts))
        return inner(texts)

    # the spy sits on the model itself: one forward pass for the whole batch
    model.embed = spy  # type: ignore[method-assign]
    out = episodes.remember_batch(store, ns, [{"content": f"episode number {i}"} for i in range(1000)])
    assert len(out) == 1000 and len({r.id for r in out}) == 1000
    assert calls == [1000]
    assert count(store, "SELECT count(*) FROM episodes") == 1000


def test_get_scoping_and_missing(store, ns):
    namespaces.create(store, "/other")
    eid = episodes.remember(store, ns, "scoped").id
    assert episodes.get(store, eid, "/projects").id == eid
    with pytest.raises(errors.RecordNotFound):
        episodes.get(store, eid, "/other")
    with pytest.raises(errors.RecordNotFound):
        episodes.get(store, eid, "/does-not-exist")
    with pytest.raises(errors.RecordNotFound):
        episodes.get(store, eid + 100)
    with pytest.raises(errors.RecordNotFound):  # the library takes a parsed id: -1 names no row
        episodes.get(store, -1)


def test_forget_threshold_preview_and_apply(store, ns):
    eid = episodes.remember(store, ns, "The staging database password rotates monthly").id
    episodes.remember(store, ns, "Lunch is at noon")
    miss = episodes.forget(store, "quantum chromodynamics lecture notes", ns)
    assert miss.episode_id is None and miss.applied is False
    preview = episodes.forget(store, "staging database password rotates", ns, threshold=0.3, preview=True)
    assert preview.episode_id == eid and preview.applied is False and preview.similarity > 0.3
    assert episodes.get(store, eid).deleted_at is None  # preview changed nothing
    done = episodes.forget(store, "staging database password rotates", ns, threshold=0.3)
    assert done.episode_id == eid and done.applied is True
    with pytest.raises(errors.RecordNotFound):
        episodes.get(store, eid)
    gone = episodes.get(store, eid, include_deleted=True)
    assert gone.deleted_at is not None and "staging" in gone.deleted_reason
    # the next forget cannot match the deleted one again
    again = episodes.forget(store, "staging database password rotates", ns, threshold=0.3)
    assert again.episode_id != eid


def test_forget_stays_inside_the_namespace_trees(store, ns):
    namespaces.create(store, "/other")
    episodes.remember(store, "/other", "The staging database password rotates monthly")
    out = episodes.forget(store, "staging database password rotates monthly", ns, threshold=0.1)
    assert out.episode_id is None
    with pytest.raises(errors.NamespaceNotFound):
        episodes.forget(store, "x", "/missing")
    with pytest.raises(errors.InvalidInput):
        episodes.forget(store, "x", ns, threshold=1.5)


def test_purge_erases_row_and_cache(store, ns):
    text = "secret token is hunter2"
    eid = episodes.remember(store, ns, text).id
    assert count(store, "SELECT count(*) FROM embedding_cache") == 1
    out = episodes.purge(store, eid)
    assert out.purged is True
    assert count(store, "SELECT count(*) FROM episodes") == 0
    assert count(store, "SELECT count(*) FROM embedding_cache") == 0
    with pytest.raises(errors.RecordNotFound):
        episodes.purge(store, eid)


def test_insert_fact_writes_lineage_in_same_transaction(store, ns):
    eid = episodes.remember(store, ns, "Alice leads the platform team").id
    with store.db.transaction() as tx:
        nsid = namespaces.resolve_id(tx, ns)
        row = facts.insert_fact(
            tx, store, namespace_id=nsid, content="Alice leads platform", origin="synthesis",
            confidence=0.8, entity="Alice", property="leads", value="platform", parents=[("episode", eid)],
            rationale="stated directly",
        )
        assert [(p.kind, p.id) for p in lineage.parents_of(tx, "fact", row["id"])] == [("episode", eid)]
    assert "embedding" not in row
    assert row["source_episode_ids"] == [eid] and row["namespace"] == ns
    fact = facts.get(store, row["id"])
    assert fact.source_episode_ids == [eid] and fact.current is True and fact.rationale == "stated directly"
    with pytest.raises(errors.InvalidInput, match="origin"), store.db.transaction() as tx:
        facts.insert_fact(tx, store, namespace_id=nsid, content="x", origin="guess", confidence=0.5)
    with pytest.raises(errors.InvalidInput, match="lineage kind"), store.db.transaction() as tx:
        facts.insert_fact(tx, store, namespace_id=nsid, content="y", origin="synthesis", confidence=0.5,
                          parents=[("banana", 1)])
    assert count(store, "SELECT count(*) FROM facts") == 1


def test_every_query_name_used_by_the_memory_core_exists():
    import re
    from pathlib import Path

    from stash_pipeline.db.sql import QUERIES
    root = Path(episodes.__file__).parent
    used: set[str] = set()
    for path in [root / f"{name}.py" for name in ("episodes", "facts", "context", "lineage", "admin", "pending")] + [
            *sorted((root.parent / "recall").glob("*.py")), *sorted((root.parent / "interchange").glob("*.py"))]:
        text = path.read_text()
        used |= set(re.findall(r"\.(?:one|all|scalar|execute|returning_many|executemany)\(\s*\"([a-z0-9_]+)\"", text))
    assert len(used) > 30
    assert sorted(used - set(QUERIES)) == []
