"""The entity leg of hybrid recall: facts about the entities a query names, and one hop on.

"What does Alice work on?" shares no word with "achen moved to the Kestrel team", and
"which database does Alice's project use?" none with "Kestrel keeps its records in
Postgres 16". Both are found through resolved entities (``memory/entities.py``):

* **matching**: the query's word n-grams (1 to MAX_ALIAS_WORDS words, a possessive "'s"
  dropped), each normalised as aliases are (``entities.normalise``), are looked up in
  ``entity_aliases`` by its unique (namespace_id, normalised) index, in the namespaces in
  scope (``recall_entity_names``, a small statement). Exact alias match only: no fuzzy
  matching on the hot path. Only when an alias matched does ``recall_entity_facts`` run,
  so a query naming no entity pays one index probe.
* **bounds**: at most MAX_NAMED named entities; per named entity its LINKS_PER_ENTITY
  newest current relationships (live, source fact current), reaching at most
  MAX_NEIGHBOURS other entities; per entity its FACTS_PER_ENTITY newest current facts;
  the best MAX_FACTS of those by score. A person with a project, a manager and a few
  reports stays whole; a hub (a project everyone works on) is cut to its newest links, so
  the leg costs a few index lookups and at most (MAX_NAMED + MAX_NEIGHBOURS) *
  FACTS_PER_ENTITY cosines whatever the graph's size.
* **scoring**: as ``recall_hybrid`` scores a fact (``W_VECTOR * cosine + (1 - W_VECTOR) *
  coverage``, the same BM25), except when the fact lacks query words of the alias that
  named its entity ("achen moved to the Kestrel team" for "what does Alice work on"):
  the entity link stands for them, so they count as matched — ENTITY_CREDIT times their
  idf, but at least ENTITY_MATCH of the query (the name is the subject the question is
  about, however common the word) — times HOP_FACTOR for a neighbour's fact. A fact
  that spells the name ("Alice Chen is a staff engineer", "checkout-api stores its state
  in Cassandra") scores exactly as without the leg, so the leg lifts only what text
  search cannot see and never reorders text hits among themselves.
* **fusion** (``fuse``): the leg's rows join the ``recall_hybrid`` rows; a fact found by
  both keeps the higher score; then the best ``limit``. Only current facts, only in
  hybrid mode, never with ``as_of`` or ``include_history``: history is not what an
  entity "is" now.
"""

from __future__ import annotations

import re
from typing import Any

from stash_pipeline.memory.entities import normalise

#: set False to measure recall without the entity leg (bench/retrieval_quality.py)
ENABLED = True
#: longest alias looked up, in words ("warehouse robot controller" has three)
MAX_ALIAS_WORDS = 4
#: n-grams looked up at most (a long query's first ones): bounds the index probes
MAX_PHRASES = 64
MAX_NAMED = 5
LINKS_PER_ENTITY = 20
MAX_NEIGHBOURS = 10
FACTS_PER_ENTITY = 20
MAX_FACTS = 20
#: a fact lacking the alias words that named its entity counts them as matched: this factor
#: of their idf ...
ENTITY_CREDIT = 1.0
#: ... but at least this share of the query's (coverage) ...
ENTITY_MATCH = 0.6
#: ... and a neighbour's fact (one relationship away) this factor of that
HOP_FACTOR = 0.8

_WORD = re.compile(r"[^\W_](?:[\w.+#&-]*[\w+#])?")
_POSSESSIVE = re.compile(r"['’]s\b", re.IGNORECASE)


def query_phrases(text: str) -> list[str]:
    """The normalised word n-grams of ``text`` that could be an alias, shortest first.

    >>> query_phrases("What does Alice Chen's project use?")[:6]
    ['what', 'does', 'alice', 'chen', 'project', 'use']
    """
    words = _WORD.findall(_POSSESSIVE.sub("", text))
    seen: dict[str, None] = {}
    for size in range(1, MAX_ALIAS_WORDS + 1):
        for start in range(len(words) - size + 1):
            phrase = normalise(" ".join(words[start : start + size]))
            if phrase:
                seen.setdefault(phrase, None)
    return list(seen)[:MAX_PHRASES]


def named_parameters(phrases: list[str], all_namespaces: bool, namespace_ids: list[int]) -> dict[str, Any]:
    """The ``recall_entity_names`` parameters for one query's phrases."""
    return {"phrases": phrases, "all_namespaces": all_namespaces, "namespace_ids": namespace_ids,
            "max_named": MAX_NAMED}


def parameters(text: str, named: list[dict[str, Any]], embedding: Any, all_namespaces: bool,
               namespace_ids: list[int], *, w_vector: float, k1: float, b: float) -> dict[str, Any]:
    """The ``recall_entity_facts`` parameters for one query (BM25 and fusion as recall's)."""
    return {
        "query": text,
        "entity_ids": [int(r["entity_id"]) for r in named],
        "aliases": [r["aliases"] for r in named],
        "embedding": embedding,
        "all_namespaces": all_namespaces,
        "namespace_ids": namespace_ids,
        "links_per_entity": LINKS_PER_ENTITY,
        "max_neighbours": MAX_NEIGHBOURS,
        "facts_per_entity": FACTS_PER_ENTITY,
        "max_facts": MAX_FACTS,
        "w_vector": w_vector,
        "k1": k1,
        "b": b,
        "entity_credit": ENTITY_CREDIT,
        "entity_match": ENTITY_MATCH,
        "hop_factor": HOP_FACTOR,
    }


def fuse(rows: list[dict[str, Any]], entity_rows: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The hybrid rows and the entity leg's rows as one ranking, best ``limit`` first.

    A fact in both lists keeps its hybrid row (its text and context parts) with the higher
    of the two scores; ``entity`` records the leg's score on every fact it reached.
    """
    if not entity_rows:
        return rows
    by_key: dict[tuple[str, int], dict[str, Any]] = {(r["kind"], int(r["id"])): dict(r) for r in rows}
    for entity_row in entity_rows:
        key = ("fact", int(entity_row["id"]))
        found = by_key.get(key)
        if found is None:
            by_key[key] = {**entity_row, "entity_score": entity_row["score"]}
        else:
            found["entity_score"] = entity_row["score"]
            found["score"] = max(float(found["score"]), float(entity_row["score"]))
    ranked = sorted(by_key.values(), key=lambda r: (-float(r["score"]), r["kind"], -int(r["id"])))
    return ranked[:limit]
