from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from stash_pipeline import errors
from stash_pipeline.memory import episodes, facts, namespaces
from stash_pipeline.operations.facts import QUERY_FACTS


@pytest.fixture
def ns(store):
    namespaces.create(store, "/projects/x/api")
    namespaces.create(store, "/other")
    return "/projects/x"


def sql(store, statement, *params):
    with store.db.connection() as conn:
        cur = conn.execute(statement, params or None)
        rows = cur.fetchall() if cur.description else []
        conn.commit()
        return rows


def test_assert_with_cited_episodes_from_the_tree(store, ns):
    e1 = episodes.remember(store, ns, "Bob said the API runs on port 8080").id
    e2 = episodes.remember(store, "/projects/x/api", "the API listens on 8080").id
    out = facts.assert_fact(
        store, ns, "The API listens on port 8080", entity="API", property="port", value="8080",
        confidence=0.9, source_episode_ids=[e2, e1],
    )
    fact = out.fact
    assert fact.origin == "asserted" and fact.confidence == pytest.approx(0.9)
    assert fact.source_episode_ids == sorted([e1, e2])
    assert (fact.entity, fact.property, fact.value) == ("API", "port", "8080")
    assert out.contradictions == [] and out.superseded_fact_ids == []
    assert "embedding" not in fact.to_json()
    assert facts.get(store, fact.id).source_episode_ids == sorted([e1, e2])


def test_assert_rejects_episodes_outside_the_tree_or_missing(store, ns):
    other = episodes.remember(store, "/other", "elsewhere").id
    with pytest.raises(errors.RecordNotFound, match=str(other)):
        facts.assert_fact(store, ns, "x is y", source_episode_ids=[other])
    with pytest.raises(errors.RecordNotFound):
        facts.assert_fact(store, ns, "x is y", source_episode_ids=[other + 1000])
    # a forgotten episode cannot be cited either
    mine = episodes.remember(store, ns, "to be forgotten soon").id
    episodes.forget(store, "to be forgotten soon", ns, threshold=0.5)
    with pytest.raises(errors.RecordNotFound):
        facts.assert_fact(store, ns, "x is y", source_episode_ids=[mine])
    assert sql(store, "SELECT count(*) FROM facts")[0]["count"] == 0


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"content": ""}, errors.EmptyContent),
        ({"content": "a\x00"}, errors.InvalidInput),
        ({"content": "ok", "confidence": 1.5}, errors.InvalidInput),
        ({"content": "ok", "entity": "x"}, errors.InvalidInput),
        ({"content": "ok", "entity": "x" * 600, "property": "p"}, errors.InvalidInput),
        ({"content": "ok", "source_episode_ids": ["abc"]}, errors.InvalidInput),
    ],
)
def test_assert_bad_input(store, ns, kwargs, error):
    content = kwargs.pop("content")
    with pytest.raises(error):
        facts.assert_fact(store, ns, content, **kwargs)
    with pytest.raises(errors.NamespaceNotFound):
        facts.assert_fact(store, "/nope", "fine")
    assert sql(store, "SELECT count(*) FROM facts")[0]["count"] == 0


def test_structured_contradiction_without_supersede(store, ns):
    old = facts.assert_fact(store, ns, "The DB is Postgres 15", entity="db", property="version", value="15").fact
    same = facts.assert_fact(store, ns, "DB version is 15", entity="DB", property="Version", value="15")
    assert same.contradictions == []
    new = facts.assert_fact(store, ns, "The DB is Postgres 16", entity="DB", property="version", value="16")
    # one open contradiction against each current fact with the other value
    assert [x.old_fact_id for x in new.contradictions] == [old.id, same.fact.id]
    c = new.contradictions[0]
    assert c.new_fact_id == new.fact.id
    assert c.classification == "contradiction" and c.method == "structured" and c.resolved is False
    assert (c.old_value, c.new_value) == ("15", "16")
    assert "differs" in c.explanation
    assert facts.get(store, old.id).current is True  # nothing retired
    assert new.superseded_fact_ids == []


def test_supersede_retires_old_fact(store, ns):
    old = facts.assert_fact(store, ns, "The DB is Postgres 15", entity="db", property="version", value="15").fact
    new = facts.assert_fact(
        store, ns, "The DB is Postgres 16", entity="db", property="version", value="16", supersede=True
    )
    assert new.superseded_fact_ids == [old.id]
    [c] = new.contradictions
    assert (c.classification, c.method, c.resolved, c.resolution) == ("replacement", "auto", True, "superseded")
    retired = facts.get(store, old.id)
    assert retired.current is False and retired.superseded_by == new.fact.id and retired.valid_until is not None
    assert [f.id for f in facts.query(store, ns)] == [new.fact.id]
    assert [f.id for f in facts.query(store, ns, include_history=True)] == [new.fact.id, old.id]


def test_query_filters_and_pagination(store, ns):
    a = facts.assert_fact(store, ns, "Alice owns billing", entity="Alice", property="owns", value="billing").fact
    b = facts.assert_fact(store, "/projects/x/api", "Bob owns api", entity="bob", property="owns", value="api").fact
    c = facts.assert_fact(store, "/other", "Carol owns search", entity="carol", property="owns", value="s").fact
    assert [f.id for f in facts.query(store)] == [c.id, b.id, a.id]
    assert [f.id for f in facts.query(store, ns)] == [b.id, a.id]
    assert [f.id for f in facts.query(store, "/projects/x/api,/other")] == [c.id, b.id]
    assert [f.id for f in facts.query(store, entity="ALICE")] == [a.id]
    assert [f.id for f in facts.query(store, property="owns", limit=1, offset=1)] == [b.id]
    assert facts.query(store, origin="synthesis") == []
    assert len(facts.query(store, origin="asserted")) == 3
    future = datetime.now(UTC) + timedelta(hours=1)
    assert facts.query(store, since=future) == []
    assert len(facts.query(store, until=future)) == 3
    assert len(facts.query(store, since=datetime(2000, 1, 1, tzinfo=UTC))) == 3
    with pytest.raises(errors.InvalidInput):
        facts.query(store, origin="guess")
    with pytest.raises(errors.InvalidInput):
        facts.query(store, limit=0)
    with pytest.raises(errors.InvalidInput, match="since: not an ISO 8601 time"):
        QUERY_FACTS.parse({"since": "last week"})  # times are the operation's to parse, once
    with pytest.raises(errors.NamespaceNotFound):
        facts.query(store, "/missing")


def test_as_of_returns_what_was_valid_then(store, ns):
    old = facts.assert_fact(store, ns, "Deploys on Fridays", entity="deploy", property="day", value="friday").fact
    time.sleep(0.05)
    between = datetime.now(UTC)
    time.sleep(0.05)
    new = facts.assert_fact(
        store, ns, "Deploys on Tuesdays", entity="deploy", property="day", value="tuesday", supersede=True
    ).fact
    assert [f.id for f in facts.query(store, ns, as_of=between)] == [old.id]
    assert [f.id for f in facts.query(store, ns)] == [new.id]
    before_all = old.created_at - timedelta(seconds=1)
    assert facts.query(store, ns, as_of=before_all) == []


def test_get_scope_and_lineage(store, ns):
    eid = episodes.remember(store, ns, "source text").id
    fact = facts.assert_fact(store, ns, "a fact", source_episode_ids=[eid]).fact
    assert facts.get(store, fact.id, "/projects").id == fact.id
    with pytest.raises(errors.RecordNotFound):
        facts.get(store, fact.id, "/other")
    with pytest.raises(errors.RecordNotFound):
        facts.get(store, fact.id + 999)
    detail = facts.get_with_lineage(store, fact.id)
    assert [p.model_dump() for p in detail.parents] == [{"kind": "episode", "id": eid}] and detail.children == []


def test_withdraw_fact(store, ns):
    fact = facts.assert_fact(store, ns, "wrong fact").fact
    out = facts.withdraw(store, fact.id, "it was wrong")
    assert out.withdrawn is True and out.cascade.withdrawn_fact_ids == []
    got = facts.get(store, fact.id)
    assert got.current is False and got.withdrawn_reason == "it was wrong"
    assert facts.query(store, ns) == []
    with pytest.raises(errors.InvalidTransition):
        facts.withdraw(store, fact.id, "again")
    with pytest.raises(errors.EmptyContent):
        facts.withdraw(store, fact.id, " ")
    other = facts.assert_fact(store, "/other", "elsewhere").fact
    with pytest.raises(errors.RecordNotFound):
        facts.withdraw(store, other.id, "scoped", namespaces=ns)
    assert facts.get(store, other.id).current is True


def test_purge_fact_removes_row_lineage_and_cache(store, ns):
    eid = episodes.remember(store, ns, "source").id
    fact = facts.assert_fact(store, ns, "purge me please", source_episode_ids=[eid]).fact
    assert sql(store, "SELECT count(*) FROM embedding_cache")[0]["count"] == 2
    out = facts.purge(store, fact.id)
    assert out.purged is True
    assert sql(store, "SELECT count(*) FROM facts")[0]["count"] == 0
    assert sql(store, "SELECT count(*) FROM lineage")[0]["count"] == 0
    assert sql(store, "SELECT count(*) FROM embedding_cache")[0]["count"] == 1
    with pytest.raises(errors.RecordNotFound):
        facts.get(store, fact.id)
