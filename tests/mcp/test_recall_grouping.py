"""The recall tool's answer when a fact and its source episodes are found together: one
result carrying its sources compactly, the grouping explained by ``include_score_parts``,
and ``max_tokens`` counting every character sent, through the real SDK client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client

from stash_pipeline import recall
from stash_pipeline.operations.results import RecallItem, SourceTurn
from tests.mcp.conftest import ok

pytestmark = pytest.mark.anyio

TURNS = [
    "Caroline: How was your week?",
    "Melanie: Busy! I started a pottery class on Thursday nights at the community center.",
    "Caroline: That sounds so relaxing. Made anything yet?",
    "Melanie: Oh yeah, bowls that came out lopsided. I love them anyway.",
]


async def _chat(client: Client) -> tuple[list[int], int]:
    await ok(client, "create_namespace", {"namespace": "/chat", "description": "a chat"})
    ids = []
    for text in TURNS:
        ids.append((await ok(client, "remember", {"content": text, "namespace": "/chat",
                                                  "occurred_at": "2023-03-15T12:00:00Z"}))["id"])
    fact = await ok(client, "assert_fact", {
        "content": "Melanie attends a weekly pottery class at the community centre", "namespace": "/chat",
        "entity": "Melanie", "property": "craft", "value": "pottery", "source_episode_ids": [ids[1], ids[3]],
        "valid_from": "2023-03-15T12:00:00Z"})
    return ids, fact["fact"]["id"]


async def test_a_fact_arrives_with_its_sources_as_one_result(server: Any) -> None:
    async with Client(server) as client:
        ids, fact_id = await _chat(client)
        arguments = {"query": "Melanie pottery class", "namespaces": "/chat"}
        results = (await ok(client, "recall", arguments))["results"]
        item = next(r for r in results if r["kind"] == "fact")
        assert item["id"] == fact_id
        assert [s["id"] for s in item["sources"]] == [ids[1], ids[3]]
        assert all(list(s) == ["id", "occurred_at", "excerpt"] for s in item["sources"])
        assert "source_episode_ids" not in item and "grouped" not in item
        # the source turns take no slot of their own, and context never repeats them
        assert not {ids[1], ids[3]} & {r["id"] for r in results if r["kind"] == "episode"}
        assert not {ids[1], ids[3]} & {c["id"] for r in results for c in r.get("context", ())}
        # the published fields, in their order
        fields = list(RecallItem.model_fields)
        assert all([key for key in fields if key in r] == list(r) for r in results)
        assert list(SourceTurn.model_fields)[:3] == ["id", "occurred_at", "excerpt"]

        detailed = (await ok(client, "recall", {**arguments, "include_score_parts": True}))["results"]
        item = next(r for r in detailed if r["kind"] == "fact")
        assert item["grouped"] and {g["id"] for g in item["grouped"]} <= {ids[1], ids[3]}
        assert "own" in item["score_parts"] and any("score" in s for s in item["sources"])


async def test_max_tokens_counts_the_sources_sent(server: Any) -> None:
    async with Client(server) as client:
        await _chat(client)
        arguments = {"query": "Melanie pottery class", "namespaces": "/chat"}
        everything = (await ok(client, "recall", arguments))["results"]
        assert everything[0]["kind"] == "fact"
        budget = recall.serialised_tokens({"results": everything[:1]})
        result = await client.call_tool("recall", {**arguments, "max_tokens": budget})
        fitted = result.structured_content["results"]
        assert fitted == everything[:1]
        assert (len(json.dumps({"results": fitted}, separators=(",", ":"), ensure_ascii=False)) + 3) // 4 <= budget
        without_sources = recall.serialised_tokens({"results": [{**everything[0], "sources": []}]})
        assert (await ok(client, "recall", {**arguments, "max_tokens": without_sources}))["results"] == []
