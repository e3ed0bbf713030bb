"""Reranking: recall's best candidates reordered by a cross-encoder behind an endpoint.

Hybrid retrieval finds the evidence; a cross-encoder, reading the question and each
candidate together, orders it better than any score computed from the two apart. With
``STASH_RERANK_URL`` set, the ``rerank_candidates`` best rows of the ``recall`` statement
are sent to that endpoint and come back in its order, ahead of the rest (which keep
theirs); grouping then works on that order (``grouping.shape``'s ``order``). A row's score
stays its own, so ``relevance`` keeps its meaning; its ``score_parts["rerank"]`` is the
endpoint's score.

Two request shapes, chosen by the URL: a path ending in ``/rerank`` without a version
(``/rerank``, Hugging Face TEI) takes ``{"query", "texts"}`` and answers
``[{"index", "score"}]``; any other (``/v1/rerank``: llama.cpp's server with
``--reranking``, vLLM, Jina, Cohere) takes ``{"model", "query", "documents", "top_n"}`` and
answers ``{"results": [{"index", "relevance_score"}]}``. Either answer is read.

The endpoint never fails a recall: past ``rerank_timeout_s``, on an HTTP error or an
answer that does not name every candidate once, the recall keeps its own order and the
failure is logged.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from stash_pipeline.config import Settings

log = logging.getLogger("stash.recall.rerank")

#: characters of a candidate sent to the endpoint (cross-encoders read ~512 tokens)
TEXT_CHARS = 2000
#: the largest answer read (a score per candidate is a few dozen bytes)
ANSWER_BYTES_MAX = 1_000_000


def is_tei(url: str) -> bool:
    """Whether ``url`` takes TEI's request (a ``/rerank`` path without an API version)."""
    parts = [p for p in urlsplit(url).path.split("/") if p]
    return bool(parts) and parts[-1] == "rerank" and not any(p.startswith("v") and p[1:].isdigit() for p in parts)


def request_body(settings: Settings, query: str, texts: Sequence[str]) -> dict[str, Any]:
    """The JSON body the configured endpoint takes."""
    clipped = [t[:TEXT_CHARS] for t in texts]
    if is_tei(str(settings.rerank_url)):
        return {"query": query, "texts": clipped, "truncate": True}
    body: dict[str, Any] = {"query": query, "documents": clipped, "top_n": len(clipped)}
    if settings.rerank_model:
        body["model"] = settings.rerank_model
    return body


def parse_scores(answer: Any, count: int) -> list[float]:
    """Each candidate's score, by its index, from either answer shape; ValueError unless every
    index in ``range(count)`` is scored exactly once."""
    items = answer.get("results") if isinstance(answer, dict) else answer
    if not isinstance(items, list):
        raise ValueError("the answer holds no list of scores")
    scores: dict[int, float] = {}
    for item in items:
        if not isinstance(item, dict):
            raise ValueError("a score is not an object")
        index, score = item.get("index"), item.get("relevance_score", item.get("score"))
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count or index in scores:
            raise ValueError(f"bad or repeated index {index!r}")
        if not isinstance(score, int | float) or isinstance(score, bool):
            raise ValueError(f"bad score {score!r}")
        scores[index] = float(score)
    if len(scores) != count:
        raise ValueError(f"{count - len(scores)} of {count} candidates not scored")
    return [scores[i] for i in range(count)]


def scores(settings: Settings, query: str, texts: Sequence[str]) -> list[float] | None:
    """The endpoint's score of each text for ``query``; None when it failed (logged)."""
    url = str(settings.rerank_url)
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if settings.rerank_api_key is not None:
        headers["Authorization"] = f"Bearer {settings.rerank_api_key.get_secret_value()}"
    data = json.dumps(request_body(settings, query, texts)).encode()
    try:
        request = urllib.request.Request(url, data=data, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=settings.rerank_timeout_s) as response:
            body = response.read(ANSWER_BYTES_MAX + 1)
        if len(body) > ANSWER_BYTES_MAX:
            raise ValueError(f"the answer is larger than {ANSWER_BYTES_MAX} bytes")
        return parse_scores(json.loads(body), len(texts))
    except (OSError, ValueError) as exc:  # URLError, timeouts, HTTP errors, bad JSON or shape
        log.warning("reranking endpoint %s failed, recall keeps its own order: %s", url, exc)
        return None


def reranked(settings: Settings, query: str, rows: list[dict[str, Any]]) -> dict[tuple[str, int], float] | None:
    """Grouping's order after reranking: (kind, id) -> rank key, the endpoint's order for the
    ``rerank_candidates`` best rows, then the others in theirs; each reranked row gets its
    ``rerank`` score. None without an endpoint, with fewer than two rows or on failure."""
    if not settings.rerank_url or len(rows) < 2:
        return None
    head = rows[: settings.rerank_candidates]
    found = scores(settings, query, [str(r["content"]) for r in head])
    if found is None:
        return None
    for row, score in zip(head, found, strict=True):
        row["rerank"] = score
    order = sorted(range(len(head)), key=lambda i: (-found[i], i)) + list(range(len(head), len(rows)))
    # keys in (0, 1], best first, steps of 1/n: the scale of a score, so diversity still weighs
    return {(rows[i]["kind"], int(rows[i]["id"])): 1 - place / len(rows) for place, i in enumerate(order)}
