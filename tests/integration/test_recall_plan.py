"""The recall statement reads facts and episodes through indexes only, at a moderate size.

A few thousand rows is where the planner, left alone, reads the whole facts table and
sorts it instead of asking the HNSW index (measured at 2,000 facts). Both plans recall
can run are checked: the custom plan of a statement's first executions on a connection
(planned with the values) and the generic plan it switches to once the client prepares it.
The statement carries the entity leg too, so relationships and aliases are checked as
well, and the visibility functions (migrations 0012, 0013) must be inlined: their names
never appear in a plan, which is then the predicate written out, with the same index use.
The graph and entity reads call the same functions and are checked the same way.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from stash_pipeline import recall
from stash_pipeline.db.gateway import Database
from stash_pipeline.db.sql import query
from stash_pipeline.memory import episodes, facts, namespaces
from stash_pipeline.recall.config import DEFAULT

TOPICS = ("deploy", "invoice", "standup", "kafka", "postgres", "vpn", "lunch", "retro")


def recall_parameters(store: Any, text: str, **options: Any) -> dict[str, Any]:
    """The parameters recall sends to the recall statement for ``text`` (captured by a spy)."""
    captured: dict[str, Any] = {}
    original = Database.pipelined

    def spy(self: Database, *statements: tuple[str, Any], **options: Any) -> list[list[dict[str, Any]]]:
        captured.update(dict(statements).get("recall", {}))
        return original(self, *statements, **options)

    Database.pipelined = spy  # type: ignore[method-assign]
    try:
        recall.recall(store, text, options.pop("namespaces", ["/"]), **options)
    finally:
        Database.pipelined = original  # type: ignore[method-assign]
    return captured


def with_numbered_parameters(sql: str) -> str:
    """``%(name)s`` placeholders as ``$1, $2 ...`` (what PREPARE takes)."""
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in order:
            order.append(match.group(1))
        return f"${order.index(match.group(1)) + 1}"

    return re.sub(r"%\((\w+)\)s", number, sql).replace("%%", "%")


def plan(store: Any, params: dict[str, Any] | None, name: str = "recall", *, settings: bool = True,
         verbose: bool = False) -> str:
    """The plan a statement gets (under recall's own settings): custom (with values) or generic;
    ``verbose`` shows each node's output columns too (where a function in the select list would be)."""
    options = "COSTS OFF, VERBOSE" if verbose else "COSTS OFF"
    with store.db.transaction() as tx:
        if settings:
            tx.one("recall_search_params", ef_search=str(DEFAULT.ef_search))
        if params is None:
            # the generic plan as a prepared statement gets it (EXPLAIN (GENERIC_PLAN) would
            # say the same, but PostgreSQL 15 has no such option)
            numbered = with_numbered_parameters(query(name))
            count = max((int(n) for n in re.findall(r"\$(\d+)", numbered)), default=0)
            tx.conn.execute("PREPARE plan_test AS " + numbered)
            tx.conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            nulls = f"({', '.join(['NULL'] * count)})" if count else ""
            rows = tx.conn.execute(f"EXPLAIN ({options}) EXECUTE plan_test{nulls}").fetchall()
            tx.conn.execute("DEALLOCATE plan_test")
        else:
            rows = tx.conn.execute(f"EXPLAIN ({options}) " + query(name), params).fetchall()
        return "\n".join(next(iter(r.values())) for r in rows)


VISIBILITY = ("fact_visible", "fact_valid_until", "episode_visible", "relationship_visible")


def whole_index_walks(text: str) -> list[str]:
    """Index scans of the big tables with no condition and no ordering operand: a walk of
    the whole index (how the planner avoids a sort when sorts are off)."""
    walks = []
    nodes = re.split(r"\n(?=\s*->)", text)
    for node in nodes:
        first = node.strip().splitlines()[0]
        if re.search(r"Index (Only )?Scan( Backward)? using \w+ on (facts|episodes|relationships|entity_aliases)\b",
                     first) and "Index Cond" not in node and "Order By" not in node:
            walks.append(first)
    return walks


def namespace_ors(text: str) -> list[str]:
    """The text leg's reads (facts and episodes by their word index, the term and length
    statistics) and the entity leg's alias lookup that test the namespace as "all
    namespaces OR in scope": under a generic plan such a test cannot use a namespace index,
    so a scoped recall fetches every row matching a query word (or every alias named by a
    phrase) in any namespace and tests it."""
    found = []
    for node in re.split(r"\n(?=\s*->)", text):
        first = node.strip().splitlines()[0]
        if (re.search(r"Bitmap Heap Scan on (facts|episodes)\b|on recall_(term|text)_stats\b|on entity_aliases\b", first)
                and re.search(r"\$\d+ OR \(namespace_id", node)):
            found.append(node.strip())
    return found


def test_recall_reads_facts_and_episodes_by_index_only(store):
    namespaces.create(store, "/plan/a")
    namespaces.create(store, "/plan/b")
    for slug in ("/plan/a", "/plan/b"):
        items = [{"content": f"{TOPICS[i % len(TOPICS)]} note {i} from {slug}: step {i % 37} of item {i}"}
                 for i in range(1500)]
        for start in range(0, len(items), 500):
            episodes.remember_batch(store, slug, items[start:start + 500])
        for i in range(250):
            facts.assert_fact(store, slug, f"{TOPICS[i % len(TOPICS)]} owner {i} is person {i % 13}",
                              entity=f"service-{i}", property="owner", value=f"person {i % 13}")
    with store.db.transaction() as tx:
        tx.conn.execute("ANALYZE episodes")
        tx.conn.execute("ANALYZE facts")
    queries = {
        "common words": recall_parameters(store, "what was the deploy step", namespaces=["/"]),
        "identifier": recall_parameters(store, "item 1234", namespaces=["/plan/a"]),
        "several namespaces": recall_parameters(store, "kafka owner", namespaces=["/plan/a", "/plan/b"]),
        "as_of": recall_parameters(store, "vpn owner", as_of=datetime.now(UTC)),
        "include_history": recall_parameters(store, "lunch note", include_history=True),
        "known_at, an entity named": recall_parameters(store, "what does service-7 own", known_at=datetime.now(UTC)),
    }
    assert queries["known_at, an entity named"]["phrases"]  # the entity leg is planned with values too
    plans = {name: plan(store, params) for name, params in queries.items()} | {"generic": plan(store, None)}
    for name, text in plans.items():
        assert "facts_embedding_key_hnsw" in text and "episodes_embedding_key_hnsw" in text, (name, text)
        assert "_search_gin" in text, (name, text)
        scans = re.findall(r"Seq Scan on (\w+)", text)
        assert not {"facts", "episodes", "relationships", "entity_aliases", "lineage"} & set(scans), (name, scans, text)
        assert not [f for f in VISIBILITY if f in text], (name, text)  # inlined
        # the legs' functions (migrations 0023, 0025) inlined too: no function runs as such
        assert set(re.findall(r"Function Scan on (?:\w+\.)?(\w+)", text)) <= {"unnest"}, (name, text)
        assert not whole_index_walks(text), (name, whole_index_walks(text), text)
    generic = plans["generic"]
    assert not namespace_ors(generic), namespace_ors(generic)
    for name, text in plans.items():  # the turns either side of a hit: by namespace, then id
        assert not walks_by_id(text), (name, walks_by_id(text), text)
    # the entity leg: each entity's newest links and facts by the (entity, order) indexes;
    # aliases by an index whose leading column the read tests: the (namespace, normalised)
    # one for a scope, or (over every namespace, and wherever the planner prefers it) the
    # one on normalised alone (0017), never the first read whole for its second column
    for index in ("relationships_from_entity_id_idx", "relationships_to_entity_id_idx", "facts_entity_id_idx"):
        assert index in generic, (index, generic)
    assert "entity_aliases_normalised_idx" in alias_reads(generic), generic


def walks_by_id(text: str) -> list[str]:
    """Reads of the turns before or after an episode by the primary key, the namespace a
    filter: the first or last turn of a small namespace walks every older or newer row of
    the others (the (namespace_id, id) index reads the namespace's turns alone); and reads
    of that index with the namespace equal as well as the row comparison, which start at the
    namespace's end and walk to the hit, or that test the row comparison as a filter (a
    read of another index, sorted: every turn of the namespace)."""
    return [node.strip() for node in re.split(r"\n(?=\s*->)", text)
            if (re.search(r"Index (Only )?Scan( Backward)? using episodes_pkey on episodes", node.strip().splitlines()[0])
                and re.search(r"Index Cond: \(id [<>] ", node))
            or re.search(r"Index Cond: .*\(namespace_id = .*ROW\(namespace_id, id\)|Index Cond: .*ROW\(namespace_id, id\).*\(namespace_id = ", node)
            or re.search(r"Filter: .*ROW\(namespace_id, id\)", node)]


def alias_reads(text: str) -> set[str]:
    """The indexes the plan reads entity_aliases by, each with a condition on its leading
    column (an index whose leading column is untested is read whole)."""
    reads = set()
    for node in re.split(r"\n(?=\s*->)", text):
        first = node.strip().splitlines()[0]
        found = (re.search(r"Index (?:Only )?Scan using (\w+) on entity_aliases\b", first)
                 or re.search(r"Bitmap Index Scan on (entity_aliases_\w+)", first))
        if found:
            lead = "normalised" if found.group(1) == "entity_aliases_normalised_idx" else "namespace_id"
            cond = re.search(r"Index Cond: \((.*)", node)
            assert cond and cond.group(1).lstrip("(").startswith(lead), node
            reads.add(found.group(1))
    return reads


def test_the_facts_reads_inline_the_one_visibility_definition(store):
    namespaces.create(store, "/plan/a")
    facts.assert_fact(store, "/plan/a", "the vpn owner is person 3", entity="vpn", property="owner", value="3")
    params = {"all_namespaces": True, "namespace_ids": [], "entity": None, "property": None, "origin": None,
              "since": None, "until": None, "as_of": datetime.now(UTC), "known_at": None, "include_history": False,
              "limit": 10, "offset": 0}
    for name, values in (("facts_query", params), ("fact_get", {"id": 1, "as_of": None, "known_at": None}),
                         ("facts_query", None), ("fact_get", None)):
        text = plan(store, values, name, settings=False)
        assert not [f for f in VISIBILITY if f in text], (name, text)
        if values is not None and name == "facts_query":
            assert "recorded_at" in text  # the predicate is there, written out by the planner


GRAPH_VISIBILITY = (*VISIBILITY, "causal_link_visible", "fact_superseded_by")


def graph_at_size(store: Any) -> dict[str, int]:
    """500 facts of 250 entities in two namespaces, ten relationships and up to ten causal
    links per fact (5,000 each): a size where reading a whole table is far dearer than an index."""
    for slug in ("/plan/a", "/plan/b"):
        namespaces.create(store, slug)
        for i in range(250):
            facts.assert_fact(store, slug, f"{TOPICS[i % len(TOPICS)]} owner {i} is person {i % 13}",
                              entity=f"service-{i % 125}", property=f"owner-{i}", value=f"person {i % 13}")
    with store.db.transaction() as tx:
        # bulk rows for the plan only: the graph stages' inserts would take minutes here
        tx.conn.execute(
            "INSERT INTO relationships (namespace_id, from_entity, from_entity_id, relation_type, to_entity,"
            " source_fact_id, valid_from)"
            " SELECT f.namespace_id, f.entity, f.entity_id, 'depends_on', 'db-' || g, f.id, f.valid_from"
            " FROM facts f, generate_series(1, 10) g")
        tx.conn.execute(
            "INSERT INTO causal_links (namespace_id, cause_fact_id, effect_fact_id, valid_from)"
            " SELECT c.namespace_id, c.id, e.id, e.valid_from FROM facts c"
            " JOIN facts e ON e.namespace_id = c.namespace_id AND e.id > c.id AND e.id <= c.id + 10")
        for table in ("facts", "relationships", "causal_links"):
            tx.conn.execute(f"ANALYZE {table}")
        fact = tx.conn.execute("SELECT id, entity_id FROM facts ORDER BY id OFFSET 100 LIMIT 1").fetchone()
        ns = tx.conn.execute("SELECT id FROM namespaces WHERE slug = '/plan/a'").fetchone()
    return {"fact_id": next(iter(fact.values())), "entity_id": list(fact.values())[1], "ns": next(iter(ns.values()))}


def test_the_graph_and_entity_reads_inline_visibility_and_read_by_index(store):
    ids = graph_at_size(store)
    now = datetime.now(UTC)
    times = {"as_of": {"as_of": now, "known_at": None}, "known_at": {"as_of": None, "known_at": now},
             "both": {"as_of": now, "known_at": now}}
    page = {"limit": 20, "offset": 0}
    scoped = {"all_namespaces": False, "ns_ids": [ids["ns"]]}  # get_entity reads within a token's trees
    reads = {
        "graph_query_relationships": {"ns_ids": [ids["ns"]], "entity": "service-7", "relation_type": None,
                                      "include_withdrawn": False, **page},
        "graph_list_causal_links": {"ns_ids": [ids["ns"]], "include_withdrawn": False, **page},
        "graph_trace_forward": {"fact_id": ids["fact_id"], "ns_ids": [ids["ns"]], "max_depth": 3},
        "graph_trace_backward": {"fact_id": ids["fact_id"], "ns_ids": [ids["ns"]], "max_depth": 3},
        "entity_facts": {"id": ids["entity_id"], **scoped, **page},
        "entity_relationships": {"id": ids["entity_id"], **scoped, **page},
        "entity_causal_links": {"id": ids["entity_id"], **scoped, **page},
    }
    problems = []
    for name, params in reads.items():
        plans = {when: plan(store, params | values, name, settings=False, verbose=True)
                 for when, values in times.items()}
        plans["generic"] = plan(store, None, name, settings=False, verbose=True)
        for when, text in plans.items():
            if [f for f in GRAPH_VISIBILITY if f in text]:  # not inlined
                problems.append((name, when, "a visibility function is called", text))
            scans = {"facts", "relationships", "causal_links"} & set(re.findall(r"Seq Scan on (\w+)", text))
            if scans:
                problems.append((name, when, scans, text))
    assert not problems, problems


def gin_rows_fetched(store: Any, params: dict[str, Any]) -> list[float]:
    """Rows each run of the episodes' word index returned, as EXPLAIN (ANALYZE) counts them."""
    with store.db.transaction() as tx:
        tx.one("recall_search_params", ef_search=str(DEFAULT.ef_search))
        rows = tx.conn.execute("EXPLAIN (ANALYZE, COSTS OFF) " + query("recall"), params).fetchall()
    text = "\n".join(next(iter(r.values())) for r in rows)
    return [float(n) for n in re.findall(r"Bitmap Index Scan on episodes_search_gin \(actual time=\S+ rows=([\d.]+)", text)]


def test_a_common_rarest_word_fetches_only_the_rows_holding_the_two_rarest(store):
    namespaces.create(store, "/plan/a")
    items = ([{"content": f"the pottery market moved, notice {i}"} for i in range(25)]
             + [{"content": f"my pottery class went well, week {i}"} for i in range(400)]
             + [{"content": f"the market was busy, stall {i}"} for i in range(800)]
             + [{"content": f"{TOPICS[i % len(TOPICS)]} note {i}"} for i in range(1500)])
    for start in range(0, len(items), 500):
        episodes.remember_batch(store, "/plan/a", items[start:start + 500])
    with store.db.transaction() as tx:
        tx.conn.execute("ANALYZE episodes")
    config = DEFAULT.replace(text_scan_limit=100, text_pair_min=10)
    params = recall_parameters(store, "When is the pottery market?", mode="text", config=config)
    fetched = gin_rows_fetched(store, params)
    # "pottery" (425 rows) is the rarest and in more than 100: only the 25 rows holding both
    # words are fetched, never every match of "pottery"
    assert fetched and sum(fetched) == 25, fetched
    # too few rows hold both: the rarest word's matches are fetched too (the newest 100 kept)
    fewer = recall_parameters(store, "When is the pottery market?", mode="text", config=config.replace(text_pair_min=30))
    assert sum(gin_rows_fetched(store, fewer)) == 25 + 425


def lineage_reads(text: str) -> list[str]:
    """The plan's reads of lineage that test no row's id: a read of every fact's lineage
    (a hashed subplan or a join read whole) on every recall."""
    whole = []
    for node in re.split(r"\n(?=\s*->)", text):
        lines = node.strip().splitlines()
        if re.search(r"Scan (using \w+ )?on lineage\b", lines[0]):
            conds = " ".join(line for line in lines if "Index Cond" in line or "Recheck Cond" in line)
            if not re.search(r"(parent|child)_id = ", conds):
                whole.append(node.strip())
    return whole


def test_the_stale_check_and_the_sources_read_lineage_per_candidate(store):
    namespaces.create(store, "/plan/a")
    items = [{"content": f"{TOPICS[i % len(TOPICS)]} note {i}: step {i % 37} of item {i}"} for i in range(1500)]
    for start in range(0, len(items), 500):
        episodes.remember_batch(store, "/plan/a", items[start:start + 500])
    with store.db.transaction() as tx:
        turns = [next(iter(r.values())) for r in tx.conn.execute("SELECT id FROM episodes ORDER BY id").fetchall()]
    for i in range(300):
        facts.assert_fact(store, "/plan/a", f"{TOPICS[i % len(TOPICS)]} owner {i} is person {i % 13}",
                          source_episode_ids=turns[4 * i:4 * i + 2])
    with store.db.transaction() as tx:
        for table in ("episodes", "facts", "lineage"):
            tx.conn.execute(f"ANALYZE {table}")
    # the generic plan recall runs (thousands of candidates estimated) and a custom one
    for name, text in (("generic", plan(store, None)),
                       ("values", plan(store, recall_parameters(store, "what was the deploy step")))):
        assert "lineage" in text, (name, text)
        assert not lineage_reads(text), (name, lineage_reads(text), text)


def executed(store: Any, params: dict[str, Any]) -> dict[str, bool]:
    """For the two HNSW reads and the two exact reads of a recall: whether each ran (EXPLAIN
    ANALYZE, recall's settings, the values given)."""
    with store.db.transaction() as tx:
        tx.one("recall_search_params", ef_search=str(DEFAULT.ef_search))
        rows = tx.conn.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + query("recall"), params)
        text = "\n".join(next(iter(r.values())) for r in rows.fetchall())
    ran = {}
    for node in re.split(r"\n(?=\s*->)", text):
        first = node.strip().splitlines()[0]
        hnsw = re.search(r"Index Scan using (facts|episodes)_embedding_key_hnsw", first)
        exact = first.startswith(("Sort", "->  Sort")) and re.search(r"Sort Key: \(\(\(\w+\.embedding <=>", node)
        gin = re.search(r"Bitmap Index Scan on (facts|episodes)_search_gin", first)
        if gin:  # the text leg's word index (several reads: ran if any ran)
            ran[f"{gin.group(1)} by words"] = ran.get(f"{gin.group(1)} by words", False) or "never executed" not in first
        if hnsw:
            ran[f"{hnsw.group(1)} by HNSW"] = "never executed" not in first
        elif exact:
            table = "facts" if re.search(r"Sort Key: \(\(\(f(_\d+)?\.", node) else "episodes"
            # (the one-time test may sit below the sort, which then sorts nothing)
            ran[f"{table} exactly"] = "never executed" not in first and not re.search(r" rows=0(\.0+)? ", first)
    return ran


def test_a_small_scope_is_ranked_exactly_a_large_one_by_hnsw(store):
    """A recall scoped to few memories compares the query with each of them (by the
    namespace index) and never walks the HNSW graphs, whose namespace filter would pass
    the rest of the store's rows first, nor reads the word index, which would fetch a
    word's matches in every namespace; a larger scope, or every namespace, uses both."""
    namespaces.create(store, "/plan/big")
    namespaces.create(store, "/plan/small")
    for start in range(0, 1500, 500):  # enough rows that the word index is worth reading
        episodes.remember_batch(store, "/plan/big", [{"content": f"{TOPICS[i % len(TOPICS)]} note {i}"}
                                                     for i in range(start, start + 500)])
    episodes.remember_batch(store, "/plan/small", [{"content": f"{TOPICS[i % len(TOPICS)]} memo {i}"}
                                                   for i in range(20)])
    for i in range(10):
        facts.assert_fact(store, "/plan/small", f"{TOPICS[i % len(TOPICS)]} owner is person {i}")
    with store.db.transaction() as tx:
        tx.conn.execute("ANALYZE episodes")
    config = DEFAULT.replace(exact_scan_limit=100)
    small = executed(store, recall_parameters(store, "who owns the kafka memo", namespaces=["/plan/small"],
                                              config=config))
    vectors = ("facts by HNSW", "facts exactly", "episodes by HNSW", "episodes exactly")
    assert {k: small[k] for k in vectors} == {"facts by HNSW": False, "facts exactly": True,
                                               "episodes by HNSW": False, "episodes exactly": True}, small
    assert not small.get("facts by words") and not small.get("episodes by words"), small
    for scope in ("/plan/big", "/"):
        large = executed(store, recall_parameters(store, "who owns the kafka memo", namespaces=[scope], config=config))
        assert {k: large[k] for k in vectors} == {"facts by HNSW": True, "facts exactly": False,
                                                   "episodes by HNSW": True, "episodes exactly": False}, (scope, large)
        assert large["episodes by words"], (scope, large)
    # exact: the small scope's nearest episodes, in order, are what a full comparison gives
    hits = recall.recall(store, "kafka memo 3", namespaces=["/plan/small"], mode="vector", limit=5, config=config)
    with store.db.transaction() as tx:
        vector = store.embedder.embed_one("kafka memo 3")
        nearest = [r["id"] for r in tx.conn.execute(
            "SELECT e.id FROM episodes e JOIN namespaces n ON n.id = e.namespace_id WHERE n.slug = '/plan/small' "
            "ORDER BY e.embedding <=> %s LIMIT 5", (vector,)).fetchall()]
    assert [h.id for h in hits if h.kind == "episode"][:len(nearest)] == nearest[:len([h for h in hits if h.kind == "episode"])]
