"""The MCP server in-process (the SDK's own Client): tool list, namespaces, episodes, errors."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from stash_serve.mcp.server import INSTRUCTIONS
from tests.mcp.conftest import fails, ok

pytestmark = pytest.mark.anyio

REFERENCE_TOOLS = {
    "init",
    "remember",
    "recall",
    "forget",
    "consolidate",
    "set_context",
    "get_context",
    "clear_context",
    "list_namespaces",
    "create_namespace",
    "query_facts",
    "query_relationships",
    "list_contradictions",
    "resolve_contradiction",
    "list_causal_links",
    "create_causal_link",
    "trace_causal_chain",
    "list_hypotheses",
    "create_hypothesis",
    "confirm_hypothesis",
    "reject_hypothesis",
    "list_goals",
    "create_goal",
    "complete_goal",
    "abandon_goal",
    "list_failures",
    "create_failure",
    "delete_failure",
}
ADDED_TOOLS = {
    "remember_batch",
    "get_episode",
    "purge_episode",
    "get_fact",
    "assert_fact",
    "withdraw_fact",
    "purge_fact",
    "purge_entity",
    "query_patterns",
    "delete_causal_link",
    "show_hypothesis",
    "test_hypothesis",
    "refine_hypothesis",
    "delete_hypothesis",
    "show_goal",
    "update_goal",
    "delete_goal",
    "show_failure",
    "delete_namespace",
    "consolidation_status",
    "stats",
}
# the reference's parameter names, under their current (and only) names
REFERENCE_PARAMS = {
    "remember": {"content", "namespace"},
    "recall": {"query", "namespaces", "limit"},
    "forget": {"about", "namespaces"},
    "consolidate": {"namespaces"},
    "set_context": {"focus", "namespace"},
    "get_context": {"namespace"},
    "clear_context": {"namespace"},
    "list_namespaces": {"namespaces", "limit", "offset"},
    "create_namespace": {"namespace", "name", "description"},
    "query_facts": {"namespaces", "limit", "offset"},
    "query_relationships": {"namespaces", "limit", "offset"},
    "list_contradictions": {"namespaces", "limit", "offset"},
    "resolve_contradiction": {"id", "resolution"},
    "list_causal_links": {"namespaces", "limit", "offset"},
    "create_causal_link": {"cause_id", "effect_id", "effect_failure_id", "confidence", "namespace"},
    "trace_causal_chain": {"fact_id", "direction", "max_depth"},
    "list_hypotheses": {"namespaces", "status", "limit", "offset"},
    "create_hypothesis": {"content", "verification_plan", "confidence", "namespace", "source_fact_ids"},
    "confirm_hypothesis": {"id"},
    "reject_hypothesis": {"id", "reason"},
    "list_goals": {"namespaces", "status", "parent_id", "limit", "offset"},
    "create_goal": {"content", "parent_id", "priority", "namespace"},
    "complete_goal": {"id", "note"},
    "abandon_goal": {"id", "note"},
    "list_failures": {"namespaces", "goal_id", "limit", "offset"},
    "create_failure": {"content", "reason", "lesson", "goal_id", "namespace"},
    "delete_failure": {"id"},
}
READ_ONLY = {
    "recall",
    "get_context",
    "list_namespaces",
    "query_facts",
    "query_relationships",
    "list_contradictions",
    "list_causal_links",
    "trace_causal_chain",
    "list_hypotheses",
    "list_goals",
    "list_failures",
    "get_episode",
    "get_fact",
    "query_patterns",
    "show_hypothesis",
    "show_goal",
    "show_failure",
    "consolidation_status",
    "stats",
    "get_entity",
}
DESTRUCTIVE = {
    "forget",
    "purge_episode",
    "purge_fact",
    "purge_entity",
    "withdraw_fact",
    "delete_causal_link",
    "delete_hypothesis",
    "delete_goal",
    "delete_failure",
    "delete_namespace",
    "clear_context",
    "resolve_contradiction",
}


async def test_tool_list_names_parameters_and_annotations(server: Any) -> None:
    async with Client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) >= REFERENCE_TOOLS | ADDED_TOOLS
        for name, params in REFERENCE_PARAMS.items():
            assert set(tools[name].input_schema["properties"]) >= params, name
        for name, t in tools.items():
            assert t.description and len(t.description) < 400, name
            assert t.annotations is not None, name
            assert t.annotations.read_only_hint is (name in READ_ONLY), name
            if name not in READ_ONLY:
                assert t.annotations.destructive_hint is (name in DESTRUCTIVE), name
            assert t.output_schema is not None and t.output_schema["type"] == "object", name
            # every parameter is described for the model
            for pname, prop in t.input_schema["properties"].items():
                assert prop.get("description"), f"{name}.{pname} has no description"
        # typed results where the shape is fixed: recall items and list pages
        recall_item = tools["recall"].output_schema["$defs"]["RecallItem"]["properties"]
        assert set(recall_item) >= {
            "kind",
            "id",
            "namespace",
            "content",
            "score",
            "confidence",
            "occurred_at",
            "valid_from",
            "valid_until",
            "source_episode_ids",
            "metadata",
        }
        lists = [name for name in tools if name.startswith(("list_", "query_"))]
        assert len(lists) == 9
        for name in lists:
            assert set(tools[name].output_schema["properties"]) == {"items", "limit", "offset", "next_offset"}
        assert client.instructions == INSTRUCTIONS


async def test_instructions_teach_the_session_protocol() -> None:
    assert len(INSTRUCTIONS) < 3500
    for phrase in ("`init`", "`recall`", "session_summary", "/self", "consolidate", "never pretend"):
        assert phrase in INSTRUCTIONS


async def test_init_is_idempotent_and_creates_self_tree(server: Any) -> None:
    async with Client(server) as client:
        first = await ok(client, "init")
        assert sorted(first["namespaces_created"]) == [
            "/self",
            "/self/capabilities",
            "/self/limits",
            "/self/preferences",
        ]
        assert first["self_available"] is True
        second = await ok(client, "init")
        assert second["namespaces_created"] == []


async def test_namespaces_create_list_delete(server: Any, store: Any) -> None:
    async with Client(server) as client:
        created = await ok(client, "create_namespace", {"namespace": "/projects/x", "description": "Project X"})
        assert created["slug"] == "/projects/x" and created["created"] is True
        assert created["namespace"]["description"] == "Project X"
        listed = await ok(client, "list_namespaces", {"namespaces": "/projects"})
        assert [n["slug"] for n in listed["items"]] == ["/projects", "/projects/x"]
        assert listed["limit"] == 100 and listed["offset"] == 0 and listed["next_offset"] is None
        paged = await ok(client, "list_namespaces", {"limit": 1})
        assert [n["slug"] for n in paged["items"]] == ["/"] and paged["next_offset"] == 1

        bad = await fails(client, "create_namespace", {"namespace": "Projects/X"})
        assert bad["error"] == "invalid_namespace"

        preview = await ok(client, "delete_namespace", {"namespace": "/projects"})
        assert preview["deleted"] is False and preview["namespaces"] == ["/projects", "/projects/x"]
        for loose in ("yes", "true", 1):  # a destructive switch takes only a real JSON true
            refused = await fails(client, "delete_namespace", {"namespace": "/projects", "confirm": loose})
            assert refused["error"] == "invalid_input"
        assert store.db.scalar("get_namespace_by_slug", slug="/projects/x") is not None
        done = await ok(client, "delete_namespace", {"namespace": "/projects", "confirm": True})
        assert done["deleted"] is True
        assert store.db.scalar("get_namespace_by_slug", slug="/projects/x") is None
        missing = await fails(client, "list_namespaces", {"namespaces": ["/nope", 5]})
        assert missing["error"] == "invalid_input"


async def test_remember_get_forget_purge(server: Any, store: Any) -> None:
    async with Client(server) as client:
        await ok(client, "create_namespace", {"namespace": "/p", "description": "test"})
        first = await ok(
            client,
            "remember",
            {
                "content": "The deploy runs on Fridays",
                "namespace": "/p",
                "kind": "decision",
                "idempotency_key": "k1",
            },
        )
        assert first["created"] is True and first["namespace"] == "/p"
        again = await ok(
            client,
            "remember",
            {"content": "The deploy runs on Fridays", "namespace": "/p", "idempotency_key": "k1"},
        )
        assert again == {**first, "created": False}
        episode = await ok(client, "get_episode", {"id": first["id"]})
        assert episode["content"] == "The deploy runs on Fridays" and episode["kind"] == "decision"
        assert "embedding" not in episode

        batch = await ok(
            client,
            "remember_batch",
            {
                "namespace": "/p",
                "items": [
                    {"content": "Alice prefers tabs"},
                    {"content": "Bob owns the billing service", "kind": "observation"},
                ],
            },
        )
        assert len(batch["results"]) == 2

        preview = await ok(
            client, "forget", {"about": "Alice prefers tabs", "namespaces": "/p", "preview": True}
        )
        assert preview["applied"] is False and preview["episode_id"] == batch["results"][0]["id"]
        gone = await ok(client, "forget", {"about": "Alice prefers tabs", "namespaces": "/p"})
        assert gone["applied"] is True
        assert (await fails(client, "get_episode", {"id": gone["episode_id"]}))["error"] == "record_not_found"

        purged = await ok(client, "purge_episode", {"id": first["id"]})
        assert purged["purged"] is True
        assert store.db.scalar("episode_get", id=first["id"]) is None
        assert (await fails(client, "purge_episode", {"id": first["id"]}))["error"] == "record_not_found"


async def test_bad_inputs_are_tool_errors_and_server_keeps_answering(server: Any) -> None:
    async with Client(server) as client:
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("remember", {"content": "", "namespace": "/"}, "empty_content"),
            ("remember", {"content": "a\x00b", "namespace": "/"}, "invalid_input"),
            ("remember", {"content": "x" * 10_001, "namespace": "/"}, "content_too_large"),
            ("remember", {"content": "x", "namespace": "/missing"}, "namespace_not_found"),
            ("remember", {"content": 42, "namespace": "/"}, "invalid_input"),
            ("remember", {"namespace": "/"}, "invalid_input"),
            ("remember", {"content": "x", "namespace": "/\x00"}, "invalid_namespace"),
            ("list_namespaces", {"limit": 10**12}, "invalid_input"),
            ("list_namespaces", {"limit": "ten"}, "invalid_input"),
            ("list_namespaces", {"offset": -1}, "invalid_input"),
            ("get_episode", {"id": -5}, "invalid_input"),
            ("get_episode", {"id": 999999}, "record_not_found"),
            ("remember_batch", {"namespace": "/", "items": [{"text": "wrong field"}]}, "invalid_input"),
            ("no_such_tool", {}, "unknown_tool"),
        ]
        for tool, arguments, code in cases:
            body = await fails(client, tool, arguments)
            assert body["error"] == code, (tool, arguments, body)
            assert "\x00" not in body["message"]
        # a misspelt argument is an error, not silently dropped (it would widen this read to everything)
        typo = await fails(client, "recall", {"query": "x", "namespace": "/p"})
        assert typo["error"] == "invalid_input" and "namespaces" in typo["message"]
        # after all that, the server still works
        assert (await ok(client, "list_namespaces"))["items"][0]["slug"] == "/"


async def test_auth_server_refuses_calls_without_a_token(store: Any) -> None:
    from stash_serve.mcp.server import build_server

    async with Client(build_server(store, auth=True)) as client:
        for tool, arguments in (("list_namespaces", {}), ("remember", {"content": "x", "namespace": "/"})):
            assert (await fails(client, tool, arguments))["error"] == "access_denied"
    assert store.db.scalar("admin_stats", all_namespaces=True, namespace_ids=[]) == 1  # only '/'


async def test_unexpected_failure_is_logged_not_leaked(
    server: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from stash_pipeline.memory import admin

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom: password=hunter2")

    monkeypatch.setattr(admin, "stats", broken)
    async with Client(server) as client:
        body = await fails(client, "stats")
        assert body["error"] == "internal_error" and "hunter2" not in body["message"]
        assert (await ok(client, "list_namespaces"))["items"]
    assert "hunter2" in caplog.text  # the traceback stays on the server
