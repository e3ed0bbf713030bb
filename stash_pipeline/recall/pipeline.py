"""Recall: hybrid retrieval over current facts and episodes, ranked together, as one pipeline.

A ``RecallRequest`` (``request.py``) goes through:

1. ``vectors.prepared``: the statement's parameters (``parameters.py``) and the text the
   query's vector is made from (names common in scope masked);
2. ``statement.round_trip``: the ``recall`` statement (``queries/recall.sql``, where
   every ranking rule is written: legs, scoring, context, entity leg, fusion) in one
   round trip; a text this process has not cached is embedded before it when the model is
   local (``CachedEmbedder.embeds_first``), otherwise its vector is read from the cache
   and a second round trip follows the model only when it was not there;
3. ``rerank.reranked``: with a reranking endpoint configured, the best candidates in its order;
   ``grouping.group``: one result per piece of evidence;
4. ``shape``: the agent's answer (``answer``) or ``RecallHit`` records (``hits``).

Reads see the writes they follow: episodes committed before their vector
(``STASH_EMBED_ON_WRITE=async``) are invisible to the vector legs until a worker embeds
them, so when the round trip counts some in scope, the recall embeds them itself (up to
``READ_YOUR_WRITES``, waiting for those a worker is embedding right now) and runs again;
any left are reported as ``pending`` in the answer. For ``PENDING_RECENT_S`` after a recall
found some, the next recall in the same scope embeds them before its round trip; when that
left none of those waiting as it began, the round trip sees every write the recall follows,
and episodes its count still finds waiting were written since (``pending``, no second
run): under a stream of writes a recall runs the statement once, not twice.

``relevance`` is the score clipped to [0, 1], absolute, so an agent can threshold it at
``relevance_floor``. Results never carry vectors. ``recall`` and ``recall_results`` build
the request from keyword arguments for callers of the library.
"""

from __future__ import annotations

import time
from typing import Any

from stash_pipeline.memory import validate
from stash_pipeline.memory.pending import embed_pending_in
from stash_pipeline.models import RecallHit
from stash_pipeline.recall import grouping, rerank
from stash_pipeline.recall.request import RecallRequest
from stash_pipeline.recall.shape import shape_results, to_hit, within_budget
from stash_pipeline.recall.statement import Found, round_trip
from stash_pipeline.recall.vectors import prepared, query_vector
from stash_pipeline.store import Store

#: one recall's results, each with its episode's context turns
Ranked = list[tuple[RecallHit, list[dict[str, Any]]]]
#: episodes in scope still waiting for their vector that a recall embeds itself, at most
#: (more: the answer says how many still wait, ``pending``)
READ_YOUR_WRITES = 64
#: seconds after a recall found episodes waiting in its scope during which recalls there
#: embed the waiting ones before searching (``Store.pending_seen``)
PENDING_RECENT_S = 2.0


def search(store: Store, request: RecallRequest) -> Found:
    """The ranked rows of one recall (the statement's), each episode's context turns with it,
    having seen every write acknowledged before it (``READ_YOUR_WRITES``)."""
    embedder = store.embedder
    if request.use_vector:
        embedder.ensure_lock()  # (once per process) the model the stored vectors were made with
    params, masked = prepared(store, request)
    config, key = request.config, params["text_hash"]
    scope, caught_up = tuple(request.paths), False
    if request.use_vector and time.monotonic() - store.pending_seen.get(scope, -PENDING_RECENT_S) < PENDING_RECENT_S:
        # writes go on here: what waits now is embedded first, and then the round trip sees it
        caught_up = embed_pending_in(store, list(request.paths), limit=READ_YOUR_WRITES)
    if request.use_vector and embedder.embeds_first(key):  # a new query, a local model: embed, then one round trip
        params["embedding"] = query_vector(embedder, request.query, masked, config)
        found = round_trip(store, params, config, cache=True)
    else:
        found = round_trip(store, params, config)
        if found.needs_vector:  # not cached after all: the model embeds it, then the search runs
            params["embedding"] = query_vector(embedder, request.query, masked, config)
            found = round_trip(store, params, config, cache=True)
    if request.use_vector:
        embedder.note_cached(key)
        if found.pending:
            _note_pending(store, scope)
        if found.pending and not caught_up:
            # episodes written just before, still without their vector: embedded here, or by the
            # worker this waited for; then seen
            embed_pending_in(store, list(request.paths), limit=READ_YOUR_WRITES)
            found = round_trip(store, params, config)
    return found


def _note_pending(store: Store, scope: tuple[str, ...]) -> None:
    """Remember that a recall in ``scope`` found episodes waiting for their vector (the
    table stays small: entries older than ``PENDING_RECENT_S`` go once it holds 1,024)."""
    now = time.monotonic()
    seen = store.pending_seen
    if len(seen) >= 1024:
        for old in [s for s, when in list(seen.items()) if now - when >= PENDING_RECENT_S]:
            seen.pop(old, None)
    seen[scope] = now


def rank(store: Store, request: RecallRequest) -> tuple[Ranked, int]:
    """The ``limit`` results of one recall, each with its context turns (the statement's rows
    as hits, then grouping's post-ranking step, ``grouping.group``), and how many episodes in
    scope still wait for their vector."""
    found = search(store, request)
    rows = found.rows
    order = rerank.reranked(store.settings, request.query, rows)  # None: no endpoint, or it failed
    ranked = grouping.group([(to_hit(r), r["context"] or []) for r in rows], request.limit,
                            grouping.source_rows(rows), request.config, order, grouping.repeat_rows(rows))
    return ranked, found.pending if request.use_vector else 0


def hits(store: Store, request: RecallRequest) -> list[RecallHit]:
    """The results as ``RecallHit`` records, within ``max_tokens`` (content and source excerpts)."""
    ranked, _ = rank(store, request)
    return within_budget([hit for hit, _ in ranked], request.max_tokens)


def answer(store: Store, request: RecallRequest) -> dict[str, Any]:
    """The results in the lean shape agents get: ``{"results": [compact hits]}`` (``shape.py``),
    and ``pending``: the episodes in scope a vector leg could not see yet, when there are some."""
    ranked, pending = rank(store, request)
    shaped = shape_results(ranked, budget=request.max_tokens, score_parts=request.include_score_parts)
    return shaped | {"pending": pending} if pending else shaped


def recall(store: Store, query: str, namespaces: list[str], **options: Any) -> list[RecallHit]:
    """Facts and episodes most relevant to ``query``, best first, as ``RecallHit`` records.

    Two times, both now by default: ``as_of`` (event time: facts valid then, episodes that
    had occurred by then) and ``known_at`` (system time: what Stash had recorded and not
    withdrawn or forgotten by then). ``include_history`` without either time returns
    retired facts too. ``config`` is the ranking's tuning (``config.py``). The options are
    ``RecallRequest``'s fields; no context turns.
    """
    return hits(store, RecallRequest.of(store.settings, query, namespaces, **options))


def recall_results(store: Store, query: str, namespaces: list[str], **options: Any) -> dict[str, Any]:
    """Recall in the lean shape agents get (``answer``); ``context`` defaults to the tool's.

    ``context`` adds up to that many turns on each side of an episode hit from its session,
    leaving out turns that are results themselves or a fact result's ``sources``. A fact
    result carries its source episodes as ``sources``; with ``score_parts`` it also lists
    what was folded into it (``grouped``). ``max_tokens`` bounds the serialised results in
    rank order: a result that does not fit ends the list.
    """
    options.setdefault("context", validate.RECALL_CONTEXT_DEFAULT)
    return answer(store, RecallRequest.of(store.settings, query, namespaces, **options))
