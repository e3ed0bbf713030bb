"""Recall: hybrid retrieval over current facts and episodes, ranked together.

What recall finds and how it ranks is the ``recall`` statement of
``db/queries/recall.sql``, each rule once, in the header of its part (``scope``,
``vector_leg``, ``text_leg``, ``scoring``, ``context``, ``entity_leg``, ``fusion``,
``result``); its tuning is a ``RecallConfig`` sent as parameters. Here: the query's text
and mode are checked (the other values arrive parsed, by the ``recall`` operation's
model), supersession is turned off for a query that asks about a time
(``asks_about_time``: the old value may be the answer), the entity leg's phrases are made
(``memory/entity_recall.py``), a query naming an entity common in scope gets a vector
mostly of its text with that name masked (``query_vector``; the text and entity legs keep
the name) and weighs the cosine by ``w_vector_masked``, and the statement runs in one round trip (``round_trip``).
``relevance`` is the score clipped to [0, 1], absolute, so an agent can threshold it at
``relevance_floor``. Grouping (``memory/recall_grouping.py``) folds the rows into one
result per piece of evidence; ``recall_results`` is the lean JSON shape for agents
(``memory/recall_shape.py``, whose helpers this module re-exports). Results never carry
vectors.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import numpy as np

from stash_pipeline import errors
from stash_pipeline.db.gateway import NULL_VECTOR
from stash_pipeline.embedding.cache import query_key
from stash_pipeline.memory import entity_recall, recall_grouping, validate
from stash_pipeline.memory.recall_config import DEFAULT, RecallConfig
from stash_pipeline.memory.recall_shape import (
    compact,
    estimate_tokens,
    serialised_tokens,
    shape_results,
    to_hit,
    within_budget,
)
from stash_pipeline.models import RecallHit
from stash_pipeline.store import Store

MODES = ("hybrid", "vector", "text")

__all__ = [
    "MODES",
    "asks_about_time", "compact", "estimate_tokens", "recall", "recall_parameters", "recall_results",
    "round_trip", "search_parameters", "serialised_tokens", "shape_results", "to_hit",
]


def _paths(namespaces: list[str]) -> list[str]:
    # a bare string would read as its characters ("/" in "/a" holds): a caller's mistake, not input
    if not isinstance(namespaces, list):
        raise TypeError("recall takes the namespace paths as a list (validate.slugs parses a comma string)")
    return namespaces


def recall(
    store: Store,
    query: str,
    namespaces: list[str],
    *,
    limit: int = validate.RECALL_LIMIT_DEFAULT,
    as_of: datetime | None = None,
    include_history: bool = False,
    max_tokens: int | None = None,
    mode: str = "hybrid",
    known_at: datetime | None = None,
    config: RecallConfig = DEFAULT,
) -> list[RecallHit]:
    """Facts and episodes most relevant to ``query``, best first (hybrid vector + full text).

    Two times, both now by default: ``as_of`` (event time: facts valid then, episodes that
    had occurred by then) and ``known_at`` (system time: what Stash had recorded and not
    withdrawn or forgotten by then, with a fact's interval as Stash believed it then, see
    ``memory.facts``). ``include_history`` without either time returns retired facts too.
    ``config`` is the ranking's tuning (``memory/recall_config.py``). A fact hit carries its
    source episodes (``sources``), which then take no slot of their own, nor does a hit
    repeating a better one word for word (``memory/recall_grouping.py``; ``config.grouping``
    off: every hit its own slot).

    The arguments are taken as checked (the ``recall`` operation's model parses them:
    paths, limit, times, ``max_tokens``); the query's text and ``mode`` are checked here.
    """
    ranked = _ranked(store, query, namespaces, limit=limit, as_of=as_of, include_history=include_history,
                     mode=mode, known_at=known_at, context=0, config=config)
    return within_budget([hit for hit, _ in ranked], max_tokens)


def _ranked(store: Store, query: str, namespaces: list[str], *, limit: int, context: int, config: RecallConfig,
            **options: Any) -> list[tuple[RecallHit, list[dict[str, Any]]]]:
    """The ``limit`` results of one recall, each with its context turns: the statement's rows
    as hits, then grouping's post-ranking step (``recall_grouping.group``)."""
    rows = _search(store, query, _paths(namespaces), limit=limit, context=context, config=config, **options)
    return recall_grouping.group([(to_hit(r), r["context"] or []) for r in rows], limit,
                                 recall_grouping.source_rows(rows), config)


def _search(
    store: Store,
    query: str,
    paths: list[str],
    *,
    limit: int,
    as_of: datetime | None,
    include_history: bool,
    mode: str,
    known_at: datetime | None,
    context: int,
    config: RecallConfig,
) -> list[dict[str, Any]]:
    """The ranked rows of one recall, each episode's ``context`` turns with it, in one round
    trip (``round_trip``). In hybrid mode the query's vector is mixed with that of the query
    with the names common in scope masked (``query_vector``): a short round trip names them
    (``embedded_text``) unless this process did so in the last seconds.
    A text this process has not cached is embedded before the round trip when the model is
    local (``CachedEmbedder.embeds_first``); otherwise its vector is read from the cache,
    and a second round trip follows the model only when it was not there."""
    text = validate.content(store.settings, query, "query")
    if mode not in MODES:
        raise errors.InvalidInput(f"mode must be one of {', '.join(MODES)}")
    use_vector = mode in ("hybrid", "vector")
    use_text = mode in ("hybrid", "text")
    embedder = store.embedder
    if use_vector:
        embedder.ensure_lock()  # (once per process) the model the stored vectors were made with
    params, masked = search_parameters(store, text, paths, limit=limit, as_of=as_of, known_at=known_at,
                                       include_history=bool(include_history), use_vector=use_vector,
                                       use_text=use_text, context=context, config=config)
    key = params["text_hash"]
    if use_vector and embedder.embeds_first(key):  # a new query, a local model: embed, then one round trip
        params["embedding"] = query_vector(embedder, text, masked, config)
        _, rows = round_trip(store, params, config, cache=True)
    else:
        needs_vector, rows = round_trip(store, params, config)
        if needs_vector:  # not cached after all: the model embeds it, then the search runs
            params["embedding"] = query_vector(embedder, text, masked, config)
            _, rows = round_trip(store, params, config, cache=True)
    if use_vector:
        embedder.note_cached(key)
    return rows


def search_parameters(store: Store, text: str, paths: list[str], *, use_vector: bool, use_text: bool,
                      config: RecallConfig, **options: Any) -> tuple[dict[str, Any], str]:
    """The statement's parameters for one recall and the text its vector is made from: a
    hybrid query naming an entity common in scope has it masked (``embedded_text``) and
    weighs the cosine by ``w_vector_masked`` (the words left carry the question)."""
    embedder = store.embedder
    params = recall_parameters(text, paths, None, use_vector=use_vector, use_text=use_text, config=config,
                               **options) | {"embedding_model": embedder.name, "embedding_endpoint": embedder.endpoint}
    masked = embedded_text(store, text, paths, params, config) if use_vector and use_text else text
    if masked != text:
        params["w_vector"] = config.w_vector_masked
    params["text_hash"] = query_key(text, paths, masked=masked)
    return params, masked


def embedded_text(store: Store, text: str, paths: list[str], params: dict[str, Any], config: RecallConfig) -> str:
    """A hybrid query with the names common in scope masked (``recall_names``,
    ``entity_recall.masked``), looked up in a short round trip unless this process did so
    within ``cache.MASKED_FOR`` seconds; the query itself when it names none."""
    if not (config.mask_names and params["phrases"]):
        return text
    asked = query_key(text, paths)
    masked = store.embedder.embedded_as(asked)
    if masked is None:
        (named,) = store.db.pipelined(("recall_names", params), prepare=True)
        masked = entity_recall.masked(text, [r["normalised"] for r in named], config)
        store.embedder.note_embedded_as(asked, masked)
    return masked


def query_vector(embedder: Any, text: str, masked: str, config: RecallConfig) -> Any:
    """The vector of ``text``; of a query with names masked, ``mask_weight`` times the masked
    text's vector plus the rest times the query's own, renormalised (one model call): the
    model matches a name to every turn its speaker said, so it counts for less."""
    if masked == text:
        return embedder.compute({"q": text})["q"]
    vectors = embedder.compute({"m": masked, "q": text})
    mixed = config.mask_weight * vectors["m"] + (1 - config.mask_weight) * vectors["q"]
    return (mixed / np.linalg.norm(mixed)).astype(np.float32)


def round_trip(
    store: Store, params: dict[str, Any], config: RecallConfig, *, cache: bool = False
) -> tuple[bool, list[dict[str, Any]]]:
    """The recall statements pipelined as one transaction: (the vector is missing, the rows).

    ``cache``: the query's vector was just computed; the same transaction stores it in the
    embedding cache (without waiting for the WAL flush, as every cache write), so the
    next recall of this query finds it.
    """
    writes: list[tuple[str, dict[str, Any]]] = []
    if cache:
        writes = [("embedding_cache_relaxed_commit", {}),
                  ("embedding_cache_insert_many", {
                      "model": params["embedding_model"], "endpoint": params["embedding_endpoint"],
                      "hashes": [params["text_hash"]], "embeddings": [params["embedding"]]})]
    # prepared on a connection's first recall, or when the pool opens it (recall_prepare.py)
    *_, check, rows = store.db.pipelined(*writes, *statements(params, config), prepare=True)
    missing = check[0]["missing"]
    if missing:
        raise errors.NamespaceNotFound(f"namespace {missing[0]!r} not found")
    return bool(check[0]["needs_vector"]), rows


def statements(params: dict[str, Any], config: RecallConfig) -> list[tuple[str, dict[str, Any]]]:
    """The recall statements with their parameters, in the order they are pipelined.

    No vector is sent as a NULL typed as one (``NULL_VECTOR``): a query seen before and a
    new one (its vector given) then use the same prepared statements, planned once per
    connection.
    """
    if params.get("embedding") is None:
        params = params | {"embedding": NULL_VECTOR}
    return [("recall_search_params", {"ef_search": str(config.ef_search)}),
            ("recall_check", params),
            ("recall", params)]


def recall_parameters(
    text: str,
    paths: list[str],
    embedding: Any,
    *,
    limit: int,
    as_of: datetime | None,
    known_at: datetime | None,
    include_history: bool,
    use_vector: bool,
    use_text: bool,
    context: int,
    config: RecallConfig,
) -> dict[str, Any]:
    """The ``recall`` statement's parameters: the call's values and ``config``'s tuning."""
    hybrid = use_vector and use_text
    return {
        "query": text,
        "embedding": embedding,
        "mask_share": config.mask_share,  # recall_names: the names common in scope
        "use_vector": use_vector,
        "use_text": use_text,
        "all_namespaces": "/" in paths,
        "paths": paths,
        "as_of": as_of,
        "known_at": known_at,
        "include_history": include_history,
        "limit": limit,
        # grouping (memory/recall_grouping.py): over-fetched candidates, facts weighted,
        # the entity leg's facts all kept, each fact's source turns
        "fetch_limit": recall_grouping.fetch_limit(limit, config),
        "fact_weight": config.fact_weight if config.grouping else 1.0,
        "subject_weight": config.subject_weight if config.grouping else 1.0,
        "copy_similarity": config.copy_similarity,
        "weight_min_cosine": config.weight_min_cosine,
        "entity_pool": config.grouping and config.entity_pool,
        "excerpt_chars": config.excerpt_chars if config.grouping else None,
        "context": context,
        "candidates": max(config.min_candidates, config.candidate_factor * limit),
        "text_scan_limit": config.text_scan_limit,
        "text_candidates": config.text_candidates,
        "text_pair_min": config.text_pair_min,
        "exact_scan_limit": config.exact_scan_limit,
        # a single-signal mode is the hybrid score with one part's whole weight
        "w_vector": config.w_vector if hybrid else float(use_vector),
        "k1": config.bm25_k1,
        "b": config.bm25_b,
        "stale_factor": config.stale_factor,
        "supersede": hybrid and not asks_about_time(text, config),
        "supersede_similarity": config.supersede_similarity,
        "superseded_factor": config.superseded_factor,
        "supersede_margin": config.supersede_margin,
        # what can reach the results or the context pool
        "supersede_pool": limit + config.context_pool,
        # neighbours lift hits in hybrid mode only: the single-signal modes are the
        # baselines it is measured against
        "neighbour_weight": config.neighbour_weight if hybrid else 0.0,
        "context_pool": config.context_pool,
        "context_window": config.context_window,
    } | entity_recall.parameters(text, config, enabled=hybrid)


def recall_results(
    store: Store,
    query: str,
    namespaces: list[str],
    *,
    limit: int = validate.RECALL_LIMIT_DEFAULT,
    as_of: datetime | None = None,
    include_history: bool = False,
    max_tokens: int | None = None,
    mode: str = "hybrid",
    context: int = validate.RECALL_CONTEXT_DEFAULT,
    score_parts: bool = False,
    known_at: datetime | None = None,
    config: RecallConfig = DEFAULT,
) -> dict[str, Any]:
    """Recall in the lean shape agents get: ``{"results": [compact hits]}``.

    ``context`` adds up to that many turns on each side of an episode hit from its session
    (``"context": [{"id", "content"}]``, in order), leaving out turns that are results
    themselves or a fact result's ``sources``. A fact result carries its source episodes as
    ``sources`` (``[{"id", "occurred_at", "excerpt"}]``, instead of ``source_episode_ids``;
    a profile, whose content gathers its members' words, only the ids, and its members as
    ``member_fact_ids``) and the episodes it represents, and a profile's members ranked
    below it (or a profile below all its members), take no slot; with ``score_parts`` it
    also lists what was folded into it (``grouped``) and each source's own ``score``. ``max_tokens`` bounds
    the serialised results (every field, context and sources included), in rank order: a
    result that does not fit ends the list. The arguments are taken as checked, as ``recall``'s.
    """
    ranked = _ranked(store, query, namespaces, limit=limit, as_of=as_of, include_history=include_history,
                     mode=mode, known_at=known_at, context=context, config=config)
    return shape_results(ranked, budget=max_tokens, score_parts=score_parts)


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
