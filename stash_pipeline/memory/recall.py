"""Recall: hybrid retrieval over current facts and episodes, ranked together.

One SQL statement (``recall_hybrid``) gathers candidates — pgvector HNSW cosine over facts
and over episodes, and full-text matches of the query's rarest words — and scores each:

* ``vector``: cosine similarity to the query;
* ``text``: Okapi BM25 (k1 = BM25_K1, b = BM25_B) with per-namespace document
  frequencies and lengths that triggers keep current on every write, forget, purge and
  namespace deletion (``recall_term_stats`` / ``recall_text_stats``);
* ``coverage``: BM25 divided by the sum of the query words' idf, i.e. the share of the
  query's information the row matches (unseen query words count: "quantum banana
  telescope" matches nothing and covers 0);
* fused: ``W_VECTOR * cosine + (1 - W_VECTOR) * coverage``, times STALE_FACTOR for an
  episode whose derived facts were all retired (its correction wins);
* supersession by recency (hybrid mode): an episode candidate with a *newer* episode
  candidate in the same namespace (later ``occurred_at``) that is a near-duplicate —
  embedding cosine >= SUPERSEDE_SIMILARITY and matching every query word the older one
  matches — is taken as restated or corrected by it. Its score drops to just below the
  newer one's (SUPERSEDE_MARGIN times it), but never below SUPERSEDED_FACTOR times its
  own: the correction outranks the old value, which otherwise keeps its place (a
  multi-session answer still finds both). The word test keeps look-alikes that differ in
  a detail the query names (another service, day or person) from demoting each other.
  Only the best ``limit + CONTEXT_POOL`` candidates are checked against the others (a
  demotion only lowers a score), which bounds the pairs compared. Not applied with
  ``as_of``, ``known_at`` or ``include_history``, nor when the query asks about a time
  (``asks_about_time``: a month, year or date, "before", "used to", "originally" ...),
  since then the old value may be the answer;
* ``context``: in hybrid mode, an episode within CONTEXT_WINDOW turns of one of the best
  CONTEXT_POOL episodes, in the same session (same given ``occurred_at``, or the same
  ``metadata.session`` / ``metadata.thread``), gains NEIGHBOUR_WEIGHT times that hit's
  score: in a conversation the answer is often the reply after the turn naming the topic.

* ``entity`` (hybrid mode, current facts only): when the query names a known entity by an
  alias, that entity's current facts and its neighbours' (one current relationship
  away, bounded) join the candidates, scored as above with the name's words counted as
  matched in the facts that lack them (``memory/entity_recall.py``). A query naming no
  entity ranks exactly as without it.

``relevance`` is the score clipped to [0, 1]. It is absolute (cosine and coverage do not
depend on the other results), so an agent can threshold it: below RELEVANCE_FLOOR a hit is
probably not about the query.

``recall`` returns ``RecallHit`` records; ``recall_results`` returns the lean JSON shape
for agents (no nulls, score_parts on request, neighbour turns as ``context``, max_tokens
counted on the serialised results). Retired facts are excluded unless asked
(``include_history``, ``as_of``, ``known_at``). Results never carry vectors.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from stash_pipeline import errors
from stash_pipeline.memory import entity_recall, recall_grouping, validate
from stash_pipeline.memory.scope import read_scope
from stash_pipeline.models import RecallHit
from stash_pipeline.store import Store

# Ranking constants (module level so bench/ can tune them; chosen on the DEV split of the
# conversational set in bench/data, see bench/README.md).
#: weight of the cosine similarity in the fused score; the rest goes to BM25 coverage
W_VECTOR = 0.4
#: Okapi BM25 parameters (the usual defaults)
BM25_K1 = 1.2
BM25_B = 0.75
#: candidates per vector list = max(MIN_CANDIDATES, CANDIDATE_FACTOR * limit)
CANDIDATE_FACTOR = 3
MIN_CANDIDATES = 30
#: full-text candidates: the query's rarest lexemes are matched while their summed
#: document frequency stays within this many rows (per kind, newest first beyond it)
TEXT_SCAN_LIMIT = 400
#: of those matches, the best this many by BM25 join the vector candidates (cosine and the
#: fused score are computed for the union only)
TEXT_CANDIDATES = 60
EF_SEARCH = 100
#: hybrid mode: an episode within CONTEXT_WINDOW turns of one of the best CONTEXT_POOL
#: episodes (same namespace, same session) gains NEIGHBOUR_WEIGHT times that hit's score:
#: in a conversation the turn that answers often follows the one that names the subject
NEIGHBOUR_WEIGHT = 0.35
CONTEXT_POOL = 20
#: how many episodes on each side of a hit count as its neighbours
CONTEXT_WINDOW = 2
#: ``relevance`` below this means "probably not about the query" (a query about nothing,
#: "quantum banana telescope", stays under it; chosen on the DEV split, bench/README.md)
RELEVANCE_FLOOR = 0.3
#: factor on an episode whose derived facts were all retired (its correction should win)
STALE_FACTOR = 0.5
#: supersession by recency: an episode candidate with a NEWER episode candidate in the same
#: namespace at least this similar (embedding cosine) that matches every query word it
#: matches is taken as restated or corrected (chosen on the DEV split of the agent-memory
#: set's ``updated`` questions, with both sets' recall@10 held, bench/README.md)
SUPERSEDE_SIMILARITY = 0.5
#: the older one then scores SUPERSEDE_MARGIN times the newer one's score (just below it) ...
SUPERSEDE_MARGIN = 0.99
#: ... but never less than this factor times its own score
SUPERSEDED_FACTOR = 0.5
LIMIT_DEFAULT = 10
LIMIT_MAX = 100
#: turns on each side of an episode hit that recall_results returns with it by default
CONTEXT_DEFAULT = 1
CONTEXT_MAX = 5
MODES = ("hybrid", "vector", "text")


def _limit(limit: Any) -> int:
    if limit is None:
        return LIMIT_DEFAULT
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= LIMIT_MAX:
        raise errors.InvalidInput(f"limit must be an integer between 1 and {LIMIT_MAX}")
    return limit


def _max_tokens(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise errors.InvalidInput("max_tokens must be a positive integer")
    return value


def estimate_tokens(text: str) -> int:
    """Rough token count (≈ 4 characters per token), used for the max_tokens budget."""
    return _tokens_of(len(text))


def _within_budget(hits: list[RecallHit], max_tokens: int | None) -> list[RecallHit]:
    if max_tokens is None:
        return hits
    out: list[RecallHit] = []
    spent = 0
    for hit in hits:
        cost = estimate_tokens(hit.content) + sum(estimate_tokens(s.excerpt) for s in hit.sources or ())
        if spent + cost > max_tokens:
            break  # keep rank order: never let a shorter, lower-ranked hit jump the queue
        spent += cost
        out.append(hit)
    return out


def recall(
    store: Store,
    query: str,
    namespaces: Any = "/",
    *,
    limit: int = LIMIT_DEFAULT,
    as_of: datetime | str | None = None,
    include_history: bool = False,
    max_tokens: int | None = None,
    mode: str = "hybrid",
    known_at: datetime | str | None = None,
    grouping: recall_grouping.GroupingConfig = recall_grouping.DEFAULT,
) -> list[RecallHit]:
    """Facts and episodes most relevant to ``query``, best first (hybrid vector + full text).

    Two times, both now by default: ``as_of`` (event time: facts valid then, episodes that
    had occurred by then) and ``known_at`` (system time: what Stash had recorded and not
    withdrawn or forgotten by then, with a fact's interval as Stash believed it then, see
    ``memory.facts``). ``include_history`` without either time returns retired facts too.
    A fact hit carries its source episodes, which then take no slot of their own
    (``memory/recall_grouping.py``, tuned by ``grouping``).
    """
    text = validate.content(store.settings, query, "query")
    limit = _limit(limit)
    fetch = recall_grouping.fetch_limit(limit, grouping)  # grouping frees slots: a few more candidates
    budget = _max_tokens(max_tokens)
    when = validate.timestamp(as_of, "as_of")
    known = validate.timestamp(known_at, "known_at")
    if mode not in MODES:
        raise errors.InvalidInput(f"mode must be one of {', '.join(MODES)}")
    use_vector = mode in ("hybrid", "vector")
    use_text = mode in ("hybrid", "text")
    with store.db.transaction() as tx:
        all_ns, ids = read_scope(tx, namespaces)
    embedding = store.embedder.embed_one(text) if use_vector else None
    # entity leg (memory/entity_recall.py): current facts of the entities the query names
    entity_leg = (entity_recall.ENABLED and use_vector and use_text
                  and when is None and known is None and not include_history)
    phrases = entity_recall.query_phrases(text) if entity_leg else []
    with store.db.transaction() as tx:
        # the entity leg first: recall_search_params turns off sequential scans, sorts and
        # custom plans for the rest of the transaction, which suits recall_hybrid only
        named = tx.all("recall_entity_names", **entity_recall.named_parameters(phrases, all_ns, ids)) if phrases else []
        found = tx.all("recall_entity_facts", **entity_recall.parameters(
            text, named, embedding, all_ns, ids, w_vector=W_VECTOR, k1=BM25_K1, b=BM25_B)) if named else []
        with tx.conn.pipeline():  # the settings and the search share one round trip
            tx.one("recall_search_params", ef_search=str(EF_SEARCH))
            rows = tx.all(
                "recall_hybrid",
                query=text,
                embedding=embedding,
                use_vector=use_vector,
                use_text=use_text,
                text_scan_limit=TEXT_SCAN_LIMIT,
                all_namespaces=all_ns,
                namespace_ids=ids,
                as_of=when,
                known_at=known,
                include_history=bool(include_history),
                candidates=max(MIN_CANDIDATES, CANDIDATE_FACTOR * limit),
                text_candidates=TEXT_CANDIDATES,
                limit=fetch,
                w_vector=W_VECTOR,
                k1=BM25_K1,
                b=BM25_B,
                stale_factor=STALE_FACTOR,
                supersede=use_vector and use_text and not asks_about_time(text),
                supersede_similarity=SUPERSEDE_SIMILARITY,
                superseded_factor=SUPERSEDED_FACTOR,
                supersede_margin=SUPERSEDE_MARGIN,
                # what can reach the results or the context pool
                supersede_pool=limit + CONTEXT_POOL,
                # neighbours lift hits in hybrid mode only: the single-signal modes are
                # the baselines it is measured against
                neighbour_weight=NEIGHBOUR_WEIGHT if use_vector and use_text else 0.0,
                context_pool=CONTEXT_POOL,
                context_window=CONTEXT_WINDOW,
            )
    if found:
        rows = entity_recall.fuse(rows, found, recall_grouping.fetch_limit(limit, grouping, len(found)))
    hits = recall_grouping.apply(store, [_hit(r) for r in rows], limit, grouping, known)
    return _within_budget(hits, budget)


def compact(hit: RecallHit, *, score_parts: bool = False) -> dict[str, Any]:
    """One hit as an agent reads it: no null or empty fields, score_parts only when asked."""
    data: dict[str, Any] = {}
    for key, value in hit.to_json().items():
        if key == "score":
            data["score"] = round(hit.score, 4)
            data["relevance"] = hit.relevance  # beside the score it makes comparable
        elif key == "score_parts":
            if score_parts:
                data["score_parts"] = {part: round(v, 4) for part, v in value.items() if v is not None}
        elif key in ("sources", "grouped"):
            data |= recall_grouping.compact_parts(key, value, score_parts=score_parts)
        elif key == "source_episode_ids" and hit.sources is not None and {s.id for s in hit.sources} >= set(value):
            continue  # every id is in ``sources``, with its date and text
        elif value is not None and value != {} and value != []:
            data[key] = value
    return data


def _wire(item: Any) -> str:
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"), default=str)


def _tokens_of(characters: int) -> int:
    return max(1, (characters + 3) // 4)


def serialised_tokens(item: Any) -> int:
    """Tokens of ``item`` as it goes over the wire (compact JSON), the max_tokens currency."""
    return _tokens_of(len(_wire(item)))


def _context_window(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= CONTEXT_MAX:
        raise errors.InvalidInput(f"context must be an integer between 0 and {CONTEXT_MAX}")
    return value


def recall_results(
    store: Store,
    query: str,
    namespaces: Any = "/",
    *,
    limit: int = LIMIT_DEFAULT,
    as_of: datetime | str | None = None,
    include_history: bool = False,
    max_tokens: int | None = None,
    mode: str = "hybrid",
    context: int = CONTEXT_DEFAULT,
    score_parts: bool = False,
    known_at: datetime | str | None = None,
    grouping: recall_grouping.GroupingConfig = recall_grouping.DEFAULT,
) -> dict[str, Any]:
    """Recall in the lean shape agents get: ``{"results": [compact hits]}``.

    ``context`` adds up to that many turns on each side of an episode hit from its session
    (``"context": [{"id", "content"}]``, in order), leaving out turns that are results
    themselves or a fact result's ``sources``. A fact result carries its source episodes as
    ``sources`` (``[{"id", "occurred_at", "excerpt"}]``, instead of ``source_episode_ids``)
    and the episodes it represents take no slot; with ``score_parts`` it also lists what was
    folded into it (``grouped``) and each source's own ``score``. ``max_tokens`` bounds
    the serialised results (every field, context and sources included), in rank order: a
    result that does not fit ends the list.
    """
    budget = _max_tokens(max_tokens)
    window = _context_window(context)
    hits = recall(
        store, query, namespaces, limit=limit, as_of=as_of, include_history=include_history, mode=mode,
        known_at=known_at, grouping=grouping,
    )
    around: dict[int, list[dict[str, Any]]] = {}
    episode_ids = [h.id for h in hits if h.kind == "episode"]
    shown = set(episode_ids) | {s.id for h in hits for s in h.sources or ()}
    if window and episode_ids:
        with store.db.transaction() as tx:
            for row in tx.all("recall_neighbours", ids=episode_ids, window=window):
                if int(row["id"]) not in shown:
                    around.setdefault(int(row["hit_id"]), []).append({"id": int(row["id"]), "content": row["content"]})
    results: list[dict[str, Any]] = []
    characters = len(_wire({"results": []}))
    for hit in hits:
        item = compact(hit, score_parts=score_parts)
        if hit.kind == "episode" and around.get(hit.id):
            item["context"] = around[hit.id]
        # exactly the characters this item adds to the serialised answer (and a comma)
        added = len(_wire(item)) + (1 if results else 0)
        if budget is not None and _tokens_of(characters + added) > budget:
            break
        characters += added
        results.append(item)
    return {"results": results}


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
#: set False to measure recall without the query-side guard
TIME_GUARD = True


def asks_about_time(query: str) -> bool:
    """Whether ``query`` names a date, month or year or asks about the past ("used to").

    Such a query wants the value as it was then, so newer near-duplicates must not demote it.
    """
    return TIME_GUARD and _TIME_WORDS.search(query) is not None


_IDENTIFIER = re.compile(r"[A-Za-z0-9][\w.-]*(?:\d[\w.-]*|[-_][\w.-]+)")


def identifier_tokens(text: str) -> list[str]:
    """The query's identifier-like tokens: "INC-8870", "ERR_CONN_RESET", "v7.4.2", "5432"."""
    tokens = [t.rstrip(".-_") for t in _IDENTIFIER.findall(text)]
    return [t for t in tokens if any(ch.isdigit() for ch in t) or "-" in t or "_" in t]


def _optional(value: Any) -> float | None:
    return None if value is None else float(value)


def _hit(row: dict[str, Any]) -> RecallHit:
    is_fact = row["kind"] == "fact"
    return RecallHit(
        kind=row["kind"],
        id=int(row["id"]),
        namespace=row["namespace"],
        content=row["content"],
        score=float(row["score"]),
        score_parts={
            "vector": _optional(row["cosine"]),
            "text": _optional(row["bm25"]),
            "coverage": _optional(row["coverage"]),
            "context": _optional(row["context_score"]),
        }
        # the entity leg's score, on the facts it reached (memory/entity_recall.py)
        | ({"entity": float(row["entity_score"])} if row.get("entity_score") is not None else {}),
        confidence=float(row["confidence"]) if is_fact else None,
        occurred_at=None if is_fact else row["occurred_at"],
        valid_from=row["valid_from"] if is_fact else None,
        valid_until=row["valid_until"] if is_fact else None,
        source_episode_ids=[int(i) for i in row["source_episode_ids"]] if is_fact else None,
        metadata=None if is_fact else row["metadata"],
        current=bool(row["current"]) if is_fact else None,
    )


def facts_first_recall(store: Store, query: str, namespaces: Any = "/", *, limit: int = LIMIT_DEFAULT) -> list[RecallHit]:
    """The reference's recall (benchmark baseline): facts take slots first, raw cosine, no full text."""
    text = validate.content(store.settings, query, "query")
    limit = _limit(limit)
    with store.db.transaction() as tx:
        all_ns, ids = read_scope(tx, namespaces)
    embedding = store.embedder.embed_one(text)
    with store.db.transaction() as tx:
        tx.one("recall_search_params", ef_search=str(EF_SEARCH))
        params = {"embedding": embedding, "all_namespaces": all_ns, "namespace_ids": ids}
        fact_rows = tx.all("recall_facts_first_facts", limit=limit, **params)
        episode_rows = (
            tx.all("recall_facts_first_episodes", limit=limit - len(fact_rows), **params)
            if len(fact_rows) < limit
            else []
        )
    hits = [
        RecallHit(
            kind=r["kind"],
            id=int(r["id"]),
            namespace=r["namespace"],
            content=r["content"],
            score=float(r["similarity"]),
            score_parts={"vector": float(r["similarity"]), "text": None},
            confidence=float(r["confidence"]) if r["kind"] == "fact" else None,
            occurred_at=r.get("occurred_at"),
            valid_from=r.get("valid_from"),
            valid_until=r.get("valid_until"),
            metadata=r.get("metadata"),
        )
        for r in fact_rows + episode_rows
    ]
    hits.sort(key=lambda h: h.score, reverse=True)
    return hits[:limit]
