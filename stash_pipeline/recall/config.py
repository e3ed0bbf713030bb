"""Recall's tuning as one frozen value: ranking weights, candidate bounds, the entity leg's, grouping's.

``recall.recall(store, query, config=...)`` takes a ``RecallConfig``; ``DEFAULT`` is what
every surface uses. Every field reaches the SQL as a statement parameter, so a variant is
a different call, never a patched module: bench/ measures ``VARIANTS`` (and sweeps with
``dataclasses.replace``) side by side in one process. The values were chosen on the DEV
splits of the labelled sets in bench/data (bench/README.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RecallConfig:
    """How recall ranks; the rules are the headers of ``recall/queries/recall.sql``'s parts."""

    #: weight of the cosine in a row's score (the SQL function hybrid_score, migration 0023); the rest,
    #: BM25 coverage's
    w_vector: float = 0.4
    #: Okapi BM25 parameters (the SQL function bm25_term, migration 0023; the usual defaults)
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
    #: candidates per vector list = max(min_candidates, candidate_factor * limit)
    candidate_factor: int = 3
    min_candidates: int = 30
    #: the text leg (recall.sql, text_leg): rows matched per kind at most ...
    text_scan_limit: int = 400
    #: ... and the fewest rows holding the two rarest words before the rarest's are added
    text_pair_min: int = 20
    #: of those matches, the best this many by BM25 join the vector candidates
    text_candidates: int = 60
    #: HNSW beam width (hnsw.ef_search) for recall's vector candidates
    ef_search: int = 100
    #: a scope of at most this many live memories is ranked exactly (recall.sql, small_scope)
    exact_scan_limit: int = 2000
    #: context (recall.sql, context): the lift a neighbour of a strong episode hit gains,
    #: the hits that lend it, the turns either side
    neighbour_weight: float = 0.35
    context_pool: int = 20
    context_window: int = 2
    #: ``relevance`` below this means "probably not about the query"
    relevance_floor: float = 0.3
    #: factor on an episode whose derived facts were all retired, so its correction wins
    #: (recall.sql, scoring)
    stale_factor: float = 0.5
    #: supersession by recency (recall.sql, scoring): how alike a newer restatement is,
    #: the share of its score the older one keeps, and the least of its own it keeps
    supersede_similarity: float = 0.5
    supersede_margin: float = 0.99
    superseded_factor: float = 0.5
    #: a query naming a time (a month, "used to" ...) turns supersession off
    time_guard: bool = True
    #: the entity leg (recall/entities.py) in hybrid mode
    entity_leg: bool = True
    #: the query vector of a hybrid recall naming an entity whose every word is in at least
    #: mask_share of the scope's rows (recall_before.sql, recall_names): mask_weight times the vector
    #: of the query with that name masked (entity_recall.masked), plus the rest times its own
    mask_names: bool = True
    mask_share: float = 0.1
    mask_weight: float = 0.7
    #: ... and the cosine's weight in its rows' score instead of w_vector: such a name is
    #: a weak word for the text leg too, and the masked words carry the question
    w_vector_masked: float = 0.6
    #: longest alias looked up, in words ("warehouse robot controller" has three)
    max_alias_words: int = 4
    #: n-grams looked up at most (a long query's first ones): bounds the index probes
    max_phrases: int = 64
    #: named entities at most; per named entity its newest links; neighbours reached at most
    max_named: int = 5
    links_per_entity: int = 20
    max_neighbours: int = 10
    #: per entity, of its newest entity_scan facts the facts_per_entity nearest the query
    #: (a person has facts about everything they said: the newest few are chit-chat);
    #: the leg's best facts at most
    entity_scan: int = 200
    facts_per_entity: int = 20
    max_facts: int = 20
    #: the credit for the naming alias's words (recall.sql, entity_leg): a factor of their
    #: idf, the least share of the query, the factor one hop away
    entity_credit: float = 1.0
    entity_match: float = 0.5
    hop_factor: float = 0.6
    #: grouping (recall/grouping.py): one result per piece of evidence, a fact hit
    #: carrying its source turns and the episodes it shows folded into it (off: every hit
    #: takes its own slot and no fact weight applies)
    grouping: bool = True
    #: candidates fetched beyond ``limit`` when grouping: folding frees slots they fill
    overfetch: int = 10
    #: characters of a source turn a fact hit carries (the rest is cut, marked "…")
    excerpt_chars: int = 160
    #: the weights (recall.sql, fusion): a fact ranks by this times its score, which stays
    #: its own (a fact states in plain words what several turns say; BM25 and context
    #: favour the turns) ...
    fact_weight: float = 1.2
    #: ... and by this too when the entity leg reached it (the question names its subject)
    subject_weight: float = 1.2
    #: ... but one at least this like (cosine) a source episode restates it and takes
    #: neither: lifted, the copy outranked the episode that answers better ...
    copy_similarity: float = 0.95
    #: ... and one the leg did not reach takes ``fact_weight`` only at this cosine to the
    #: query or more: lifted, facts matched on a stray word ("June") pushed answers out
    weight_min_cosine: float = 0.3
    #: grouping: a fact at least this like (cosine) a better-ranked fact says it again
    #: ("attended a pride parade last week" in one session, "went to a pride parade" in
    #: the next): it folds into that fact's result, which shows its source turns too
    repeat_similarity: float = 0.85
    #: grouping: every fact the entity leg found joins the candidates, not only those
    #: ranked within ``limit + overfetch`` (a person's facts across time)
    entity_pool: bool = True
    #: grouping: maximal marginal relevance over sessions, the weight of a result's
    #: redundancy with those ranked above (0 keeps the ranking: built, shipped off)
    diversity: float = 0.0

    def replace(self, **changes: Any) -> RecallConfig:
        """This config with some fields changed (a bench variant or a sweep point)."""
        return dataclasses.replace(self, **changes)


DEFAULT = RecallConfig()

#: named variants bench/ measures against the default in the same run
VARIANTS: dict[str, RecallConfig] = {
    "default": DEFAULT,
    "no_entity_leg": DEFAULT.replace(entity_leg=False),
    "no_neighbours": DEFAULT.replace(neighbour_weight=0.0),
    "no_time_guard": DEFAULT.replace(time_guard=False),
    "no_grouping": DEFAULT.replace(grouping=False),
    "names_kept": DEFAULT.replace(mask_names=False),
}
