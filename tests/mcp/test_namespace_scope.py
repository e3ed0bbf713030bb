"""create_namespace under a token: ancestors outside the token's trees must already exist,
and one token creates at most STASH_NAMESPACES_PER_TOKEN_PER_HOUR namespaces an hour. A
write that names no namespace is told the namespace is required (not that "/" is out of
reach)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from stash_pipeline import auth
from stash_pipeline.memory import namespaces
from tests.mcp.asgi import served, session

pytestmark = pytest.mark.anyio


def _slugs(store: Any) -> set[str]:
    return {n.slug for n in namespaces.list_(store)}


async def _call(client: Any, tool: str, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    result = await client.call_tool(tool, arguments)
    return bool(result.is_error), json.loads(result.content[0].text)


async def test_a_token_cannot_create_ancestors_outside_its_scope(store: Any) -> None:
    token = auth.create_token(store, ["/z/q"], ["read", "write"])["token"]
    before = _slugs(store)
    async with served(store) as app, session(app, token) as client:
        failed, body = await _call(client, "create_namespace", {"namespace": "/z/q/r", "description": "r"})
        assert failed and body["error"] == "access_denied" and "/z" in body["message"], body
        assert _slugs(store) == before  # neither /z nor /z/q nor /z/q/r
        # once an admin made the ancestor outside the scope, the token may create inside it
        namespaces.create(store, "/z")
        failed, body = await _call(client, "create_namespace", {"namespace": "/z/q/r", "description": "r"})
        assert not failed, body
    assert {"/z", "/z/q", "/z/q/r"} <= _slugs(store)


async def test_namespaces_created_per_token_are_capped(make_store: Any) -> None:
    limited = make_store(namespaces_per_token_per_hour=3)
    token = auth.create_token(limited, ["/t"], ["write"])["token"]
    other = auth.create_token(limited, ["/u"], ["write"])["token"]
    namespaces.create(limited, "/t")
    namespaces.create(limited, "/u")
    async with served(limited) as app:
        async with session(app, token) as client:
            for i in range(3):
                failed, body = await _call(client, "create_namespace", {"namespace": f"/t/n{i}", "description": "n"})
                assert not failed, body
            # updating an existing namespace creates nothing and is not counted
            failed, body = await _call(client, "create_namespace", {"namespace": "/t/n0", "description": "again"})
            assert not failed, body
            failed, body = await _call(client, "create_namespace", {"namespace": "/t/n9", "description": "n"})
            assert failed and body["error"] == "rate_limited", body
        async with session(app, other) as client:  # another token has its own allowance
            failed, body = await _call(client, "create_namespace", {"namespace": "/u/n0", "description": "n"})
            assert not failed, body
    assert "/t/n9" not in _slugs(limited)


WRITES_INTO_ONE_NAMESPACE = {
    "remember": {"content": "The deploy runs on Fridays"},
    "create_goal": {"content": "Ship v2"},
    "create_hypothesis": {"content": "Friday deploys break", "verification_plan": "count incidents"},
    "create_failure": {"content": "Deploy broke", "reason": "no canary", "lesson": "add one"},
}


async def test_a_write_without_its_namespace_is_told_the_namespace_is_required(store: Any) -> None:
    token = auth.create_token(store, ["/projects/x"], ["read", "write"])["token"]
    namespaces.create(store, "/projects/x")
    async with served(store) as app, session(app, token) as client:
        for tool, arguments in WRITES_INTO_ONE_NAMESPACE.items():
            failed, body = await _call(client, tool, arguments)
            assert failed and body == {
                "error": "invalid_input",
                "message": "invalid arguments: namespace is required (an exact namespace path, e.g. /projects/x)",
            }, (tool, body)
            failed, body = await _call(client, tool, {**arguments, "namespace": "/projects/x"})
            assert not failed, (tool, body)
