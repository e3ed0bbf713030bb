"""Truth maintenance: forgetting a source withdraws what it alone supported; purging one
erases everything derived from it."""

from __future__ import annotations

import pytest

from stash_pipeline import recall
from stash_pipeline.memory import admin, episodes, facts, lineage, namespaces

NS = "/projects/x"


def sql(store, statement, *params):
    with store.db.connection() as conn:
        cur = conn.execute(statement, params or None)
        rows = cur.fetchall() if cur.description else []
        conn.commit()
        return rows


def make_fact(store, content, parents):
    with store.db.transaction() as tx:
        nsid = namespaces.resolve_id(tx, NS)
        return facts.insert_fact(
            tx, store, namespace_id=nsid, content=content, origin="synthesis", confidence=0.8, parents=parents
        )["id"]


def add_relationship(store, fact_id, *, with_lineage=True, to_entity="billing"):
    [row] = sql(
        store,
        "INSERT INTO relationships (namespace_id, from_entity, relation_type, to_entity, source_fact_id) "
        "SELECT id, 'alice', 'owns', %s, %s FROM namespaces WHERE slug = %s RETURNING id",
        to_entity, fact_id, NS,
    )
    if with_lineage:
        with store.db.transaction() as tx:
            lineage.add(tx, namespaces.resolve_id(tx, NS), "relationship", row["id"], [("fact", fact_id)])
    return row["id"]


def add_pattern(store, content, parents):
    [row] = sql(
        store,
        "INSERT INTO patterns (namespace_id, content) SELECT id, %s FROM namespaces WHERE slug = %s RETURNING id",
        content, NS,
    )
    with store.db.transaction() as tx:
        lineage.add(tx, namespaces.resolve_id(tx, NS), "pattern", row["id"], parents)
    return row["id"]


def add_causal_link(store, cause, effect):
    [row] = sql(
        store,
        "INSERT INTO causal_links (namespace_id, cause_fact_id, effect_fact_id) "
        "SELECT id, %s, %s FROM namespaces WHERE slug = %s RETURNING id",
        cause, effect, NS,
    )
    return row["id"]


def state(store, table, ident):
    [row] = sql(store, f"SELECT withdrawn_at IS NOT NULL AS withdrawn FROM {table} WHERE id = %s", ident)
    return row["withdrawn"]


@pytest.fixture
def world(store):
    """ep1 alone supports A; ep1+ep2 support B; A derives C; relationships/patterns/links hang off them."""
    namespaces.create(store, NS)
    ep1 = episodes.remember(store, NS, "Alice took over the billing service in March").id
    ep2 = episodes.remember(store, NS, "The billing service moved to the payments cluster").id
    a = make_fact(store, "Alice owns the billing service", [("episode", ep1)])
    b = make_fact(store, "Billing runs on the payments cluster", [("episode", ep1), ("episode", ep2)])
    c = make_fact(store, "Alice is on call for payments", [("fact", a)])
    return {
        "ep1": ep1,
        "ep2": ep2,
        "a": a,
        "b": b,
        "c": c,
        "rel_a": add_relationship(store, a),
        "rel_c": add_relationship(store, c),
        "rel_b": add_relationship(store, b),
        "pattern_a": add_pattern(store, "Ownership follows on-call", [("fact", a), ("fact", c)]),
        "pattern_ab": add_pattern(store, "Billing is central", [("fact", a), ("fact", b)]),
        "link_ab": add_causal_link(store, a, b),
    }


def test_forget_preview_reports_and_changes_nothing(store, world):
    before = sql(store, "SELECT id, withdrawn_at, needs_recheck FROM facts ORDER BY id")
    preview = episodes.forget(store, "Alice took over the billing service in March", NS, threshold=0.5, preview=True)
    assert preview.episode_id == world["ep1"] and preview.applied is False
    assert preview.withdrawn_fact_ids == sorted([world["a"], world["c"]])
    assert preview.recheck_fact_ids == [world["b"]]
    assert sql(store, "SELECT id, withdrawn_at, needs_recheck FROM facts ORDER BY id") == before
    assert episodes.get(store, world["ep1"]).deleted_at is None
    assert not state(store, "relationships", world["rel_a"])


def test_forget_cascades_transitively(store, world):
    out = episodes.forget(store, "Alice took over the billing service in March", NS, threshold=0.5)
    assert out.applied is True
    assert out.withdrawn_fact_ids == sorted([world["a"], world["c"]])
    assert out.recheck_fact_ids == [world["b"]]
    # A (only source forgotten) and C (derived from A only) are withdrawn, with a reason
    fa = facts.get(store, world["a"])
    assert fa.withdrawn_at is not None and "forgotten" in fa.withdrawn_reason and fa.current is False
    assert facts.get(store, world["c"]).withdrawn_at is not None
    # B keeps ep2, so it stays current but must be re-checked
    fb = facts.get(store, world["b"])
    assert fb.current is True and fb.needs_recheck is True
    # relationships on A and C (round 2 and 3), the A->B causal link, and the pattern
    # whose every source died are withdrawn; the pattern with a surviving source stays
    assert state(store, "relationships", world["rel_a"])
    assert state(store, "relationships", world["rel_c"])
    assert not state(store, "relationships", world["rel_b"])
    assert state(store, "causal_links", world["link_ab"])
    assert state(store, "patterns", world["pattern_a"])
    assert not state(store, "patterns", world["pattern_ab"])


def test_withdrawn_fact_absent_from_default_recall_present_with_history(store, world):
    episodes.forget(store, "Alice took over the billing service in March", NS, threshold=0.5)
    query = "Alice owns the billing service"
    default_ids = {(h.kind, h.id) for h in recall.recall(store, query, [NS])}
    assert ("fact", world["a"]) not in default_ids
    assert ("episode", world["ep1"]) not in default_ids
    history = {(h.kind, h.id): h for h in recall.recall(store, query, [NS], include_history=True)}
    assert history[("fact", world["a"])].current is False
    assert history[("fact", world["b"])].current is True
    assert facts.query(store, NS, include_history=True)[0].id == world["c"]
    assert world["a"] not in [f.id for f in facts.query(store, NS)]


def test_relationship_without_lineage_dies_with_its_source_fact(store, world):
    rel = add_relationship(store, world["b"], with_lineage=False, to_entity="payments")
    facts.withdraw(store, world["b"], "wrong")
    assert state(store, "relationships", rel)
    assert state(store, "relationships", world["rel_b"])
    assert state(store, "causal_links", world["link_ab"])
    # pattern_ab has A still alive
    assert not state(store, "patterns", world["pattern_ab"])


def _exists(store, table, ident):
    return sql(store, f"SELECT count(*) FROM {table} WHERE id = %s", ident)[0]["count"] == 1


def test_purge_episode_erases_everything_derived_from_it(store, world):
    out = episodes.purge(store, world["ep1"])
    # B had ep2 too, but it summarises ep1 as well: a purge erases it (a withdrawal would not)
    assert out.erased.erased_fact_ids == sorted([world["a"], world["b"], world["c"]])
    assert out.erased.erased == {"episode": 1, "fact": 3, "relationship": 3, "pattern": 2}
    for table, key in [("episodes", "ep1"), ("facts", "a"), ("facts", "b"), ("facts", "c"), ("relationships", "rel_a"),
                       ("relationships", "rel_b"), ("relationships", "rel_c"), ("patterns", "pattern_a"),
                       ("patterns", "pattern_ab"), ("causal_links", "link_ab")]:
        assert not _exists(store, table, world[key]), (table, key)
    assert _exists(store, "episodes", world["ep2"])
    assert sql(store, "SELECT count(*) FROM lineage")[0]["count"] == 0
    for text in ("Alice took over the billing service in March", "Billing runs on the payments cluster"):
        hashes = sql(store, "SELECT count(*) FROM embedding_cache"
                            " WHERE text_hash = encode(sha256(convert_to(%s, 'UTF8')), 'hex')", text)
        assert hashes[0]["count"] == 0, text


def test_purge_fact_erases_what_was_derived_from_it(store, world):
    out = facts.purge(store, world["a"])
    assert out.erased.erased_fact_ids == [world["c"]]
    # the relationships on A and C, both patterns citing A (pattern_ab keeps B, but quotes A)
    # and the A->B link (a foreign key) go; B and its relationship stay, untouched
    for table, key in [("facts", "a"), ("facts", "c"), ("relationships", "rel_a"), ("relationships", "rel_c"),
                       ("patterns", "pattern_a"), ("patterns", "pattern_ab"), ("causal_links", "link_ab")]:
        assert not _exists(store, table, world[key]), (table, key)
    assert facts.get(store, world["b"]).current and not state(store, "relationships", world["rel_b"])
    assert sql(store, "SELECT count(*) FROM lineage WHERE (child_kind = 'fact' AND child_id = %s) "
               "OR (parent_kind = 'fact' AND parent_id = %s)", world["a"], world["a"])[0]["count"] == 0


def test_cascade_is_idempotent(store, world):
    episodes.forget(store, "Alice took over the billing service in March", NS, threshold=0.5)
    with store.db.transaction() as tx:
        again = lineage.withdraw_cascade(tx, [("episode", world["ep1"])], "again")
    assert again.model_dump() == {
        "withdrawn_fact_ids": [],
        "recheck_fact_ids": [],
        "withdrawn": {"fact": 0, "relationship": 0, "causal_link": 0, "pattern": 0},
    }


def test_stats_follow_withdrawal(store, world):
    before = admin.stats(store)
    assert before.episodes == 2 and before.facts == {"current": 3, "retired": 0}
    assert before.relationships == 3 and before.patterns == 2 and before.causal_links == 1
    assert before.hypotheses == {"proposed": 0, "testing": 0, "confirmed": 0, "rejected": 0}
    episodes.forget(store, "Alice took over the billing service in March", NS, threshold=0.5)
    after = admin.stats(store, [NS])
    assert after.episodes == 1 and after.episodes_forgotten == 1
    assert after.facts == {"current": 1, "retired": 2}
    assert after.facts_needing_recheck == 1
    assert after.relationships == 1 and after.patterns == 1 and after.causal_links == 0
    assert after.namespaces == 1 and admin.stats(store).namespaces == 3
    assert after.model_calls == 0 and after.tokens == {"prompt": 0, "completion": 0}
    assert after.dead_letters == {"pending": 0, "dead": 0}
