"""Recall's results as agents read them: rows to ``RecallHit`` records, the lean JSON answer, token budgets.

``recall/pipeline.py`` runs the statement and grouping (``recall/grouping.py``) picks
the results; this module gives them their final shape. ``to_hit`` turns a ``recall``
statement row into a hit (its score parts: vector, text, coverage, context, and the
entity leg's score and the weight it ranked by when there are some). ``compact`` drops
nulls and empty fields and keeps ``score_parts`` only on request; ``shape_results``
builds ``{"results": [...]}`` with each episode's context turns, within a ``max_tokens``
budget counted on the serialised answer (``serialised_tokens``: compact JSON, about four
characters a token), in rank order: a result that does not fit ends the list.
``within_budget`` is the same rule for ``RecallHit`` lists (content and source excerpts).
"""

from __future__ import annotations

import json
from typing import Any

from stash_pipeline.models import RecallHit
from stash_pipeline.recall import grouping


def _tokens_of(characters: int) -> int:
    return max(1, (characters + 3) // 4)


def estimate_tokens(text: str) -> int:
    """Rough token count (≈ 4 characters per token), used for the max_tokens budget."""
    return _tokens_of(len(text))


def _wire(item: Any) -> str:
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"), default=str)


def serialised_tokens(item: Any) -> int:
    """Tokens of ``item`` as it goes over the wire (compact JSON), the max_tokens currency."""
    return _tokens_of(len(_wire(item)))


def within_budget(hits: list[RecallHit], max_tokens: int | None) -> list[RecallHit]:
    if max_tokens is None:
        return hits
    out: list[RecallHit] = []
    spent = 0
    for hit in hits:
        cost = estimate_tokens(hit.content) + sum(estimate_tokens(s.excerpt)
                                                  for s in (*(hit.sources or ()), *(hit.repeated_in or ())))
        if spent + cost > max_tokens:
            break  # keep rank order: never let a shorter, lower-ranked hit jump the queue
        spent += cost
        out.append(hit)
    return out


def _optional(value: Any) -> float | None:
    return None if value is None else float(value)


def to_hit(row: dict[str, Any]) -> RecallHit:
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
        # the entity leg's score, on the facts it reached (recall/entities.py)
        | ({"entity": float(row["entity_score"])} if row.get("entity_score") is not None else {})
        # the weight the fact was ranked by (grouping: fact_weight, subject_weight)
        | ({"weight": float(row["weight"])} if row.get("weight") not in (None, 1) else {})
        # the reranking endpoint's score (rerank.py)
        | ({"rerank": float(row["rerank"])} if row.get("rerank") is not None else {}),
        confidence=float(row["confidence"]) if is_fact else None,
        occurred_at=None if is_fact else row["occurred_at"],
        valid_from=row["valid_from"] if is_fact else None,
        valid_until=row["valid_until"] if is_fact else None,
        source_episode_ids=[int(i) for i in row["source_episode_ids"]] if is_fact else None,
        member_fact_ids=[int(i) for i in row["member_fact_ids"]] if row["member_fact_ids"] is not None else None,
        metadata=None if is_fact else row["metadata"],
        current=bool(row["current"]) if is_fact else None,
    )


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
        elif key in ("sources", "repeated_in", "grouped"):
            data |= grouping.compact_parts(key, value, score_parts=score_parts)
        elif key == "source_episode_ids" and hit.sources is not None and {s.id for s in hit.sources} >= set(value):
            continue  # every id is in ``sources``, with its date and text
        elif value is not None and value != {} and value != []:
            data[key] = value
    return data


def shape_results(
    hits: list[tuple[RecallHit, list[dict[str, Any]]]], *, budget: int | None, score_parts: bool
) -> dict[str, Any]:
    """Ranked hits (each with its context turns) as the agent's answer, within ``budget`` tokens.

    The one place recall's results take their final shape: a step that regroups or
    diversifies the ranked hits runs before this.
    """
    results: list[dict[str, Any]] = []
    characters = len(_wire({"results": []}))
    for hit, around in hits:
        item = compact(hit, score_parts=score_parts)
        if hit.kind == "episode" and around:
            item["context"] = around
        if budget is not None:  # (no budget: nothing to count, the surface serialises once)
            # exactly the characters this item adds to the serialised answer (and a comma)
            added = len(_wire(item)) + (1 if results else 0)
            if _tokens_of(characters + added) > budget:
                break
            characters += added
        results.append(item)
    return {"results": results}
