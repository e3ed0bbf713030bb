"""Retrieval quality with and without the entity leg of recall. Used by
``python -m bench.retrieval_quality``.

The entity set (bench/data/entity_graph.py: 24 people, 16 projects, their aliases,
facts, relationships and chatter; 72 questions of two types, ``alias`` and ``one_hop``)
is loaded into the agent-memory database, next to the agent-memory set. Every asserted
fact gets its entity from ``assert_fact`` (exact name, else a new entity), so the
agent-memory facts' subjects are entities too and the leg fires on the agent-memory
questions that name a service. The conversational set's speakers become entities of
their conversation; its turns have no facts, so there the leg only costs its lookup.

Through the library: entities (``entities.find_or_create``), aliases (an alias entity
merged into the named one, ``entities.merge_entities``), episodes (``remember_batch``)
and facts (``assert_fact`` with ``supersede``). Relationships are written with bench SQL
(bench/queries.sql), as only the relationships stage writes them.

``recall`` = recall as shipped, ``recall_no_entities`` = the same call with the leg off
(``RecallConfig.entity_leg`` False), in the same run. ``entity_match`` x ``hop_factor`` is
swept on the DEV questions only (the entity set's and the agent-memory set's).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from bench import common

TYPES = ("alias", "one_hop")
SYSTEMS = ("recall", "recall_ungrouped", "recall_no_entities", "vector", "text")
GRID_MATCH = (0.4, 0.5, 0.6, 0.7)
GRID_HOP = (0.6, 0.8, 1.0)

Ref = tuple[str, int]
Evaluate = Callable[..., dict[str, list[dict[str, float]]]]


def resolve(store: Any, namespace: str, name: str, aliases: list[str]) -> int:
    """The entity ``name`` is (found or created), with ``aliases`` merged into it; its id.

    Through the library: ``find_or_create`` is what an asserted fact's entity goes through,
    and an alias becomes the entity's by ``merge_entities``, as a caller's correction would.
    """
    from stash_pipeline.memory import entities
    from stash_pipeline.memory.namespaces import resolve_id

    ids = []
    for spelling in [name, *aliases]:
        vector = entities.name_embedding(store.embedder, spelling)
        with store.db.transaction() as tx:
            ids.append(entities.find_or_create(tx, resolve_id(tx, namespace), spelling, entities.normalise(spelling),
                                               embedding=vector,
                                               embedding_model=store.settings.embedding_model_name)[0])
    for other in dict.fromkeys(ids[1:]):
        if other != ids[0]:
            entities.merge_entities(store, ids[0], other)
    return ids[0]


def load(store: Any, graph: list[dict[str, Any]]) -> dict[str, Ref]:
    """Load the entity set; key -> (kind, id). Facts get their entity as ``assert_fact`` gives it
    (exact name); relationships are written with bench SQL (only the stages write them)."""
    from stash_pipeline.memory import episodes, facts, namespaces
    from stash_pipeline.memory.entities import normalise

    texts = [r["content"] for r in graph if r["record"] in ("fact", "episode")]
    texts += [n for r in graph if r["record"] == "entity" for n in [r["name"], *r["aliases"]]]
    texts = list(dict.fromkeys(texts + [normalise(t) for t in texts]))
    common.prime_embedding_cache(store, texts, common.dataset_vectors(texts))
    out: dict[str, Ref] = {}
    entity_ids: dict[tuple[str, str], int] = {}
    for record in (r for r in graph if r["record"] == "namespace"):
        namespaces.create(store, record["namespace"])
    for record in (r for r in graph if r["record"] == "entity"):
        entity_ids[(record["namespace"], normalise(record["name"]))] = resolve(
            store, record["namespace"], record["name"], record["aliases"])
    by_namespace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in (r for r in graph if r["record"] == "episode"):
        by_namespace[record["namespace"]].append(record)
    for slug, items in by_namespace.items():
        made = episodes.remember_batch(store, slug, [{"content": e["content"], "occurred_at": e["occurred_at"]}
                                                     for e in items])
        out |= {e["key"]: ("episode", m.id) for e, m in zip(items, made, strict=True)}
    for record in (r for r in graph if r["record"] == "fact"):  # file order: a later works_on supersedes
        made = facts.assert_fact(store, record["namespace"], record["content"], entity=record["entity"],
                                 property=record["property"], value=record["value"], supersede=True)
        out[record["key"]] = ("fact", int(made.fact.id))
    with store.db.transaction() as tx:
        for record in (r for r in graph if r["record"] == "relationship"):
            tx.conn.execute(common.sql("bench_entity_relationship_insert"), {
                "namespace": record["namespace"], "from_entity": record["from"], "relation_type": record["relation"],
                "to_entity": record["to"], "fact_id": out[record["fact"]][1],
                "from_entity_id": entity_ids[(record["namespace"], normalise(record["from"]))],
                "to_entity_id": entity_ids[(record["namespace"], normalise(record["to"]))]})
    return out


def load_speakers(store: Any, turns: list[dict[str, Any]]) -> int:
    """Each conversation's two speakers as entities of its namespace (first name alias)."""
    speakers = sorted({(t["namespace"], t["speaker"]) for t in turns})
    for namespace, speaker in speakers:
        resolve(store, namespace, speaker, [])
    return len(speakers)


def sweep(store: Any, entity_dev: list[dict[str, Any]], agent_dev: list[dict[str, Any]], refs: dict[str, Ref],
          evaluate: Evaluate, overall: Callable[[Any], dict[str, float]]) -> dict[str, float]:
    """entity_match x hop_factor on the DEV questions; the best entity r@10 whose agent-memory
    DEV r@10 stays within 0.01 of the leg-off value. Prints the table, returns the choice."""
    from stash_pipeline.recall.config import DEFAULT, VARIANTS

    off = VARIANTS["no_entity_leg"]
    base_agent = overall(evaluate(store, agent_dev, refs, "recall", off))
    base_entity = overall(evaluate(store, entity_dev, refs, "recall", off))
    rows, best, best_key = [], {}, (-1.0, -1.0)
    for match, hop in itertools.product(GRID_MATCH, GRID_HOP):
        point = DEFAULT.replace(entity_match=match, hop_factor=hop)
        m_entity = overall(evaluate(store, entity_dev, refs, "recall", point))
        m_agent = overall(evaluate(store, agent_dev, refs, "recall", point))
        rows.append([f"entity_match={match}, hop_factor={hop}", m_entity["r@10"], m_entity["mrr"], m_agent["r@10"],
                     m_agent["mrr"]])
        key = (m_entity["r@10"], m_entity["mrr"])
        if m_agent["r@10"] >= base_agent["r@10"] - 0.01 and key > best_key:
            best, best_key = {"entity_match": match, "hop_factor": hop}, key
    rows.sort(key=lambda r: (-r[1], -r[2]))
    rows.append(["entity leg off", base_entity["r@10"], base_entity["mrr"], base_agent["r@10"], base_agent["mrr"]])
    common.print_table("Entity leg, DEV questions: ranking constants (entity set and agent-memory set)",
                       ["setting", "entity r@10", "entity MRR", "agent-memory r@10", "agent-memory MRR"], rows)
    print(f"best on dev: {best}\n")
    return best


def report(store: Any, questions: list[dict[str, Any]], refs: dict[str, Ref], evaluate: Evaluate,
           aggregate: Callable[[list[dict[str, float]]], dict[str, float]]) -> dict[str, Any]:
    """Per type and split, recall@10 / MRR / stale wins of each system on the entity set."""
    results: dict[str, dict[str, Any]] = {}
    for split in ("dev", "test"):
        asked = [q for q in questions if q["split"] == split]
        results[split] = {}
        for system in SYSTEMS:  # (recall_no_entities: the same recall, RecallConfig.entity_leg off)
            results[split][system] = evaluate(store, asked, refs, system)
    rows = []
    for qtype in (*TYPES, "all"):
        for system in SYSTEMS:
            row: list[Any] = [qtype, system]
            for split in ("dev", "test"):
                per = results[split][system]
                scores = [r for rows_ in per.values() for r in rows_] if qtype == "all" else per[qtype]
                m = aggregate(scores)
                row += [int(m["n"]), m["r@5"], m["r@10"], m["mrr"]]
                if split == "test":
                    row.append(m.get("stale_wins", ""))
            rows.append(row)
    common.print_table("Entity set (alias and one-hop questions), recall@k of the relevant facts, limit 10",
                       ["type", "system", "dev n", "dev r@5", "dev r@10", "dev MRR", "test n", "test r@5",
                        "test r@10", "test MRR", "test stale wins"], rows)
    return results
