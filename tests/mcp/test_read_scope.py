"""Every read tool shows a scoped token only its own trees, whatever an admin did elsewhere.

An admin fills a foreign namespace (episodes, facts about an entity that also lives in the
token's tree, a contradiction, a causal link, hypotheses, goals, failures) and
consolidates all of ``/``; then a read-only token for ``/a`` calls every read tool. No
answer may name the foreign namespace or carry its id.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from stash_pipeline import auth
from stash_pipeline.memory import namespaces
from tests.mcp.asgi import served, session

pytestmark = pytest.mark.anyio

FOREIGN = "/zz-foreign-secret"


async def _ok(client: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    text = result.content[0].text
    assert not result.is_error, f"{tool}: {text}"
    return json.loads(text)


async def _fill(client: Any, slug: str) -> dict[str, Any]:
    """Records of every kind in ``slug``; their ids."""
    ns = {"namespace": slug}
    ids: dict[str, Any] = {}
    ids["episode"] = (await _ok(client, "remember", {**ns, "content": f"Deploys of {slug} happen on Fridays"}))["id"]
    first = await _ok(client, "assert_fact", {**ns, "content": "Alice reviews releases", "entity": "Alice",
                                              "property": "role", "value": "reviewer"})
    await _ok(client, "assert_fact", {**ns, "content": "Alice approves releases", "entity": "Alice",
                                      "property": "role", "value": "approver"})  # a contradiction
    second = await _ok(client, "assert_fact", {**ns, "content": "Releases are calm", "entity": "releases",
                                               "property": "mood", "value": "calm"})
    ids["fact"] = first["fact"]["id"]
    ids["link"] = (await _ok(client, "create_causal_link", {**ns, "cause_id": ids["fact"],
                                                            "effect_id": second["fact"]["id"]}))["id"]
    ids["hypothesis"] = (await _ok(client, "create_hypothesis", {**ns, "content": "Reviews slow releases",
                                                                 "verification_plan": "time them"}))["id"]
    ids["goal"] = (await _ok(client, "create_goal", {**ns, "content": "Ship calmly"}))["id"]
    ids["failure"] = (await _ok(client, "create_failure", {**ns, "content": "Release broke", "reason": "no canary",
                                                           "lesson": "canary first", "goal_id": ids["goal"]}))["id"]
    await _ok(client, "set_context", {**ns, "focus": f"the {slug} release"})
    entity = await _ok(client, "get_entity", {"name": "Alice", "namespaces": slug})
    ids["entity"] = entity["entity"]["id"]
    return ids


def read_calls(own: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Arguments for every read tool, within ``/a`` (a missing tool fails the test)."""
    return {
        "list_namespaces": {},
        "get_episode": {"id": own["episode"]},
        "recall": {"query": "who reviews releases and when do deploys happen", "include_history": True},
        "get_context": {"namespace": "/a"},
        "query_facts": {"include_history": True},
        "get_fact": {"id": own["fact"], "include_lineage": True},
        "get_entity": {"name": "Alice"},
        "query_relationships": {"include_withdrawn": True},
        "query_patterns": {"include_withdrawn": True},
        "list_causal_links": {"include_withdrawn": True},
        "trace_causal_chain": {"fact_id": own["fact"], "direction": "forward"},
        "list_contradictions": {"include_resolved": True},
        "list_hypotheses": {},
        "show_hypothesis": {"id": own["hypothesis"]},
        "list_goals": {},
        "show_goal": {"id": own["goal"]},
        "list_failures": {},
        "show_failure": {"id": own["failure"]},
        "consolidation_status": {},
        "stats": {},
    }


def _namespace_ids(value: Any) -> set[int]:
    found: set[int] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "namespace_id" and isinstance(item, int):
                found.add(item)
            found |= _namespace_ids(item)
    elif isinstance(value, list):
        for item in value:
            found |= _namespace_ids(item)
    return found


async def test_every_read_tool_shows_a_scoped_token_only_its_trees(store: Any) -> None:
    admin = auth.create_token(store, ["/"], ["read", "write", "admin"], "admin")["token"]
    viewer = auth.create_token(store, ["/a"], ["read"], "viewer")["token"]
    namespaces.create(store, "/a", "A", "the viewer's tree")
    namespaces.create(store, FOREIGN, "Foreign secret", "someone else's tree")
    async with served(store) as app:
        async with session(app, admin) as client:
            own = await _fill(client, "/a")
            await _fill(client, FOREIGN)
            job = (await _ok(client, "consolidate", {"namespaces": "/", "stage": "decay"}))["job"]
            with anyio.fail_after(60):
                while job["status"] not in ("done", "failed"):
                    await anyio.sleep(0.05)
                    runs = (await _ok(client, "consolidation_status", {}))["runs"]
                    (job,) = [j for j in runs if j["job_id"] == job["job_id"]]
            assert FOREIGN in json.dumps(job)  # the admin sees it all
        listed = [n for n in namespaces.list_(store) if n.slug in ("/a", FOREIGN)]
        own_ids = {n.id for n in listed if n.slug == "/a"}
        async with session(app, viewer) as client:
            tools = (await client.list_tools()).tools
            reads = sorted(t.name for t in tools if t.annotations is not None and t.annotations.read_only_hint)
            calls = read_calls(own)
            assert sorted(calls) == reads, "every read tool is walked"
            leaks = []
            for tool, arguments in calls.items():
                body = await _ok(client, tool, arguments)
                text = json.dumps(body)
                if "zz-foreign" in text or "Foreign secret" in text:
                    leaks.append(f"{tool}: names the foreign namespace: {text[:300]}")
                if _namespace_ids(body) - own_ids:
                    leaks.append(f"{tool}: carries a foreign namespace id: {text[:300]}")
            assert leaks == [], "\n".join(leaks)
