"""The ``recall`` statement's parameters: a request's values and its config's tuning, one dict.

Every rule the parameters feed is written in ``recall/queries/recall.sql``; here each
parameter is computed from the request (``statement_parameters``). Supersession is turned
off for a query that asks about a time (``asks_about_time``: the old value may be the
answer), and the single-signal modes (vector, text) are the hybrid score with one part's
whole weight, without context or the entity leg: they are the baselines hybrid recall is
measured against.
"""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Any

from stash_pipeline.recall import entities, grouping
from stash_pipeline.recall.config import DEFAULT, RecallConfig
from stash_pipeline.recall.request import RecallRequest


def statement_parameters(request: RecallRequest, embedding: Any = None) -> dict[str, Any]:
    """The ``recall`` statement's parameters for ``request`` (its vector, when known, as ``embedding``):
    each of the request's own fields under its name, and what is computed from it and its config."""
    config, limit, hybrid = request.config, request.limit, request.hybrid
    own = {f.name: getattr(request, f.name) for f in fields(request) if f.name not in ("config", "paths")}
    return own | {
        "query": request.query,
        "embedding": embedding,
        "mask_share": config.mask_share,  # recall_names: the names common in scope
        "use_vector": request.use_vector,
        "use_text": request.use_text,
        "all_namespaces": request.all_namespaces,
        "paths": list(request.paths),
        "as_of": request.as_of,
        "known_at": request.known_at,
        "include_history": bool(request.include_history),
        "limit": limit,
        # grouping (recall/grouping.py): over-fetched candidates, facts weighted,
        # the entity leg's facts all kept, each fact's source turns
        "fetch_limit": grouping.fetch_limit(limit, config),
        "fact_weight": config.fact_weight if config.grouping else 1.0,
        "subject_weight": config.subject_weight if config.grouping else 1.0,
        "copy_similarity": config.copy_similarity,
        "repeat_similarity": config.repeat_similarity if config.grouping else None,
        "weight_min_cosine": config.weight_min_cosine,
        "entity_pool": config.grouping and config.entity_pool,
        "excerpt_chars": config.excerpt_chars if config.grouping else None,
        "context": request.context,
        "candidates": max(config.min_candidates, config.candidate_factor * limit),
        "text_scan_limit": config.text_scan_limit,
        "text_candidates": config.text_candidates,
        "text_pair_min": config.text_pair_min,
        "exact_scan_limit": config.exact_scan_limit,
        # a single-signal mode is the hybrid score with one part's whole weight
        "w_vector": config.w_vector if hybrid else float(request.use_vector),
        "k1": config.bm25_k1,
        "b": config.bm25_b,
        "stale_factor": config.stale_factor,
        "supersede": hybrid and not asks_about_time(request.query, config),
        "supersede_similarity": config.supersede_similarity,
        "superseded_factor": config.superseded_factor,
        "supersede_margin": config.supersede_margin,
        # what can reach the results or the context pool
        "supersede_pool": limit + config.context_pool,
        # neighbours lift hits in hybrid mode only
        "neighbour_weight": config.neighbour_weight if hybrid else 0.0,
        "context_pool": config.context_pool,
        "context_window": config.context_window,
    } | entities.parameters(request.query, config, enabled=hybrid)


_MONTHS = (
    # bare "may" is mostly the verb: the month counts after a preposition
    "january february march april june july august september october november december "
    "jan feb apr jun jul aug sep sept oct nov dec"
)
_TIME_WORDS = re.compile(
    r"\b(?:" + "|".join(_MONTHS.split()) + r"|(?:in|of|since|until|by|from|early|late|mid) may|(?:19|20)\d\d|\d{4}-\d\d(?:-\d\d)?|"
    r"before|used to|did(?: \w+){1,3} use to|originally|previously|formerly|earlier|at first|initially|back then|"
    r"last (?:week|month|year|spring|summer|autumn|fall|winter)|ago|old|history)\b",
    re.IGNORECASE,
)


def asks_about_time(query: str, config: RecallConfig = DEFAULT) -> bool:
    """Whether ``query`` names a date, month or year or asks about the past ("used to").

    Such a query wants the value as it was then, so newer near-duplicates must not demote
    it (``config.time_guard`` False measures recall without this guard).
    """
    return config.time_guard and _TIME_WORDS.search(query) is not None
