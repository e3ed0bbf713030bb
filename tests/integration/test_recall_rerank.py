"""Reranking: recall's best candidates reordered by an endpoint, which never fails a recall."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from stash_pipeline.memory import episodes, namespaces
from stash_pipeline.recall import recall_results
from stash_pipeline.recall.rerank import is_tei, parse_scores
from testkit.openai_server import ScriptedOpenAI

TEXTS = [
    "budget meeting budget meeting budget meeting notes",
    "the budget meeting agenda has three items",
    "the meeting about money moved to Thursday afternoon",
    "lunch is at noon in the small kitchen",
]
QUESTION = "budget meeting"


def prefers_thursday(query: str, texts: list[str]) -> list[float]:
    """A cross-encoder that knows the moved meeting is the answer."""
    return [0.99 if "Thursday" in t else 0.1 + 0.01 * len(set(query.split()) & set(t.split())) for t in texts]


@pytest.fixture
def reranker() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI(reranker=prefers_thursday) as server:
        yield server


def fill(store: Any) -> None:
    namespaces.create(store, "/r")
    for text in TEXTS:
        episodes.remember(store, "/r", text)


def ranked(store: Any) -> list[dict[str, Any]]:
    return recall_results(store, QUESTION, ["/r"], include_score_parts=True, context=0)["results"]


@pytest.mark.parametrize("path", ["/rerank", "/v1/rerank"])
def test_the_endpoint_orders_the_best_candidates(make_store: Any, reranker: ScriptedOpenAI, path: str) -> None:
    plain = make_store()
    fill(plain)
    before = ranked(plain)
    assert "Thursday" not in before[0]["content"]  # recall's own order: the test can fail
    store = make_store(rerank_url=f"http://127.0.0.1:{reranker.port}{path}", rerank_model="bge-reranker",
                       rerank_candidates=3)
    after = ranked(store)
    assert "Thursday" in after[0]["content"]
    assert after[0]["score_parts"]["rerank"] == pytest.approx(0.99)
    assert {r["id"] for r in after} == {r["id"] for r in before}  # the same evidence, reordered
    sent = reranker.rerank_requests()[-1]
    texts = sent["body"].get("texts") or sent["body"]["documents"]
    assert sent["body"]["query"] == QUESTION and len(texts) == 3
    assert ("texts" in sent["body"]) == (path == "/rerank")
    if path == "/v1/rerank":
        assert sent["body"]["model"] == "bge-reranker"


@pytest.mark.parametrize("failure", ["status", "late"])
def test_a_failing_or_slow_endpoint_leaves_recall_its_own_order(make_store: Any, failure: str) -> None:
    with ScriptedOpenAI(reranker=prefers_thursday, rerank_status=500 if failure == "status" else 200,
                        rerank_delay_s=2.0 if failure == "late" else 0.0) as server:
        plain = make_store()
        fill(plain)
        expected = [r["id"] for r in ranked(plain)]
        store = make_store(rerank_url=f"http://127.0.0.1:{server.port}/rerank", rerank_timeout_s=0.3)
        started = time.monotonic()
        got = ranked(store)
        assert time.monotonic() - started < 1.8  # did not wait for the slow endpoint's answer
        assert [r["id"] for r in got] == expected
        assert all("rerank" not in r["score_parts"] for r in got)
        assert server.rerank_requests()


def test_an_answer_must_score_every_candidate_once() -> None:
    assert parse_scores([{"index": 1, "score": 0.2}, {"index": 0, "score": 0.9}], 2) == [0.9, 0.2]
    assert parse_scores({"results": [{"index": 0, "relevance_score": 1}]}, 1) == [1.0]
    for bad in ([{"index": 0, "score": 1}], [{"index": 0, "score": 1}, {"index": 0, "score": 2}],
                [{"index": 0, "score": "x"}, {"index": 1, "score": 1}], {"nope": []}, [{"index": 5, "score": 1}]):
        with pytest.raises(ValueError):
            parse_scores(bad, 2)


def test_the_url_chooses_the_request_shape() -> None:
    assert is_tei("http://tei:8080/rerank")
    assert not is_tei("http://llama:8080/v1/rerank") and not is_tei("https://api.cohere.com/v2/rerank")
    assert not is_tei("http://jina/v1/rerank/")
