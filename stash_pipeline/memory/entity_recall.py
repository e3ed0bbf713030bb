"""The entity leg of hybrid recall: facts about the entities a query names, and one hop on.

"What does Alice work on?" shares no word with "achen moved to the Kestrel team", and
"which database does Alice's project use?" none with "Kestrel keeps its records in
Postgres 16". Both are found through resolved entities (``memory/entities.py``):

* **matching**: the query's word n-grams (1 to ``max_alias_words`` words, a possessive "'s"
  dropped), each normalised as aliases are (``entities.normalise``), are looked up in
  ``entity_aliases`` by its unique (namespace_id, normalised) index, in the namespaces in
  scope. Exact alias match only: no fuzzy matching on the hot path; a query naming no
  entity pays one index probe.
* **one call**: the leg is part of the ``recall`` statement (``queries/recall.sql``, the
  ``entity_*`` parts): names, links, facts and scores in the same statement and
  snapshot as the hybrid ranking, no round trip of its own.
* **bounds** (``RecallConfig``): at most ``max_named`` named entities; per named entity
  its ``links_per_entity`` newest visible relationships (source fact visible too),
  reaching at most ``max_neighbours`` other entities; per entity its
  ``facts_per_entity`` newest visible facts; the best ``max_facts`` of those by score.
  A person with a project, a manager and a few reports stays whole; a hub (a project everyone works on) is cut to its newest links, so
  the leg costs a few index lookups and at most (max_named + max_neighbours) *
  facts_per_entity cosines whatever the graph's size.
* **visibility**: facts by ``fact_visible`` and relationships by ``relationship_visible``
  (their own valid_from/valid_until/recorded_at/retired_at, migration 0008; visibility functions in 0012) at the call's
  ``as_of`` / ``known_at`` (``include_history``: every fact), as every other recall row:
  "who was on the Kestrel team in March" follows the links of March.
* **scoring**: as recall scores a fact (``w_vector * cosine + (1 - w_vector) * coverage``,
  the same BM25), except when the fact lacks query words of the alias that named its
  entity ("achen moved to the Kestrel team" for "what does Alice work on"):
  the entity link stands for them, so they count as matched — ``entity_credit`` times their
  idf, but at least ``entity_match`` of the query (the name is the subject the question is
  about, however common the word) — times ``hop_factor`` for a neighbour's fact. A fact
  that spells the name ("Alice Chen is a staff engineer", "checkout-api stores its state
  in Cassandra") scores exactly as without the leg, so the leg lifts only what text
  search cannot see and never reorders text hits among themselves.
* **fusion** (in the statement): the leg's rows join the hybrid rows; a fact found by
  both keeps its hybrid row with the higher score (``entity`` records the leg's); then
  the best ``limit``. Hybrid mode only.
"""

from __future__ import annotations

import re
from typing import Any

from stash_pipeline.memory.entities import normalise
from stash_pipeline.memory.recall_config import DEFAULT, RecallConfig

_WORD = re.compile(r"[^\W_](?:[\w.+#&-]*[\w+#])?")
_POSSESSIVE = re.compile(r"['’]s\b", re.IGNORECASE)


def query_phrases(text: str, config: RecallConfig = DEFAULT) -> list[str]:
    """The normalised word n-grams of ``text`` that could be an alias, shortest first.

    >>> query_phrases("What does Alice Chen's project use?")[:6]
    ['what', 'does', 'alice', 'chen', 'project', 'use']
    """
    # each word normalised once: a phrase's form is its words' forms joined by spaces (a
    # word holds no parenthesis, and normalising maps character by character)
    words = [normalise(word) for word in _WORD.findall(_POSSESSIVE.sub("", text))]
    seen: dict[str, None] = {}
    for size in range(1, config.max_alias_words + 1):
        for start in range(len(words) - size + 1):
            phrase = " ".join(word for word in words[start : start + size] if word)
            if phrase:
                seen.setdefault(phrase, None)
    return list(seen)[: config.max_phrases]


def parameters(text: str, config: RecallConfig, *, enabled: bool) -> dict[str, Any]:
    """The entity leg's parameters of the ``recall`` statement (no phrases: the leg is off)."""
    return {
        "phrases": query_phrases(text, config) if enabled and config.entity_leg else [],
        "max_named": config.max_named,
        "links_per_entity": config.links_per_entity,
        "max_neighbours": config.max_neighbours,
        "facts_per_entity": config.facts_per_entity,
        "max_facts": config.max_facts,
        "entity_credit": config.entity_credit,
        "entity_match": config.entity_match,
        "hop_factor": config.hop_factor,
    }
