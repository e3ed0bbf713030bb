"""Guarantees that hold for every derived kind, drawn from the stage table.

One world is built once — every stage of ``STAGES`` run until caught up over a corpus
that exercises each, with the scripted model and the real MiniLM embedder — and cloned
(``CREATE DATABASE … TEMPLATE``) for each check. The kinds checked are every stage's
``outputs`` and those the tools derive (``TOOL_OUTPUTS``); of each kind one row is taken
(of facts, one per origin), and:

* erasure — purging the row's nearest purgeable source, and its root episode, deletes
  everything derived from that source (lineage and references, computed here on their
  own), with their lineage edges, end history and cached vectors, and every word they
  held that nothing else holds, from every table, every read and the export;
* retirement — withdrawing or forgetting that source leaves, before the next read, no
  current derived row without a live source and no current gathering (a derived fact
  that lists facts as its members) with a retired member; the next run catches up;
* identity — merging and splitting entities leaves no current gathering listing a fact of
  another entity, and asks the stages to gather again.

A stage added to ``STAGES`` is checked with no edit here; if the world does not exercise
it, ``test_the_world_exercises_every_stage_output`` says so.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from stash_pipeline import errors, recall
from stash_pipeline.config import load_settings
from stash_pipeline.consolidation import runner
from stash_pipeline.consolidation.reasoner import reset_mode_cache
from stash_pipeline.db import catalog
from stash_pipeline.interchange.export import export_tree
from stash_pipeline.memory import entities, episodes, facts
from stash_pipeline.stages import STAGES
from stash_pipeline.store import Store
from testkit.openai_server import ScriptedOpenAI
from testkit.scripted_model import ScriptedModel
from tests.conftest import _with_db
from tests.reliability.conftest import WORKER_SETTINGS, prepare, seed, until_caught_up

pytestmark = pytest.mark.reliability

NS = "/g"
#: episodes that give an entity several facts on one aspect (the profiles stage gathers
#: them), some under a longer name that entity resolution takes for the same person
GATHERED = [
    "Evan took up watercolour painting as a hobby in his free time",
    "Evan goes kayaking for fun at weekends",
    "Evan's pastime is playing chess at the club in the evenings",
    "Evan Lee took up skydiving as a hobby on his holidays",
    "Evan Lee enjoys rock climbing for fun on Sundays",
]
#: derived kinds the tools write (not a stage): a confirmed hypothesis becomes a fact
TOOL_OUTPUTS = ("fact",)
#: what a purge can be asked to erase, nearest first
PURGEABLE = ("fact", "episode")


# -- the world ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def world_server() -> Iterator[ScriptedOpenAI]:
    reset_mode_cache()
    with ScriptedOpenAI(ScriptedModel(timeout_s=1.5)) as server:
        yield server
    reset_mode_cache()


@pytest.fixture(scope="module")
def world_settings(world_server: ScriptedOpenAI, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return {**WORKER_SETTINGS, "embedder": "minilm-int8", "openai_base_url": world_server.base_url,
            "home": tmp_path_factory.mktemp("world-home")}


@contextlib.contextmanager
def copy_of(admin_dsn: str, template: str, prefix: str) -> Iterator[str]:
    """A new database made from ``template`` (its name), dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        yield name
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def world_db(pg_admin_dsn: str, template_db: str, world_settings: dict[str, Any]) -> Iterator[str]:
    """A database holding the world, every stage caught up; a template for the clones."""
    with copy_of(pg_admin_dsn, template_db, "stash_world") as name:
        store = Store.open(load_settings(database_url=_with_db(pg_admin_dsn, name), **world_settings))
        try:
            prepare(store, NS)
            for text in GATHERED:
                episodes.remember(store, NS, text)
            until_caught_up(store, NS)
        finally:
            store.close()
        yield name


@contextlib.contextmanager
def clone(admin_dsn: str, world: str, settings: dict[str, Any]) -> Iterator[Store]:
    """A store on a fresh copy of the world, dropped afterwards."""
    with copy_of(admin_dsn, world, "stash_clone") as name:
        store = Store.open(load_settings(database_url=_with_db(admin_dsn, name), **settings))
        try:
            yield store
        finally:
            store.close()


@pytest.fixture
def world(pg_admin_dsn: str, world_db: str, world_settings: dict[str, Any]) -> Iterator[Store]:
    with clone(pg_admin_dsn, world_db, world_settings) as store:
        yield store


def sql(store: Store, statement: Any, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    with psycopg.connect(store.settings.database_url, row_factory=dict_row) as conn:
        return conn.execute(statement, params).fetchall()


# -- what the stage table says is derived ------------------------------------------------------
def derived_kinds() -> list[str]:
    """Every lineage kind a stage or a tool derives."""
    return sorted({kind for spec in STAGES for kind in spec.outputs} | set(TOOL_OUTPUTS))


def samples(store: Store) -> list[tuple[str, int, str]]:
    """One derived row per kind (per origin, for facts), as (kind, id, label)."""
    out = []
    for kind in derived_kinds():
        table = catalog.BY_KIND[kind].name
        child = sql(store, "SELECT DISTINCT child_id FROM lineage WHERE child_kind = %(k)s", {"k": kind})
        ids = [int(r["child_id"]) for r in child]
        if kind == "fact":
            for row in sql(store, "SELECT origin, min(id) AS id FROM facts WHERE id = ANY(%(ids)s) GROUP BY origin",
                           {"ids": ids}):
                out.append((kind, int(row["id"]), f"fact:{row['origin']}"))
        elif ids:
            [row] = sql(store, f"SELECT min(id) AS id FROM {table} WHERE id = ANY(%(ids)s)", {"ids": ids})
            out.append((kind, int(row["id"]), kind))
    return out


def ancestors(store: Store, kind: str, ident: int) -> list[tuple[int, str, int]]:
    """Every lineage ancestor of a row as (distance, kind, id), nearest first."""
    found: list[tuple[int, str, int]] = []
    frontier, seen, depth = [(kind, ident)], {(kind, ident)}, 0
    while frontier:
        depth += 1
        nxt = []
        for k, i in frontier:
            for row in sql(store, "SELECT parent_kind, parent_id FROM lineage WHERE child_kind = %(k)s"
                                  " AND child_id = %(i)s ORDER BY parent_kind, parent_id", {"k": k, "i": i}):
                node = (row["parent_kind"], int(row["parent_id"]))
                if node not in seen:
                    seen.add(node)
                    nxt.append(node)
                    found.append((depth, *node))
        frontier = nxt
    return found


def sources(store: Store, kind: str, ident: int) -> dict[str, tuple[str, int]]:
    """What to purge for a row: itself, its nearest purgeable source, its farthest episode
    (those it has: a fact a confirmed hypothesis wrote has only itself)."""
    found = [a for a in ancestors(store, kind, ident) if a[1] in PURGEABLE]
    out = {"own": (kind, ident)} if kind in PURGEABLE else {}
    if found:
        out["nearest"] = found[0][1:]
        out["root"] = max((a for a in found if a[1] == "episode"), key=lambda a: a[0], default=found[-1])[1:]
    assert out, f"nothing can purge {kind} {ident}: it has no purgeable source in its lineage"
    return out


# -- the closure, computed here from lineage and the catalog's references -----------------------
def closure(store: Store, *roots: tuple[str, int]) -> set[tuple[str, int]]:
    """The roots and every row derived from them: lineage children and rows whose required
    reference points at a row already in, to a fixpoint; then the entities only they name."""
    refs = [(t, column, ref.kind) for t in catalog.TABLES if t.has_id
            for column, ref in t.refs.items() if ref.kind and not ref.nullable]
    found, frontier = set(roots), list(roots)
    while frontier:
        nxt: set[tuple[str, int]] = set()
        by_kind: dict[str, list[int]] = defaultdict(list)
        for k, i in frontier:
            by_kind[k].append(i)
        for k, ids in by_kind.items():
            for row in sql(store, "SELECT child_kind, child_id FROM lineage WHERE parent_kind = %(k)s"
                                  " AND parent_id = ANY(%(ids)s)", {"k": k, "ids": ids}):
                nxt.add((row["child_kind"], int(row["child_id"])))
            for table, column, target in refs:
                if target == k:
                    for row in sql(store, f"SELECT id FROM {table.name} WHERE {column} = ANY(%(ids)s)", {"ids": ids}):
                        nxt.add((table.kind, int(row["id"])))
        frontier = [n for n in nxt if n not in found]
        found |= nxt
    return found | orphaned_entities(store, found)


def orphaned_entities(store: Store, gone: set[tuple[str, int]]) -> set[tuple[str, int]]:
    """Entities the rows in ``gone`` name that nothing outside ``gone`` names."""
    fact_ids = [i for k, i in gone if k == "fact"]
    rel_ids = [i for k, i in gone if k == "relationship"]
    rows = sql(store, """
        SELECT e.id FROM entities e
         WHERE (e.id IN (SELECT entity_id FROM facts WHERE id = ANY(%(f)s))
                OR e.id IN (SELECT from_entity_id FROM relationships WHERE id = ANY(%(r)s))
                OR e.id IN (SELECT to_entity_id FROM relationships WHERE id = ANY(%(r)s)))
           AND NOT EXISTS (SELECT 1 FROM facts x WHERE x.entity_id = e.id AND x.id <> ALL(%(f)s))
           AND NOT EXISTS (SELECT 1 FROM relationships x WHERE (x.from_entity_id = e.id OR x.to_entity_id = e.id)
                            AND x.id <> ALL(%(r)s))
           AND NOT EXISTS (SELECT 1 FROM entity_corrections c WHERE e.id IN (c.entity_id, c.other_entity_id))
           AND NOT EXISTS (SELECT 1 FROM entities m WHERE m.merged_into = e.id) AND e.merged_into IS NULL""",
               {"f": fact_ids, "r": rel_ids})
    return {("entity", int(r["id"])) for r in rows}


# -- words --------------------------------------------------------------------------------------
_WORD = re.compile(r"[a-z0-9]+")


def shingles(text: str) -> set[str]:
    """A text's runs of four words (the whole text when shorter), lower case."""
    words = _WORD.findall(text.lower())
    if len(words) < 4:
        return {" ".join(words)} if words else set()
    return {" ".join(words[i:i + 4]) for i in range(len(words) - 3)}


def _text_columns(table: catalog.Table) -> list[str]:
    return table.text.split() + table.json.split() + ([table.embedded] if table.embedded else [])


def stored_texts(store: Store) -> list[tuple[tuple[str, int | None], str]]:
    """The free text of every stored row as ((kind, id), text): every catalog table's text,
    JSON and embedded columns, and the other tables that hold text (dead letters' errors,
    model calls' errors, the full-text statistics' lexemes)."""
    out: list[tuple[tuple[str, int | None], str]] = []
    for table in catalog.TABLES:
        columns = _text_columns(table)
        if not columns:
            continue
        key = "id" if table.has_id else "NULL::bigint"
        cells = ", ".join(f"{c}::text AS {c}" for c in columns)
        for row in sql(store, f"SELECT {key} AS _id, {cells} FROM {table.name}"):
            out += [((table.kind, row["_id"]), str(v)) for c, v in row.items() if c != "_id" and v is not None]
    for table, column in (("dead_letters", "last_error"), ("model_calls", "error"), ("recall_term_stats", "lexeme")):
        found = sql(store, f"SELECT {column} AS t FROM {table} WHERE {column} IS NOT NULL")
        out += [((table, None), r["t"]) for r in found]
    return out


def words_of(texts: list[str]) -> set[str]:
    return set().union(*(shingles(t) for t in texts))


def strings(value: Any) -> list[str]:
    """Every string in a JSON value (keys aside), so no shingle spans two fields."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return [value] if isinstance(value, str) else []


# -- erasure ------------------------------------------------------------------------------------
def erasure_problems(store: Store, root: tuple[str, int], tmp: Path, erase: Any = None,
                     also: tuple[tuple[str, int], ...] = ()) -> list[str]:
    """Purge ``root`` (or call ``erase``, which must erase it and ``also``); what of the rows
    derived from them is still there."""
    gone = closure(store, root, *also)
    stored = stored_texts(store)
    # the words only the rows derived from the root hold: nothing may hold them afterwards
    words = words_of([t for node, t in stored if node in gone]) - words_of([t for node, t in stored if node not in gone])
    embedded = [t for (k, i), t in stored if (k, i) in gone and k in catalog.BY_KIND and catalog.BY_KIND[k].embedded]
    lexemes = _lexemes(store, gone)
    before = sql(store, "SELECT now() AS t")[0]["t"]
    kind, ident = root
    if erase is not None:
        erase()
    else:
        (episodes.purge if kind == "episode" else facts.purge)(store, ident, [NS])
    problems = []
    for k, i in sorted(gone):
        if sql(store, f"SELECT 1 FROM {catalog.BY_KIND[k].name} WHERE id = %(i)s", {"i": i}):
            problems.append(f"{k} {i} still stored")
        if sql(store, "SELECT 1 FROM lineage WHERE (child_kind = %(k)s AND child_id = %(i)s)"
                      " OR (parent_kind = %(k)s AND parent_id = %(i)s)", {"k": k, "i": i}):
            problems.append(f"{k} {i} still in lineage")
    for table in catalog.TABLES:
        if not table.has_id:
            for column, ref in table.refs.items():
                ids = [i for k, i in gone if k == ref.kind]
                if ref.kind and ids and sql(store, f"SELECT 1 FROM {table.name} WHERE {column} = ANY(%(ids)s)",
                                            {"ids": ids}):
                    problems.append(f"{table.name} still names an erased {ref.kind} in {column}")
    after = stored_texts(store)
    problems += [f"stored text still holds {w!r}" for w in sorted(words & words_of([t for _, t in after]))]
    kept = {r["lexeme"] for r in sql(store, "SELECT lexeme FROM recall_term_stats WHERE lexeme = ANY(%(l)s)",
                                     {"l": sorted(lexemes)})}
    problems += [f"the full-text statistics still hold the lexeme {w!r}" for w in sorted(kept)]
    export_tree(store, NS, tmp / "export.jsonl", force=True)
    lines = (tmp / "export.jsonl").read_text(encoding="utf-8").splitlines()
    exported = words_of([s for line in lines for s in strings(json.loads(line))])
    problems += [f"the export still holds {w!r}" for w in sorted(words & exported)]
    question = " ".join(sorted(words))[:500] or "anything"
    reads = [
        facts.query(store, [NS], include_history=True, limit=1000),
        facts.query(store, [NS], known_at=before, include_history=True, limit=1000),
        recall.recall(store, question, [NS], limit=50, known_at=before),
        recall.recall(store, question, [NS], limit=50, include_history=True),
    ]
    read = words_of(strings(json.loads(json.dumps(
        reads, default=lambda v: v.model_dump(mode="json") if hasattr(v, "model_dump") else str(v)))))
    problems += [f"a read still returns {w!r}" for w in sorted(words & read)]
    for k, i in gone:
        if k == "fact":
            with contextlib.suppress(errors.RecordNotFound):
                facts.get(store, i)
                problems.append(f"get_fact {i} still answers")
    still = {t for _, t in after}
    for text in embedded:
        cached = sql(store, "SELECT 1 FROM embedding_cache"
                            " WHERE text_hash = encode(sha256(convert_to(%(t)s, 'UTF8')), 'hex')", {"t": text})
        if cached and text not in still:
            problems.append(f"the vector of an erased text is still cached: {text[:60]!r}")
    return problems


def _lexemes(store: Store, gone: set[tuple[str, int]]) -> set[str]:
    """The full-text lexemes of the episodes and facts in ``gone`` that no other one holds."""
    def of(kind: str, ids: list[int], inside: bool) -> set[str]:
        table = catalog.BY_KIND[kind].name
        where = "id = ANY(%(ids)s)" if inside else "id <> ALL(%(ids)s)"
        rows = sql(store, f"SELECT DISTINCT unnest(tsvector_to_array(search)) AS l FROM {table} WHERE {where}",
                   {"ids": ids})
        return {r["l"] for r in rows}

    mine: set[str] = set()
    others: set[str] = set()
    for kind in ("episode", "fact"):
        ids = [i for k, i in gone if k == kind]
        mine |= of(kind, ids, True)
        others |= of(kind, ids, False)
    return mine - others


def test_the_world_exercises_every_stage_output(world):
    """Every kind a stage derives has rows here (else the checks below would pass vacuously)."""
    present = {k for k, _, _ in samples(world)}
    missing = [f"{spec.name}: {kind}" for spec in STAGES for kind in spec.outputs if kind not in present]
    assert not missing, f"the world derives none of {missing}; extend the corpus in prepare()/GATHERED"
    origins = {label for _, _, label in samples(world)}
    assert {"fact:synthesis", "fact:profile", "fact:failure_pattern", "fact:hypothesis"} <= origins, origins
    assert all(not r["has_work"] for r in runner.status(world, NS))


def test_erasure_holds_for_every_derived_kind(pg_admin_dsn, world_db, world_settings, world, tmp_path):
    """Purging a derived row, its nearest source or its root episode leaves nothing of what
    was derived from it anywhere (each distinct purge in a fresh clone of the world)."""
    purges: dict[tuple[str, int], list[str]] = defaultdict(list)
    for kind, ident, label in samples(world):
        for which, source in sources(world, kind, ident).items():
            purges[source].append(f"{label} ({which})")
    problems = {}
    for source, why in purges.items():
        with clone(pg_admin_dsn, world_db, world_settings) as store:
            found = erasure_problems(store, source, tmp_path)
        if found:
            problems[f"purge {source[0]} {source[1]}, for {', '.join(why)}"] = found[:5]
    assert not problems, json.dumps(problems, indent=1)


def test_deleting_a_tree_erases_what_was_derived_from_it_elsewhere(world, tmp_path):
    """A fact of the parent resting on a child's turn goes with the child's tree."""
    from stash_pipeline.memory import namespaces

    [turn] = seed(world, f"{NS}/gone", ["Quentin keeps the spare keys to the Lisbon office in a blue tin"])
    facts.assert_fact(world, NS, "Quentin keeps the Lisbon office keys in a blue tin", entity="Quentin",
                      property="keeps", value="keys", source_episode_ids=[turn])
    problems = erasure_problems(world, ("episode", turn), tmp_path,
                                erase=lambda: namespaces.delete(world, f"{NS}/gone", confirm=True))
    assert not problems, problems
    assert not [t for _, t in stored_texts(world) if "Quentin" in t or "quentin" in t]


def test_purging_an_entity_erases_everything_about_it(world, tmp_path):
    """An entity with a profile and relationships: its facts, its links, what was derived
    from them and its names go; the episodes that mention it stay."""
    [row] = sql(world, "SELECT f.entity_id FROM facts f WHERE f.origin = 'profile' ORDER BY f.id LIMIT 1")
    entity = int(row["entity_id"])
    members = [int(r["id"]) for r in sql(world, "SELECT id FROM entities WHERE id = %(e)s OR merged_into = %(e)s",
                                          {"e": entity})]
    about = sql(world, "SELECT 'fact' AS kind, id FROM facts WHERE entity_id = ANY(%(m)s) UNION ALL"
                       " SELECT 'relationship', id FROM relationships"
                       " WHERE from_entity_id = ANY(%(m)s) OR to_entity_id = ANY(%(m)s)", {"m": members})
    roots = tuple((r["kind"], int(r["id"])) for r in about) + tuple(("entity", m) for m in members)
    episodes_before = sql(world, "SELECT count(*) AS n FROM episodes")
    problems = erasure_problems(world, roots[0], tmp_path, also=roots[1:],
                                erase=lambda: entities.purge_entity(world, entity, [NS]))
    assert not problems, problems
    assert sql(world, "SELECT count(*) AS n FROM episodes") == episodes_before
    assert not sql(world, "SELECT 1 FROM entity_aliases WHERE entity_id = ANY(%(m)s)", {"m": members})


# -- retirement and identity ----------------------------------------------------------------------
#: a row is live while not withdrawn (and, for an episode, not forgotten; for a fact, valid now)
_LIVE = {
    "episode": "deleted_at IS NULL",
    "fact": "withdrawn_at IS NULL AND valid_from <= now() AND (valid_until IS NULL OR valid_until > now())",
    "relationship": "withdrawn_at IS NULL",
    "causal_link": "withdrawn_at IS NULL AND deleted_at IS NULL",
    "pattern": "withdrawn_at IS NULL",
    "failure": "deleted_at IS NULL",
    "hypothesis": "deleted_at IS NULL",
}


def live(store: Store, kind: str) -> set[int]:
    """Ids of the live rows of a kind (every row, for kinds that are history and never retire)."""
    where = _LIVE.get(kind, "true")
    return {int(r["id"]) for r in sql(store, f"SELECT id FROM {catalog.BY_KIND[kind].name} WHERE {where}")}


def retirement_problems(store: Store) -> list[str]:
    """Current derived rows that rest on what is retired: one whose every source is retired;
    a gathering (a derived fact listing facts) with a retired member or a member of another
    entity; a row whose required reference points at a retired row."""
    alive = {kind: live(store, kind) for kind in _LIVE}
    parents: dict[tuple[str, int], list[tuple[str, int]]] = defaultdict(list)
    for row in sql(store, "SELECT child_kind, child_id, parent_kind, parent_id FROM lineage"):
        parents[(row["child_kind"], int(row["child_id"]))].append((row["parent_kind"], int(row["parent_id"])))

    def is_live(node: tuple[str, int]) -> bool:
        return node[1] in alive[node[0]] if node[0] in alive else True

    entity_of = {int(r["id"]): r["entity_id"] for r in sql(store, "SELECT id, entity_id FROM facts")}
    problems = []
    for child, sources_ in sorted(parents.items()):
        if child[0] not in _LIVE or not is_live(child):
            continue
        if not any(is_live(p) for p in sources_):
            problems.append(f"current {child[0]} {child[1]} has no live source")
        members = [p for p in sources_ if p[0] == "fact"]
        if child[0] == "fact" and members:
            if not all(is_live(m) for m in members):
                problems.append(f"current fact {child[1]} gathers a retired fact")
            if any(entity_of.get(m[1]) != entity_of.get(child[1]) for m in members):
                problems.append(f"current fact {child[1]} gathers a fact of another entity")
    for table in catalog.TABLES:
        if table.kind not in _LIVE or not table.has_id:
            continue
        for column, ref in table.refs.items():
            if ref.kind in _LIVE and not ref.nullable:
                for row in sql(store, f"SELECT id, {column} AS ref FROM {table.name} WHERE {_LIVE[table.kind]}"
                                      f" AND {column} IS NOT NULL"):
                    if int(row["ref"]) not in alive[ref.kind]:
                        problems.append(f"current {table.kind} {row['id']} points at retired {ref.kind} {row['ref']}")
    return problems


def retire(store: Store, source: tuple[str, int]) -> None:
    kind, ident = source
    if kind == "fact":
        facts.withdraw(store, ident, "the guarantees suite retires it", [NS])
    else:
        [row] = sql(store, "SELECT content FROM episodes WHERE id = %(i)s", {"i": ident})
        assert episodes.forget(store, row["content"], [NS], threshold=0.999).episode_id == ident


def test_retirement_holds_for_every_derived_kind(pg_admin_dsn, world_db, world_settings, world):
    """Withdrawing or forgetting a derived row's sources retires what rests on them before
    the next read, and the next runs catch up from what remains."""
    assert retirement_problems(world) == []
    retirements: dict[tuple[str, int], list[str]] = defaultdict(list)
    for kind, ident, label in samples(world):
        for which, source in sources(world, kind, ident).items():
            retirements[source].append(f"{label} ({which})")
    problems = {}
    for source, why in retirements.items():
        with clone(pg_admin_dsn, world_db, world_settings) as store:
            retire(store, source)
            found = [f"before a run: {p}" for p in retirement_problems(store)]
            until_caught_up(store, NS)
            found += [f"after the runs: {p}" for p in retirement_problems(store)]
        if found:
            problems[f"retire {source[0]} {source[1]}, for {', '.join(why)}"] = found[:5]
    assert not problems, json.dumps(problems, indent=1)


def test_identity_holds_across_split_and_merge(world):
    """Splitting a name off an entity whose gathering lists facts under both names, then
    merging it back, leaves no current row gathering facts of another entity, before a run
    and after the runs catch up."""
    mixed = sql(world, """
        SELECT f.entity_id, array_agg(DISTINCT m.entity) AS names
          FROM facts f
          JOIN lineage l ON l.child_kind = 'fact' AND l.child_id = f.id AND l.parent_kind = 'fact'
          JOIN facts m ON m.id = l.parent_id
         WHERE f.withdrawn_at IS NULL
         GROUP BY f.entity_id HAVING count(DISTINCT m.entity) > 1 ORDER BY f.entity_id LIMIT 1""")
    assert mixed, "the world has no gathering over two names of one entity"
    keep, names = int(mixed[0]["entity_id"]), sorted(mixed[0]["names"], key=len)
    moved = entities.split_entity(world, keep, [names[-1]], namespaces=[NS])
    assert retirement_problems(world) == [], "after the split, before a run"
    until_caught_up(world, NS)
    assert retirement_problems(world) == [], "after the split and the runs"
    entities.merge_entities(world, keep, int(moved.new_id), namespaces=[NS])
    assert retirement_problems(world) == [], "after the merge, before a run"
    until_caught_up(world, NS)
    assert retirement_problems(world) == [], "after the merge and the runs"


# -- scope ----------------------------------------------------------------------------------------
CHILD = f"{NS}/c"
#: arguments a tool may require besides ids, acting on the child tree
_FILL = {"query": "anything", "about": "anything", "namespace": CHILD, "namespaces": CHILD, "reason": "checking",
         "content": "checking", "focus": "checking", "resolution": "keep_new", "aliases": ["checking"],
         "verification_plan": "checking", "lesson": "checking"}


def tree_rows(store: Store, slug: str) -> dict[str, set[int]]:
    """Ids of every row of the tree ``slug`` (it and its descendants only), per kind."""
    out: dict[str, set[int]] = {}
    for table in catalog.TABLES:
        if table.has_id and table.name != "namespaces":
            found = sql(store, f"SELECT t.id FROM {table.name} t JOIN namespaces n ON n.id = t.namespace_id"
                               " WHERE n.slug = %(s)s OR n.slug LIKE %(below)s", {"s": slug, "below": slug + "/%"})
            out[table.kind] = {int(r["id"]) for r in found}
    return out


#: tools not called with the child's own scope alone (they would delete or consolidate it mid-check)
_NOT_BY_SCOPE = ("delete_namespace", "forget", "purge_episode", "purge_fact", "consolidate")


def tree_checksum(store: Store) -> dict[str, str]:
    """An md5 per table over the rows of the parent namespace itself (not its child)."""
    out = {}
    for table in catalog.TABLES:
        if table.name != "namespaces":
            [row] = sql(store, f"SELECT md5(COALESCE(string_agg(t::text, '|' ORDER BY t::text), '')) AS h"
                               f" FROM {table.name} t JOIN namespaces n ON n.id = t.namespace_id WHERE n.slug = %(s)s",
                        {"s": NS})
            out[table.name] = row["h"]
    return out


def answer_ids(value: Any, key: str = "") -> set[int]:
    """Every integer under an id-like key (``id``, ``*_id``, ``*_ids``) of a JSON value."""
    if isinstance(value, dict):
        return set().union(set(), *(answer_ids(v, k) for k, v in value.items()))
    if isinstance(value, list):
        return set().union(set(), *(answer_ids(v, key) for v in value))
    is_id = key == "id" or key.endswith(("_id", "_ids")) or key in ("parents", "children", "sources")
    return {value} if is_id and isinstance(value, int) and not isinstance(value, bool) else set()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_subtree_token_reaches_nothing_of_the_tree_above(pg_admin_dsn, world_db, world_settings,
                                                                 anyio_backend):
    """A token for a child tree, calling every tool with every id of the parent's rows and
    with its own scope, gets no record, id or word of the parent's memory — derived kinds
    included — and changes nothing there."""
    with clone(pg_admin_dsn, world_db, {**world_settings, "toolsets": "all"}) as world:
        await _check_scope(world)


async def _check_scope(world: Store) -> None:
    from stash_pipeline import auth
    from tests.mcp.asgi import served, session
    from tests.reliability.conftest import corpus

    seed(world, CHILD, corpus(8, seed_value=11))
    until_caught_up(world, CHILD)
    token = auth.create_token(world, [CHILD], ["read", "write"], "child")["token"]
    parent, child = tree_rows(world, NS), tree_rows(world, CHILD)
    child_ids = set().union(*child.values())
    parent_only = {k: ids - set().union(*(child[c] for c in child)) for k, ids in parent.items()}
    probe_ids = sorted(set().union(*parent_only.values()) - child_ids)
    stored = stored_texts(world)
    parent_nodes = {(k, i) for k, ids in parent_only.items() for i in ids}
    words = words_of([t for n, t in stored if n in parent_nodes]) - words_of(
        [t for n, t in stored if n not in parent_nodes])
    assert words and probe_ids
    before = tree_checksum(world)
    problems: list[str] = []
    reached = 0
    async with served(world) as app, session(app, token) as client:
        tools = (await client.list_tools()).tools
        by_id, by_scope = [], []
        for tool in tools:
            props = tool.input_schema.get("properties", {})
            id_fields = [p for p, spec in props.items() if "Record id" in str(spec.get("description", ""))
                         or p == "id" or p.endswith("_id")]
            base = {p: value for p, value in _FILL.items() if p in props}
            by_id += [(tool.name, {**base, **dict.fromkeys(id_fields, value)}) for value in probe_ids if id_fields]
            if not id_fields and tool.name not in _NOT_BY_SCOPE:
                by_scope.append((tool.name, base))
                if "namespaces" in props:  # the token's own default scope
                    by_scope.append((tool.name, {k: v for k, v in base.items() if k != "namespaces"}))
        # every parent id first (nothing is written yet, so no new child row can share one)
        for name, arguments in by_id + by_scope:
            result = await client.call_tool(name, arguments)
            text = result.content[0].text if result.content else ""
            try:
                body = json.loads(text)
            except ValueError:
                body = text
            # a parent's id is one that does not exist (a filter by it finds nothing)
            if (name, arguments) in by_id and isinstance(body, dict) and body.get("error") == "record_not_found":
                reached += 1
            leaked = words & words_of(strings(body))
            if leaked:
                problems.append(f"{name}({arguments}) returned the parent's words {sorted(leaked)[:2]}")
            ids = answer_ids(body) & set(probe_ids)
            if ids and not result.is_error:
                ids -= set().union(*tree_rows(world, CHILD).values())  # rows the child wrote meanwhile
                if ids:
                    problems.append(f"{name}({arguments}) returned the parent's ids {sorted(ids)[:5]}")
    assert not problems, "\n".join(problems[:20])
    assert reached >= len(probe_ids), f"only {reached} calls reached a parent's id and were told it does not exist"
    assert tree_checksum(world) == before, "a call with the child's token changed the parent's rows"
