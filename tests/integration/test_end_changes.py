"""When each row's end last changed (migration 0018): a known_at read looks a row's history
up only when the row's end changed after known_at, so changes the history does not hold
(decay's aging of confidence, a reinforcement) cost an old read nothing, and the answer is
the same as with the lookup."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from stash_pipeline.config import load_settings
from stash_pipeline.db.migrate import migrate
from stash_pipeline.db.sql import query
from stash_pipeline.interchange import export, readers
from stash_pipeline.memory import facts, graph, namespaces
from stash_pipeline.store import Store
from tests.integration.consolidation.conftest import rows
from tests.integration.test_end_history import NS, _changed_three_times, _moment, _read, _works, year


def _reads(store: Store, name: str, table: str, **params: Any) -> tuple[list[dict[str, Any]], int]:
    """The rows of the named read and how often it read ``table`` (scans in its transaction)."""
    ns = rows(store, "SELECT id FROM namespaces WHERE slug = %(ns)s", ns=NS)[0]["id"]
    given = {"ns_ids": [ns], "namespace_ids": [ns], "all_namespaces": False, "entity": None, "relation_type": None,
             "property": None, "origin": None, "since": None, "until": None, "as_of": None, "known_at": None,
             "include_withdrawn": False, "include_history": False, "limit": 1000, "offset": 0} | params
    count = "SELECT seq_scan + idx_scan AS n FROM pg_stat_xact_user_tables WHERE relname = %s"
    with store.db.connection() as conn:  # (the counts may hold earlier transactions' not yet reported)
        start = conn.execute(count, (table,)).fetchone()["n"]
        found = conn.execute(query(name), given).fetchall()
        scans = conn.execute(count, (table,)).fetchone()["n"] - start
        conn.rollback()
    return found, int(scans)


def _run(store: Store, sql: str, **params: Any) -> None:
    with store.db.connection() as conn:
        conn.execute(sql, params or None)
        conn.commit()


def _decay_everything(store: Store) -> int:
    """Age every current fact once, as the decay stage does a window after their last update."""
    _run(store, "UPDATE facts SET updated_at = now() - interval '8 days'")
    with store.db.transaction() as tx:
        return tx.execute("decay_stale_facts", namespace_id=namespaces.resolve_id(tx, NS), factor=0.5,
                          window="7 days")


def test_decay_leaves_an_old_read_without_history_lookups(store):
    namespaces.create(store, NS)
    for n, company in enumerate(("Acme", "Globex", "Initech")):
        facts.assert_fact(store, NS, f"Bob{n} works at {company}", entity=f"Bob{n}", property="works_at",
                          value=company, valid_from=year(2010))
    known = _moment()
    assert _decay_everything(store) == 3
    found, scans = _reads(store, "facts_query", "fact_ends", known_at=known)
    assert sorted(f["value"] for f in found) == ["Acme", "Globex", "Initech"]
    assert [f["confidence"] for f in found] == [0.5] * 3  # decay changed the fact, not its end
    assert scans == 0  # was one lookup per fact and function: updated_at had moved


def test_a_changed_end_is_still_read_from_the_history(store):
    h = _changed_three_times(store)
    _decay_everything(store)
    at = datetime(2013, 7, 1, tzinfo=UTC)
    found, scans = _reads(store, "facts_query", "fact_ends", known_at=h["between"], as_of=at)
    assert [f["value"] for f in found] == ["Initech"] and scans > 0  # Acme's end changed since: looked up
    changed = rows(store, "SELECT ends_changed_at AS at FROM facts WHERE id = %(id)s", id=h["acme"])
    assert changed == rows(store, "SELECT max(replaced_at) AS at FROM fact_ends WHERE fact_id = %(id)s", id=h["acme"])
    assert facts.get(store, h["acme"], known_at=h["between"]).valid_until == year(2012)


def test_history_written_directly_moves_the_column(store):
    """An import writes history rows itself (its trigger keeps none): the column follows them."""
    namespaces.create(store, NS)
    fact = _works(store, "Acme", 2010)
    known = _moment()
    assert rows(store, "SELECT ends_changed_at FROM facts WHERE id = %(id)s", id=fact) == [{"ends_changed_at": None}]
    _run(store, "INSERT INTO fact_ends (fact_id, namespace_id, valid_until, replaced_at) "
         "SELECT id, namespace_id, %(until)s, now() FROM facts WHERE id = %(id)s", id=fact, until=year(2011))
    assert rows(store, "SELECT ends_changed_at > %(known)s AS moved FROM facts WHERE id = %(id)s",
                id=fact, known=known) == [{"moved": True}]
    assert facts.get(store, fact, known_at=known).valid_until == year(2011)  # the history's, as known then
    # the same for relationships and causal links (one trigger function, the table its argument)
    other = _works(store, "Globex", 2011)
    with store.db.transaction() as tx:
        ns = namespaces.resolve_id(tx, NS)
        rel = int(tx.scalar("stage_relationship_insert", namespace_id=ns, from_entity="alice",
                            relation_type="works_at", to_entity="acme", confidence=0.9, fact_id=fact))
        link = int(tx.scalar("stage_causal_insert", namespace_id=ns, cause_id=fact, effect_id=other,
                             confidence=0.8, rationale="because"))
    known = _moment()
    for table, history, column, id_ in (("relationships", "relationship_ends", "relationship_id", rel),
                                        ("causal_links", "causal_link_ends", "causal_link_id", link)):
        _run(store, f"INSERT INTO {history} ({column}, namespace_id, valid_until, replaced_at) "
             f"SELECT id, namespace_id, %(until)s, now() FROM {table} WHERE id = %(id)s", id=id_, until=year(2011))
        assert rows(store, f"SELECT ends_changed_at > %(known)s AS moved FROM {table} WHERE id = %(id)s",
                    id=id_, known=known) == [{"moved": True}], table


def test_links_unchanged_since_known_at_are_read_without_their_history(store):
    """Relationships and causal links had no such test: every row's history was looked up."""
    namespaces.create(store, NS)
    acme, globex, initech = (_works(store, company, 2010 + n) for n, company in enumerate(("Acme", "Globex", "Initech")))
    with store.db.transaction() as tx:
        ns = namespaces.resolve_id(tx, NS)
        rels = [int(tx.scalar("stage_relationship_insert", namespace_id=ns, from_entity="alice",
                              relation_type="works_at", to_entity=f"c{fact}", confidence=0.9, fact_id=fact))
                for fact in (acme, globex, initech)]
        links = [int(tx.scalar("stage_causal_insert", namespace_id=ns, cause_id=cause, effect_id=effect,
                               confidence=0.8, rationale="because"))
                 for cause, effect in ((acme, globex), (globex, initech))]
    before = _moment()
    # withdrawn (by hand: a rebuild or a cascade would)
    _run(store, "UPDATE relationships SET withdrawn_at = now() WHERE id = %(id)s", id=rels[0])
    _run(store, "UPDATE causal_links SET withdrawn_at = now() WHERE id = %(id)s", id=links[0])
    after = _moment()
    for known, live_rels, live_links in ((before, rels, links), (after, rels[1:], links[1:])):
        found, scans = _reads(store, "graph_query_relationships", "relationship_ends", known_at=known)
        assert [r["id"] for r in found] == live_rels
        assert (scans > 0) == (known == before)  # only the one withdrawn since is looked up
        found, scans = _reads(store, "graph_list_causal_links", "causal_link_ends", known_at=known)
        assert [c["id"] for c in found] == live_links
        assert (scans > 0) == (known == before)
    # recall's predicate (a relationship over its own interval) answers the same, looking up as little
    visible = ("SELECT id FROM relationships r WHERE relationship_visible(r, NULL, %(known)s, false) ORDER BY id")
    assert [r["id"] for r in rows(store, visible, known=before)] == rels
    assert [r["id"] for r in rows(store, visible, known=after)] == rels[1:]


@pytest.fixture
def at_0017(database_at: Any) -> str:
    return str(database_at("0017"))


def test_a_0017_database_reads_the_same_after_the_upgrade(at_0017: str, tmp_path: Path) -> None:
    settings = load_settings(database_url=at_0017, home=tmp_path, embedder="hash", vector_dim=384)
    with Store.open(settings) as store:
        h = _changed_three_times(store)
        globex = next(f.id for f in facts.query(store, NS) if f.value == "Globex")
        with store.db.transaction() as tx:
            link = int(tx.scalar("stage_causal_insert", namespace_id=namespaces.resolve_id(tx, NS), cause_id=h["acme"],
                                 effect_id=globex, confidence=0.8, rationale="because"))
        linked = _moment()
        _run(store, "UPDATE causal_links SET withdrawn_at = now() WHERE id = %(id)s", id=link)
        times = [h["between"], linked, _moment(), None]
        # a replacement purged before 0018 left its id in the history (cleared by the upgrade;
        # this version's purge clears it itself)
        namespaces.create(store, "/other")
        hooli, umbrella = _works(store, "Hooli", 2010, ns="/other"), _works(store, "Umbrella", 2012, ns="/other", supersede=True)
        _run(store, "DELETE FROM facts WHERE id = %(id)s", id=umbrella)  # the row as a purge left it before 0018
        dangling = "SELECT fact_id FROM fact_ends e WHERE NOT EXISTS (SELECT 1 FROM facts f WHERE f.id = e.superseded_by)"
        assert rows(store, dangling + " AND superseded_by IS NOT NULL") == [{"fact_id": hooli}]

        def read() -> list[Any]:
            return [(_read(store, NS, known) if known else None,
                     [c.id for c in graph.list_causal_links(store, [NS], known_at=known or datetime.now(UTC))])
                    for known in times]

        old = read()
    assert [links for _, links in old] == [[], [link], [], []]
    migrate(settings, at_0017)
    with Store.open(settings) as store:
        assert read() == old
        assert rows(store, dangling + " AND superseded_by IS NOT NULL") == []
        for table, key in (("facts", "fact_id"), ("relationships", "relationship_id"), ("causal_links", "causal_link_id")):
            history = table.removesuffix("s") + "_ends"
            changed = rows(store, f"SELECT id, ends_changed_at FROM {table} WHERE ends_changed_at IS NOT NULL ORDER BY id")
            last = rows(store, f"SELECT {key} AS id, max(replaced_at) AS ends_changed_at FROM {history} "
                        f"GROUP BY {key} ORDER BY {key}")
            assert changed == last and changed, table


def test_an_import_recomputes_the_column_whatever_the_file_says(store, tmp_path):
    """The column is derived: an export leaves it out, and one a file carries anyway (written
    by hand) is ignored; the import sets it from the history it writes."""
    h = _changed_three_times(store)
    tree = tmp_path / "tree.jsonl"
    export.export_tree(store, NS, tree)
    lines = [json.loads(line) for line in tree.read_text().splitlines()]
    assert not any("ends_changed_at" in line.get("row", {}) for line in lines)
    for line in lines:
        if line.get("type") in ("fact", "relationship"):
            line["row"]["ends_changed_at"] = "1999-01-01T00:00:00+00:00"
    tree.write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = readers.import_export(store, tree, into="/copy")
    assert report["problems"] == []
    changed = "SELECT t.ends_changed_at FROM {} t JOIN namespaces n ON n.id = t.namespace_id WHERE n.slug = %(ns)s ORDER BY t.id"
    for table in ("facts", "relationships"):
        assert rows(store, changed.format(table), ns="/copy") == rows(store, changed.format(table), ns=NS), table
    assert _read(store, "/copy", h["between"]) == _read(store, NS, h["between"])
