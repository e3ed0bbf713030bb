"""A purge's preview names exactly what the purge then erases, and changes nothing itself.

The preview runs the real purge and rolls it back (``erasure.rehearse``); these tests hold
it to that: every catalog table's ids before and after the purge differ by the preview's
ids, and the database reads the same before and after a preview.
"""

from __future__ import annotations

from typing import Any

import pytest

from stash_pipeline import errors
from stash_pipeline.db import catalog
from stash_pipeline.memory import entities, episodes, facts, namespaces

NS = "/erasing"
ELSEWHERE = "/elsewhere"
#: tables a purge may touch that the catalog does not export (their content is checked too)
OTHERS = ("embedding_cache", "recall_term_stats", "profile_requests", "stage_checkpoints")


def ids(store: Any) -> dict[str, set[int]]:
    """Every catalog table's ids, by kind."""
    out: dict[str, set[int]] = {}
    with store.db.connection() as conn:
        for table in catalog.TABLES:
            if table.has_id:
                out[table.kind] = {int(r["id"]) for r in conn.execute(f"SELECT id FROM {table.name}")}
        conn.commit()
    return out


def digest(store: Any) -> dict[str, str]:
    """Every catalog table's (and its neighbours') whole content, as one digest a table."""
    out: dict[str, str] = {}
    with store.db.connection() as conn:
        for name in [t.name for t in catalog.TABLES] + list(OTHERS):
            row = conn.execute(f"SELECT count(*) AS n, md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), ''))"
                               f" AS d FROM {name} t").fetchone()
            out[name] = f"{row['n']}:{row['d']}"
        conn.commit()
    return out


def derive(store: Any, namespace: str, content: str, parents: list[tuple[str, int]], **more: Any) -> int:
    """A fact a stage derived from ``parents`` (its lineage)."""
    with store.db.transaction() as tx:
        row = facts.insert_fact(tx, store, namespace_id=namespaces.resolve_id(tx, namespace), content=content,
                                origin="synthesis", confidence=0.8, parents=parents, **more)
    return int(row["id"])


def dead_letter(store: Any, namespace: str, kind: str, ident: int, error: str) -> int:
    with store.db.transaction() as tx:
        nsid = namespaces.resolve_id(tx, namespace)
        row = tx.conn.execute(
            "INSERT INTO dead_letters (namespace_id, stage, item_kind, item_id, last_error, status)"
            " VALUES (%s, 'relationships', %s, %s, %s, 'dead') RETURNING id", (nsid, kind, ident, error)).fetchone()
    return int(row["id"])


def relationship(store: Any, namespace: str, fact_id: int) -> int:
    """A relationship on a fact written without lineage: its foreign key takes it with the fact."""
    with store.db.transaction() as tx:
        nsid = namespaces.resolve_id(tx, namespace)
        row = tx.conn.execute(
            "INSERT INTO relationships (namespace_id, from_entity, relation_type, to_entity, source_fact_id)"
            " VALUES (%s, 'Rosa', 'keeps', 'vault codes', %s) RETURNING id", (nsid, fact_id)).fetchone()
    return int(row["id"])


@pytest.fixture
def world(store: Any) -> dict[str, int]:
    """An episode with facts derived from it, a fact derived from one of those, a fact with
    two sources, one in another tree, a dead letter and a relationship on a derived fact,
    and rows that must survive."""
    for path in (NS, ELSEWHERE):
        namespaces.create(store, path)
    ep = int(episodes.remember(store, NS, "Rosa keeps the vault codes in a red notebook").id)
    other = int(episodes.remember(store, NS, "Rosa's office is on the third floor").id)
    stated = facts.assert_fact(store, NS, "Rosa keeps the vault codes in a notebook", entity="Rosa",
                               property="notebook", value="red", source_episode_ids=[ep]).fact.id
    return {
        "episode": ep,
        "other_episode": other,
        "stated": int(stated),
        "derived": derive(store, NS, "The vault codes are written down", [("fact", int(stated))]),
        "two_sources": derive(store, NS, "Rosa's notebook is on the third floor", [("episode", ep), ("episode", other)]),
        "survivor": derive(store, NS, "Rosa works on the third floor", [("episode", other)]),
        "elsewhere": derive(store, ELSEWHERE, "Someone keeps codes in a notebook", [("episode", ep)]),
        "letter": dead_letter(store, NS, "fact", int(stated), "model answer <b>invalid</b>"),
        "relationship": relationship(store, NS, int(stated)),
    }


def test_the_preview_of_an_episode_names_exactly_what_its_purge_erases(store: Any, world: dict[str, int]) -> None:
    before_digest = digest(store)
    preview = episodes.purge_preview(store, world["episode"])
    assert digest(store) == before_digest, "a preview must change nothing"

    assert preview.kind == "episode" and preview.id == world["episode"] and preview.namespace == NS
    assert "red notebook" in preview.record.text
    assert preview.ids["episode"] == [world["episode"]]
    assert set(preview.ids["fact"]) == {world[k] for k in ("stated", "derived", "two_sources", "elsewhere")}
    assert preview.ids["dead_letter"] == [world["letter"]]
    assert preview.ids["relationship"] == [world["relationship"]]
    assert [r.text for r in preview.rows["relationship"]] == ["Rosa · keeps · vault codes"]
    assert "entity" in preview.ids  # Rosa: nothing names her once her fact goes
    texts = {row.id: row.text for row in preview.rows["fact"]}
    assert texts[world["derived"]] == "The vault codes are written down"

    before = ids(store)
    report = episodes.purge(store, world["episode"])
    after = ids(store)
    gone = {kind: sorted(before[kind] - after[kind]) for kind in before if before[kind] - after[kind]}
    assert gone == preview.ids
    assert all(len(preview.ids[kind]) == n for kind, n in report.erased.erased.items())
    assert world["survivor"] in after["fact"] and world["other_episode"] in after["episode"]


def test_the_preview_names_only_rows_inside_the_callers_trees(store: Any, world: dict[str, int]) -> None:
    preview = episodes.purge_preview(store, world["episode"], [NS])
    assert world["elsewhere"] not in preview.ids["fact"]
    assert all(row.namespace == NS for rows in preview.rows.values() for row in rows)
    before = ids(store)
    episodes.purge(store, world["episode"], [NS])
    assert world["elsewhere"] in before["fact"] - ids(store)["fact"], "the purge still erases it"
    with pytest.raises(errors.RecordNotFound):
        episodes.purge_preview(store, world["other_episode"], [ELSEWHERE])


def test_the_preview_of_a_fact_and_of_an_entity_match_their_purges(store: Any, world: dict[str, int]) -> None:
    before_digest = digest(store)
    fact_preview = facts.purge_preview(store, world["stated"])
    with store.db.transaction() as tx:
        entity_id = int(tx.conn.execute("SELECT entity_id FROM facts WHERE id = %s", (world["stated"],)).fetchone()[
            "entity_id"])
    entity_preview = entities.purge_preview(store, entity_id)
    assert digest(store) == before_digest
    assert set(fact_preview.ids["fact"]) == {world["stated"], world["derived"]}
    assert entity_preview.ids["entity"] == [entity_id] and entity_preview.record.text == "Rosa"
    assert set(entity_preview.ids["fact"]) == {world["stated"], world["derived"]}

    before = ids(store)
    entities.purge_entity(store, entity_id)
    after = ids(store)
    assert {k: sorted(before[k] - after[k]) for k in before if before[k] - after[k]} == entity_preview.ids
