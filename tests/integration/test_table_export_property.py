"""Property: for any memory graph, export → import under another root → export gives the
same files apart from ids (compared with ids replaced by ordinals, slugs made relative)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stash_pipeline.interchange import export, readers
from tests.integration.test_interchange import _sql
from tests.integration.test_table_export import canonical

TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40).filter(str.strip)
WORD = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
JSON = st.recursive(st.none() | st.booleans() | st.integers(-10**9, 10**9) | TEXT,
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(WORD, inner, max_size=3),
                    max_leaves=6)
WHEN = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2030, 1, 1),
                    timezones=st.just(UTC))
UNIT = st.floats(0, 1, width=32)
roots = itertools.count()


@st.composite
def graphs(draw):
    """A random memory graph as plain data: rows refer to earlier rows by position."""
    n_ns = draw(st.integers(1, 3))
    episodes = draw(st.lists(st.tuples(st.integers(0, n_ns - 1), TEXT, WORD, st.dictionaries(WORD, JSON, max_size=3),
                                       WHEN, st.booleans()), max_size=6))
    facts = draw(st.lists(st.tuples(st.integers(0, n_ns - 1), TEXT, UNIT, st.one_of(st.none(), WORD),
                                    st.booleans(), st.booleans()), max_size=6))
    goals = draw(st.lists(st.tuples(st.integers(0, n_ns - 1), TEXT, st.sampled_from(["active", "completed"])),
                          max_size=3))
    return {
        "namespaces": n_ns, "episodes": episodes, "facts": facts, "goals": goals,
        "sources": draw(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=6)),
        "supersede": draw(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=2)),
        "parents": draw(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), max_size=2)),
        "notes": draw(st.lists(st.tuples(st.integers(0, 2), TEXT, st.one_of(st.none(), UNIT)), max_size=3)),
        "links": draw(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), UNIT), max_size=3)),
        "relations": draw(st.lists(st.tuples(st.integers(0, 5), WORD, TEXT, TEXT), max_size=3)),
        "hypotheses": draw(st.lists(st.tuples(TEXT, st.sampled_from(["proposed", "testing", "rejected"]),
                                              st.one_of(st.none(), st.integers(0, 5))), max_size=2)),
        "file_format": draw(st.sampled_from(["parquet", "csv"])),
    }


def build(store, root, g):
    """The graph's rows; a reference is kept only where the live tools let it point (the
    importer drops any other, see catalog.Ref): same namespace, a lineage parent in its
    child's tree, a parent goal in its sub-goal's namespace or above (namespace 0 is the root)."""
    from psycopg.types.json import Jsonb

    fact_ns, episode_ns, goal_ns = ([row[0] for row in g[k]] for k in ("facts", "episodes", "goals"))

    ns = [_sql(store, "INSERT INTO namespaces (slug, description) VALUES (%s, %s) RETURNING id",
               root + ("" if i == 0 else f"/c{i}"), f"namespace {i}")[0]["id"] for i in range(g["namespaces"])]
    vector = "[" + ",".join(["0.1"] * 384) + "]"
    eps = [_sql(store, "INSERT INTO episodes (namespace_id, content, kind, metadata, embedding, embedding_model, "
                "occurred_at, deleted_at) VALUES (%s, %s, %s, %s, %s, 'hash-384', %s, "
                "CASE WHEN %s THEN %s::timestamptz END) RETURNING id",
                ns[n], text, kind, Jsonb(meta), vector, when, deleted, when)[0]["id"]
           for n, text, kind, meta, when, deleted in g["episodes"]]
    facts = [_sql(store, "INSERT INTO facts (namespace_id, content, confidence, entity, origin, embedding, "
                  "embedding_model, withdrawn_at, valid_until) VALUES (%s, %s, %s, %s, 'asserted', %s, 'hash-384', "
                  "CASE WHEN %s THEN now() END, CASE WHEN %s THEN now() + interval '1 day' END) RETURNING id",
                  ns[n], text, conf, entity, vector, withdrawn, expiring)[0]["id"]
             for n, text, conf, entity, withdrawn, expiring in g["facts"]]
    for f, e in g["sources"]:
        if f < len(facts) and e < len(eps) and fact_ns[f] in (0, episode_ns[e]):
            _sql(store, "INSERT INTO lineage (child_kind, child_id, parent_kind, parent_id, namespace_id) "
                 "SELECT 'fact', %s, 'episode', %s, namespace_id FROM facts WHERE id = %s ON CONFLICT DO NOTHING",
                 facts[f], eps[e], facts[f])
    for old, new in g["supersede"]:
        if old < len(facts) and new < len(facts) and old != new and fact_ns[old] == fact_ns[new]:
            _sql(store, "UPDATE facts SET superseded_by = %s WHERE id = %s", facts[new], facts[old])
    goals = [_sql(store, "INSERT INTO goals (namespace_id, content, status) VALUES (%s, %s, %s) RETURNING id",
                  ns[n], text, status)[0]["id"] for n, text, status in g["goals"]]
    for child, parent in g["parents"]:
        if child < len(goals) and parent < len(goals) and child != parent and goal_ns[parent] in (0, goal_ns[child]):
            _sql(store, "UPDATE goals SET parent_id = %s WHERE id = %s", goals[parent], goals[child])
    for goal, text, conf in g["notes"]:
        if goal < len(goals):
            _sql(store, "INSERT INTO goal_notes (goal_id, namespace_id, author, content, confidence) "
                 "SELECT id, namespace_id, 'caller', %s, %s FROM goals WHERE id = %s", text, conf, goals[goal])
    for cause, effect, conf in g["links"]:
        if cause < len(facts) and effect < len(facts) and cause != effect and fact_ns[cause] == fact_ns[effect]:
            _sql(store, "INSERT INTO causal_links (namespace_id, cause_fact_id, effect_fact_id, confidence) "
                 "SELECT namespace_id, id, %s, %s FROM facts WHERE id = %s ON CONFLICT DO NOTHING",
                 facts[effect], conf, facts[cause])
    for fact, kind, a, b in g["relations"]:
        if fact < len(facts):
            _sql(store, "INSERT INTO relationships (namespace_id, from_entity, relation_type, to_entity, "
                 "source_fact_id) SELECT namespace_id, %s, %s, %s, id FROM facts WHERE id = %s "
                 "ON CONFLICT DO NOTHING", a, kind, b, facts[fact])
    for text, status, fact in g["hypotheses"]:
        confirmed = facts[fact] if fact is not None and fact < len(facts) and fact_ns[fact] == 0 else None
        _sql(store, "INSERT INTO hypotheses (namespace_id, content, verification_plan, status, confirmed_fact_id, "
             "tested_at) VALUES (%s, %s, 'check it', %s, %s, %s)", ns[0], text, status, confirmed,
             datetime(2026, 1, 1, tzinfo=UTC) + timedelta(microseconds=7))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(graph=graphs())
def test_any_graph_round_trips(store, tmp_path, graph):
    number = next(roots)
    root, copy = f"/g{number}", f"/copy{number}/g"
    build(store, root, graph)
    first, second = tmp_path / f"first{number}", tmp_path / f"second{number}"
    export.export_tables(store, root, first, format=graph["file_format"])
    result = readers.import_export(store, first, into=copy)
    assert result["skipped"] == {}
    export.export_tables(store, copy, second, format=graph["file_format"])
    assert canonical(first, root) == canonical(second, copy)
