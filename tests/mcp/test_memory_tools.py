"""Every memory tool's happy path and main error path, in-process with the SDK's Client."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client

from stash_pipeline.models import RecallHit
from stash_pipeline.operations.results import RecallItem
from stash_pipeline.stages import STAGES
from tests.mcp.conftest import fails, ok

pytestmark = pytest.mark.anyio


async def _project(client: Client, slug: str = "/p") -> None:
    await ok(client, "create_namespace", {"namespace": slug, "description": "test project"})


async def test_recall_shape_and_scope(server: Any) -> None:
    async with Client(server) as client:
        await _project(client, "/p")
        await _project(client, "/q")
        await ok(
            client,
            "remember",
            {
                "content": "The staging database runs PostgreSQL 16",
                "namespace": "/p",
                "metadata": {"source": "chat"},
            },
        )
        await ok(
            client, "remember", {"content": "The staging database is backed up nightly", "namespace": "/q"}
        )
        fact = await ok(
            client,
            "assert_fact",
            {
                "content": "Staging database version is PostgreSQL 16",
                "namespace": "/p",
                "entity": "staging database",
                "property": "version",
                "value": "16",
            },
        )
        result = await ok(client, "recall", {"query": "staging database PostgreSQL", "namespaces": "/p"})
        hits = result["results"]
        # the lean shape: the published fields in their order, nothing null, no score parts unasked
        fields = list(RecallItem.model_fields)
        assert hits and all([key for key in fields if key in h] == list(h) for h in hits)
        assert all(value is not None for h in hits for value in h.values())
        assert all({"kind", "id", "namespace", "content", "score", "relevance"} <= set(h) for h in hits)
        assert all(0.0 <= h["relevance"] <= 1.0 and "score_parts" not in h for h in hits)
        assert {h["namespace"] for h in hits} == {"/p"}
        kinds = {h["kind"]: h for h in hits}
        assert kinds["episode"]["metadata"] == {"source": "chat"} and kinds["episode"]["occurred_at"]
        assert "valid_from" not in kinds["episode"]
        assert kinds["fact"]["id"] == fact["fact"]["id"] and kinds["fact"]["valid_from"]
        assert all("embedding" not in h for h in hits)
        # the tool's published item model carries every field the library's hit has
        assert set(RecallHit.model_fields) <= set(RecallItem.model_fields)
        detailed = await ok(
            client,
            "recall",
            {"query": "staging database PostgreSQL", "namespaces": "/p", "include_score_parts": True},
        )
        assert all(set(h["score_parts"]) >= {"vector", "text"} for h in detailed["results"])
        both = await ok(
            client, "recall", {"query": "staging database", "namespaces": ["/p", "/q"], "limit": 2}
        )
        assert len(both["results"]) == 2
        assert (await fails(client, "recall", {"query": "  "}))["error"] == "empty_content"
        assert (await fails(client, "recall", {"query": "x", "limit": 101}))["error"] == "invalid_input"
        assert (await fails(client, "recall", {"query": "x", "namespaces": "/nope"}))[
            "error"
        ] == "namespace_not_found"


async def test_context_set_get_clear(server: Any) -> None:
    async with Client(server) as client:
        await _project(client)
        assert (await ok(client, "get_context", {"namespace": "/p"})) == {"context": None}
        set_ = await ok(client, "set_context", {"focus": "Migrating billing to v2", "namespace": "/p"})
        assert set_["focus"] == "Migrating billing to v2" and set_["expires_at"]
        got = await ok(client, "get_context", {"namespace": "/p"})
        assert got["context"]["focus"] == "Migrating billing to v2"
        assert (await ok(client, "clear_context", {"namespace": "/p"}))["cleared"] is True
        assert (await ok(client, "get_context", {"namespace": "/p"})) == {"context": None}
        assert (await fails(client, "set_context", {"focus": "x", "namespace": "/nope"}))[
            "error"
        ] == "namespace_not_found"
        assert (await fails(client, "set_context", {"focus": "x"}))["error"] == "invalid_input"


async def test_facts_assert_query_get_withdraw_purge(server: Any) -> None:
    async with Client(server) as client:
        await _project(client)
        episode = await ok(client, "remember", {"content": "We deploy on Fridays", "namespace": "/p"})
        made = await ok(
            client,
            "assert_fact",
            {
                "content": "Deploys happen on Fridays",
                "namespace": "/p",
                "entity": "deploy",
                "property": "day",
                "value": "Friday",
                "source_episode_ids": [episode["id"]],
                "confidence": 0.9,
            },
        )
        fact_id = made["fact"]["id"]
        listed = await ok(client, "query_facts", {"namespaces": "/p", "entity": "deploy"})
        assert [f["id"] for f in listed["items"]] == [fact_id]
        got = await ok(client, "get_fact", {"id": fact_id})
        assert got["source_episode_ids"] == [episode["id"]] and got["current"] is True
        with_lineage = await ok(client, "get_fact", {"id": fact_id, "include_lineage": True})
        assert with_lineage["fact"]["id"] == fact_id
        withdrawn = await ok(client, "withdraw_fact", {"id": fact_id, "reason": "moved to Thursdays"})
        assert fact_id in withdrawn.get("withdrawn_fact_ids", [fact_id])
        assert (await ok(client, "query_facts", {"namespaces": "/p"}))["items"] == []
        history = await ok(client, "query_facts", {"namespaces": "/p", "include_history": True})
        assert [f["id"] for f in history["items"]] == [fact_id]
        assert await ok(client, "purge_fact", {"id": fact_id})
        assert (await fails(client, "get_fact", {"id": fact_id}))["error"] == "record_not_found"
        bad = await fails(client, "assert_fact", {"content": "x", "namespace": "/p", "confidence": 1.5})
        assert bad["error"] == "invalid_input"
        bad_origin = await fails(client, "query_facts", {"origin": "made_up"})
        assert bad_origin["error"] == "invalid_input"


async def test_contradiction_listed_and_resolved(server: Any) -> None:
    async with Client(server) as client:
        await _project(client)
        old = await ok(
            client,
            "assert_fact",
            {
                "content": "The API rate limit is 100 rps",
                "namespace": "/p",
                "entity": "api",
                "property": "rate limit",
                "value": "100 rps",
            },
        )
        new = await ok(
            client,
            "assert_fact",
            {
                "content": "The API rate limit is 500 rps",
                "namespace": "/p",
                "entity": "api",
                "property": "rate limit",
                "value": "500 rps",
            },
        )
        listed = await ok(client, "list_contradictions", {"namespaces": "/p"})
        assert len(listed["items"]) == 1
        item = listed["items"][0]
        assert (item["old_fact_id"], item["new_fact_id"]) == (old["fact"]["id"], new["fact"]["id"])
        resolved = await ok(
            client, "resolve_contradiction", {"id": item["id"], "resolution": "keep_new"}
        )
        assert resolved["contradiction"]["resolution"] == "keep_new"
        assert resolved["old_fact"]["current"] is False and resolved["new_fact"]["current"] is True
        assert (await ok(client, "list_contradictions", {"namespaces": "/p"}))["items"] == []
        again = await fails(client, "resolve_contradiction", {"id": item["id"], "resolution": "keep_old"})
        assert again["error"] == "invalid_transition"
        assert (await fails(client, "resolve_contradiction", {"id": item["id"], "resolution": "new_value_correct"}))[
            "error"
        ] == "invalid_input"


async def test_graph_tools(server: Any) -> None:
    async with Client(server) as client:
        await _project(client)
        a = (await ok(client, "assert_fact", {"content": "The cache was disabled", "namespace": "/p"}))[
            "fact"
        ]
        b = (await ok(client, "assert_fact", {"content": "Latency doubled", "namespace": "/p"}))["fact"]
        failure = await ok(
            client,
            "create_failure",
            {
                "content": "Release 2.1 missed the SLO",
                "reason": "latency",
                "lesson": "load-test with the cache off",
                "namespace": "/p",
            },
        )
        link = await ok(
            client, "create_causal_link", {"cause_id": a["id"], "effect_id": b["id"], "namespace": "/p"}
        )
        link2 = await ok(
            client,
            "create_causal_link",
            {"cause_id": b["id"], "effect_failure_id": failure["id"], "namespace": "/p", "confidence": 0.6},
        )
        assert link["method"] == "asserted" and link2["effect_failure_id"] == failure["id"]
        dup = await fails(
            client, "create_causal_link", {"cause_id": a["id"], "effect_id": b["id"], "namespace": "/p"}
        )
        assert dup["error"] == "conflict"
        listed = await ok(client, "list_causal_links", {"namespaces": "/p"})
        assert [x["id"] for x in listed["items"]] == [link["id"], link2["id"]]
        trace = await ok(client, "trace_causal_chain", {"fact_id": a["id"]})
        assert [(s["depth"], s["link_id"]) for s in trace["steps"]] == [(1, link["id"]), (2, link2["id"])]
        back = await ok(client, "trace_causal_chain", {"fact_id": b["id"], "direction": "backward"})
        assert [s["cause_fact_id"] for s in back["steps"]] == [a["id"]]
        assert (await fails(client, "trace_causal_chain", {"fact_id": a["id"], "direction": "sideways"}))[
            "error"
        ] == "invalid_input"
        assert await ok(client, "delete_causal_link", {"id": link["id"]})
        assert (await fails(client, "delete_causal_link", {"id": link["id"]}))["error"] == "record_not_found"
        assert (await ok(client, "query_relationships", {"namespaces": "/p"}))["items"] == []
        assert (await ok(client, "query_patterns", {"namespaces": "/p"}))["items"] == []


async def test_hypothesis_lifecycle(server: Any) -> None:
    async with Client(server) as client:
        await _project(client)
        h = await ok(
            client,
            "create_hypothesis",
            {
                "content": "Flaky tests come from the shared DB",
                "verification_plan": "Run the suite with per-test DBs",
                "namespace": "/p",
            },
        )
        assert h["status"] == "proposed"
        early = await fails(client, "confirm_hypothesis", {"id": h["id"]})
        assert early["error"] == "invalid_transition"
        assert (await ok(client, "test_hypothesis", {"id": h["id"]}))["status"] == "testing"
        refined = await ok(client, "refine_hypothesis", {"id": h["id"], "confidence": 0.7})
        assert refined["status"] == "proposed" and refined["confidence"] == pytest.approx(0.7)
        await ok(client, "test_hypothesis", {"id": h["id"]})
        confirmed = await ok(client, "confirm_hypothesis", {"id": h["id"]})
        assert confirmed["hypothesis"]["status"] == "confirmed"
        assert confirmed["fact"]["origin"] == "hypothesis" and "embedding" not in confirmed["fact"]
        shown = await ok(client, "show_hypothesis", {"id": h["id"]})
        assert shown["confirmed_fact_id"] == confirmed["fact"]["id"]
        assert [x["id"] for x in (await ok(client, "list_hypotheses", {"status": "confirmed"}))["items"]] == [
            h["id"]
        ]

        other = await ok(
            client,
            "create_hypothesis",
            {"content": "It is the network", "verification_plan": "ping", "namespace": "/p"},
        )
        rejected = await ok(client, "reject_hypothesis", {"id": other["id"], "reason": "no packet loss"})
        assert rejected["status"] == "rejected" and rejected["rejection_reason"] == "no packet loss"
        assert (await fails(client, "test_hypothesis", {"id": other["id"]}))["error"] == "invalid_transition"
        assert await ok(client, "delete_hypothesis", {"id": other["id"]})
        assert (await fails(client, "show_hypothesis", {"id": other["id"]}))["error"] == "record_not_found"
        no_plan = await fails(
            client, "create_hypothesis", {"content": "x", "verification_plan": " ", "namespace": "/p"}
        )
        assert no_plan["error"] in {"empty_content", "invalid_input"}


async def test_goal_lifecycle(server: Any) -> None:
    async with Client(server) as client:
        await _project(client)
        parent = await ok(client, "create_goal", {"content": "Ship v2", "namespace": "/p", "priority": 5})
        child = await ok(
            client,
            "create_goal",
            {"content": "Write the migration", "namespace": "/p", "parent_id": parent["id"]},
        )
        listed = await ok(client, "list_goals", {"namespaces": "/p", "top_level_only": True})
        assert [g["id"] for g in listed["items"]] == [parent["id"]]
        subs = await ok(client, "list_goals", {"parent_id": parent["id"]})
        assert [g["id"] for g in subs["items"]] == [child["id"]]
        updated = await ok(
            client, "update_goal", {"id": child["id"], "priority": 0, "note": "schema drafted"}
        )
        assert updated["priority"] == 0
        done = await ok(client, "complete_goal", {"id": child["id"], "note": "merged"})
        assert done["goal"]["status"] == "completed" and done["auto_completed"] == [parent["id"]]
        shown = await ok(client, "show_goal", {"id": parent["id"]})
        assert shown["status"] == "completed"
        assert (await fails(client, "abandon_goal", {"id": child["id"]}))["error"] == "invalid_transition"
        other = await ok(client, "create_goal", {"content": "Rewrite in Rust", "namespace": "/p"})
        assert (await ok(client, "abandon_goal", {"id": other["id"], "note": "not worth it"}))["goal"][
            "status"
        ] == "abandoned"
        deleted = await ok(client, "delete_goal", {"id": parent["id"]})
        assert deleted
        assert (await fails(client, "show_goal", {"id": child["id"]}))["error"] == "record_not_found"


async def test_failures(server: Any) -> None:
    async with Client(server) as client:
        await _project(client)
        f = await ok(
            client,
            "create_failure",
            {
                "content": "Tried caching per request",
                "reason": "stale reads",
                "lesson": "cache per user instead",
                "namespace": "/p",
            },
        )
        assert (await ok(client, "show_failure", {"id": f["id"]}))["lesson"] == "cache per user instead"
        assert [x["id"] for x in (await ok(client, "list_failures", {"namespaces": "/p"}))["items"]] == [
            f["id"]
        ]
        missing_lesson = await fails(
            client, "create_failure", {"content": "x", "reason": "y", "lesson": "", "namespace": "/p"}
        )
        assert missing_lesson["error"] in {"empty_content", "invalid_input"}
        assert await ok(client, "delete_failure", {"id": f["id"]})
        assert (await fails(client, "show_failure", {"id": f["id"]}))["error"] == "record_not_found"


async def _job_done(client: Client, job_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The background job once it has finished (it must succeed), and the status that showed it."""
    for _ in range(200):
        status = await ok(client, "consolidation_status", {"namespaces": "/p"})
        (job,) = [j for j in status["runs"] if j["job_id"] == job_id]
        if job["status"] in {"done", "failed"}:
            break
        await anyio.sleep(0.05)
    assert job["status"] == "done", job
    return job, status


async def test_consolidate_status_and_stats(server: Any) -> None:
    async with Client(server) as client:
        await _project(client)
        await ok(client, "remember", {"content": "Alice leads the platform team", "namespace": "/p"})
        # no reasoner configured: a model stage asked for by name is refused up front, no job is started
        refused = await fails(client, "consolidate", {"namespaces": "/p", "stage": "facts"})
        assert refused["error"] == "reasoner_not_configured" and "STASH_REASONER_MODEL" in refused["message"]
        assert (await ok(client, "consolidation_status", {"namespaces": "/p"}))["runs"] == []
        # all stages: those that need no model start, the answer says which model stages it left out
        free = await ok(client, "consolidate", {"namespaces": "/p"})
        assert free["job"]["stage"] == "profiles,decay"
        assert free["skipped"] == [spec.name for spec in STAGES if spec.needs_model]
        assert free["message"].startswith("no reasoning model is configured, so the model stages were skipped")
        assert "STASH_REASONER_MODEL" in free["message"]
        await _job_done(client, free["job"]["job_id"])
        started = await ok(client, "consolidate", {"namespaces": "/p", "stage": "decay"})
        assert "skipped" not in started and "message" not in started
        # no Dagster here: a background job, returned at once, followed through consolidation_status
        assert started["mode"] == "background" and started["job"]["status"] in {"queued", "running", "done"}
        job, status = await _job_done(client, started["job"]["job_id"])
        reports = job["reports"]
        assert {r["stage"] for r in reports} == {"decay"}
        assert status["items"] and all(row["namespace"] == "/p" for row in status["items"])
        assert (await fails(client, "consolidate", {"stage": "nonsense"}))["error"] == "invalid_input"
        stats = await ok(client, "stats", {"namespaces": "/p"})
        assert (stats["namespaces"], stats["episodes"], stats["facts"]["current"]) == (1, 1, 0)
        assert (await ok(client, "stats"))["namespaces"] == 2  # '/' and '/p'
        assert (await fails(client, "stats", {"namespaces": "/nope"}))["error"] == "namespace_not_found"


async def test_every_tool_has_a_clear_error_path(server: Any) -> None:
    """One typical mistake per tool → a tool error with the expected code (and nothing crashes)."""
    missing = {"namespaces": "/nope"}
    cases: dict[str, tuple[dict[str, Any], str]] = {
        "init": ({"unexpected": 1}, "invalid_input"),
        "create_namespace": ({"namespace": "/Bad"}, "invalid_namespace"),
        "list_namespaces": ({"offset": -1}, "invalid_input"),
        "delete_namespace": ({"namespace": "/"}, "invalid_input"),
        "remember": ({"content": "x", "namespace": "/nope"}, "namespace_not_found"),
        "remember_batch": ({"namespace": "/", "items": []}, "invalid_input"),
        "get_episode": ({"id": 424242}, "record_not_found"),
        "forget": ({"about": ""}, "empty_content"),
        "purge_episode": ({"id": 424242}, "record_not_found"),
        "recall": ({"query": "x", **missing}, "namespace_not_found"),
        "set_context": ({"focus": "", "namespace": "/"}, "empty_content"),
        "get_context": ({"namespace": "nope"}, "invalid_namespace"),
        "clear_context": ({"namespace": "/nope"}, "namespace_not_found"),
        "query_facts": (missing, "namespace_not_found"),
        "get_fact": ({"id": 424242}, "record_not_found"),
        "assert_fact": ({"content": "x", "namespace": "/nope"}, "namespace_not_found"),
        "withdraw_fact": ({"id": 424242, "reason": "wrong"}, "record_not_found"),
        "purge_fact": ({"id": 424242}, "record_not_found"),
        "purge_entity": ({"id": 424242}, "record_not_found"),
        "query_relationships": (missing, "namespace_not_found"),
        "query_patterns": (missing, "namespace_not_found"),
        "list_causal_links": (missing, "namespace_not_found"),
        "create_causal_link": ({"cause_id": 1}, "invalid_input"),
        "trace_causal_chain": ({"fact_id": 424242}, "record_not_found"),
        "delete_causal_link": ({"id": 424242}, "record_not_found"),
        "list_contradictions": (missing, "namespace_not_found"),
        "resolve_contradiction": ({"id": 424242, "resolution": "keep_new"}, "record_not_found"),
        "list_hypotheses": ({"status": "maybe"}, "invalid_input"),
        "create_hypothesis": ({"content": "x", "verification_plan": "y", "confidence": 2}, "invalid_input"),
        "show_hypothesis": ({"id": 424242}, "record_not_found"),
        "test_hypothesis": ({"id": 424242}, "record_not_found"),
        "refine_hypothesis": ({"id": 424242, "content": "x"}, "record_not_found"),
        "confirm_hypothesis": ({"id": 424242}, "record_not_found"),
        "reject_hypothesis": ({"id": 424242}, "record_not_found"),
        "delete_hypothesis": ({"id": 424242}, "record_not_found"),
        "list_goals": ({"status": "done"}, "invalid_input"),
        "create_goal": ({"content": "x", "namespace": "/", "parent_id": 424242}, "record_not_found"),
        "show_goal": ({"id": 424242}, "record_not_found"),
        "update_goal": ({"id": 424242, "priority": 1}, "record_not_found"),
        "complete_goal": ({"id": 424242}, "record_not_found"),
        "abandon_goal": ({"id": 424242}, "record_not_found"),
        "delete_goal": ({"id": 424242}, "record_not_found"),
        "list_failures": (missing, "namespace_not_found"),
        "create_failure": ({"content": "x", "reason": "y"}, "invalid_input"),
        "show_failure": ({"id": 424242}, "record_not_found"),
        "delete_failure": ({"id": 424242}, "record_not_found"),
        "consolidate": (missing, "namespace_not_found"),
        "consolidation_status": (missing, "namespace_not_found"),
        "stats": (missing, "namespace_not_found"),
        "get_entity": ({"id": 424242}, "record_not_found"),
        "merge_entities": ({"id": 424242, "merge_id": 424243}, "record_not_found"),
        "split_entity": ({"id": 424242, "aliases": ["x"]}, "record_not_found"),
    }
    async with Client(server) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert set(cases) == tools  # every tool is covered
        for tool, (arguments, code) in cases.items():
            body = await fails(client, tool, arguments)
            assert body["error"] == code, (tool, body)
            assert body["message"] and len(body["message"]) < 1000, (tool, body)
