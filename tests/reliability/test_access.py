"""Access: a token scope matrix over EVERY MCP tool, over real HTTP; revocation is immediate.

An HTTP MCP server (subprocess, bearer auth on) and four tokens scoped to ``/a``:
read, write, read+write, admin. Every tool the server lists is called by every token
on ``/a`` (inside the scope) and on ``/b`` (outside it); records a call acts on are
created fresh for it, so each cell of the matrix is independent. What must hold:

* ``/b``: every call fails (``access_denied`` for namespace arguments,
  ``record_not_found`` for ids — an id outside the scope does not exist for the token),
  and the database is unchanged;
* ``/a``: a tool succeeds exactly when the token has the rights it needs (reads: read;
  writes: write; ``consolidate`` / ``forget``: read and write; ``delete_namespace``:
  admin); otherwise ``access_denied`` and nothing changes; ``init`` never errors and
  never writes /self for these tokens;
* reads without a namespace argument see only ``/a`` (no ``/b`` text in any answer);
* a revoked token's very next request (same client, same connection) is answered 401.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from stash_pipeline import auth
from stash_pipeline.memory import entities, episodes, facts, failures, goals, graph, hypotheses
from stash_pipeline.memory import namespaces as ns_ops
from tests.mcp.test_transports import INITIALIZE, MCP_HEADERS, _serve_http, _session
from tests.reliability.conftest import FIGURES, snapshot

pytestmark = [pytest.mark.reliability, pytest.mark.anyio]

TOKENS = {"read": ["read"], "write": ["write"], "read+write": ["read", "write"], "admin": ["admin"]}
_seq = itertools.count(1)


def _n() -> int:
    return next(_seq)


# -- fresh records for one call ------------------------------------------------------------------
def _fact(s: Any, ns: str, text: str = "fact") -> int:
    return facts.assert_fact(s, ns, f"{ns[1:].upper()} {text} {_n()}").fact.id


def _contradiction(s: Any, ns: str) -> int:
    entity = f"svc{_n()}"
    facts.assert_fact(s, ns, f"{entity} runs on port 80", entity=entity, property="port", value="80")
    out = facts.assert_fact(s, ns, f"{entity} runs on port 81", entity=entity, property="port", value="81")
    return out.contradictions[0].id


def _link(s: Any, ns: str) -> int:
    return graph.create_causal_link(s, ns, _fact(s, ns, "cause"), effect_id=_fact(s, ns, "effect")).id


def _hyp(s: Any, ns: str, state: str = "proposed") -> int:
    hid = hypotheses.create(s, ns, f"{ns[1:].upper()} idea {_n()}", "check it").id
    if state == "testing":
        hypotheses.test(s, hid)
    return hid


def _goal(s: Any, ns: str) -> int:
    return goals.create(s, ns, f"{ns[1:].upper()} goal {_n()}").id


def _failure(s: Any, ns: str) -> int:
    return failures.create(s, ns, f"{ns[1:].upper()} failure {_n()}", "why", "lesson").id


def _entity(s: Any, ns: str) -> int:
    name = f"{ns[1:].upper()} person {_n()}"
    facts.assert_fact(s, ns, f"{name} joined the team", entity=name, property="role", value="member")
    return entities.get_entity(s, name=name, namespaces=[ns]).entity["id"]


def _merged(s: Any, ns: str) -> tuple[int, str]:
    """An entity with a second alias (merged in), and that alias."""
    keep, other = _entity(s, ns), _entity(s, ns)
    entities.merge_entities(s, keep, other)
    return keep, entities.get_entity(s, keep).aliases[-1]["alias"]


def _episode(s: Any, ns: str) -> int:
    return int(episodes.remember(s, ns, f"{ns[1:].upper()} episode {_n()}").id)


Args = Callable[[Any, str], dict[str, Any]]

#: every tool: arguments acting on namespace ``ns`` (records created fresh where the call consumes them)
CALLS: dict[str, Args] = {
    "init": lambda s, ns: {},
    "create_namespace": lambda s, ns: {"namespace": f"{ns}/new{_n()}"},
    "list_namespaces": lambda s, ns: {"namespaces": ns},
    "delete_namespace": lambda s, ns: {"namespace": ns_ops.create(s, f"{ns}/doomed{_n()}").namespace.slug, "confirm": True},
    "remember": lambda s, ns: {"content": f"note {_n()}", "namespace": ns},
    "remember_batch": lambda s, ns: {"namespace": ns, "items": [{"content": f"batch {_n()}"}]},
    "get_episode": lambda s, ns: {"id": _episode(s, ns)},
    "forget": lambda s, ns: {"about": episodes.get(s, _episode(s, ns)).content, "namespaces": ns},
    "purge_episode": lambda s, ns: {"id": _episode(s, ns)},
    "recall": lambda s, ns: {"query": "episode", "namespaces": ns},
    "set_context": lambda s, ns: {"focus": "shipping", "namespace": ns},
    "get_context": lambda s, ns: {"namespace": ns},
    "clear_context": lambda s, ns: {"namespace": ns},
    "query_facts": lambda s, ns: {"namespaces": ns},
    "get_fact": lambda s, ns: {"id": _fact(s, ns)},
    "assert_fact": lambda s, ns: {"content": f"asserted {_n()}", "namespace": ns},
    "withdraw_fact": lambda s, ns: {"id": _fact(s, ns), "reason": "wrong"},
    "purge_fact": lambda s, ns: {"id": _fact(s, ns)},
    "purge_entity": lambda s, ns: {"id": _entity(s, ns)},
    "query_relationships": lambda s, ns: {"namespaces": ns},
    "query_patterns": lambda s, ns: {"namespaces": ns},
    "list_causal_links": lambda s, ns: {"namespaces": ns},
    "create_causal_link": lambda s, ns: {"cause_id": _fact(s, ns), "effect_id": _fact(s, ns), "namespace": ns},
    "trace_causal_chain": lambda s, ns: {"fact_id": _fact(s, ns), "namespaces": ns},
    "delete_causal_link": lambda s, ns: {"id": _link(s, ns)},
    "list_contradictions": lambda s, ns: {"namespaces": ns},
    "resolve_contradiction": lambda s, ns: {"id": _contradiction(s, ns), "resolution": "keep_new"},
    "list_hypotheses": lambda s, ns: {"namespaces": ns},
    "create_hypothesis": lambda s, ns: {"content": f"idea {_n()}", "verification_plan": "look", "namespace": ns},
    "show_hypothesis": lambda s, ns: {"id": _hyp(s, ns)},
    "test_hypothesis": lambda s, ns: {"id": _hyp(s, ns)},
    "refine_hypothesis": lambda s, ns: {"id": _hyp(s, ns, "testing"), "content": f"refined {_n()}"},
    "confirm_hypothesis": lambda s, ns: {"id": _hyp(s, ns, "testing")},
    "reject_hypothesis": lambda s, ns: {"id": _hyp(s, ns)},
    "delete_hypothesis": lambda s, ns: {"id": _hyp(s, ns)},
    "list_goals": lambda s, ns: {"namespaces": ns},
    "create_goal": lambda s, ns: {"content": f"goal {_n()}", "namespace": ns},
    "show_goal": lambda s, ns: {"id": _goal(s, ns)},
    "update_goal": lambda s, ns: {"id": _goal(s, ns), "priority": 3},
    "complete_goal": lambda s, ns: {"id": _goal(s, ns)},
    "abandon_goal": lambda s, ns: {"id": _goal(s, ns)},
    "delete_goal": lambda s, ns: {"id": _goal(s, ns)},
    "list_failures": lambda s, ns: {"namespaces": ns},
    "create_failure": lambda s, ns: {"content": f"failure {_n()}", "reason": "r", "lesson": "l", "namespace": ns},
    "show_failure": lambda s, ns: {"id": _failure(s, ns)},
    "delete_failure": lambda s, ns: {"id": _failure(s, ns)},
    "get_entity": lambda s, ns: {"id": _entity(s, ns)},
    "merge_entities": lambda s, ns: {"id": _entity(s, ns), "merge_id": _entity(s, ns)},
    "split_entity": lambda s, ns: dict(zip(("id", "aliases"), (lambda m: (m[0], [m[1]]))(_merged(s, ns)), strict=True)),
    "consolidate": lambda s, ns: {"namespaces": ns, "stage": "decay"},
    "consolidation_status": lambda s, ns: {"namespaces": ns},
    "stats": lambda s, ns: {"namespaces": ns},
}

#: rights a call needs on its namespace (admin implies read and write)
NEEDS: dict[str, set[str]] = {"delete_namespace": {"admin"}, "consolidate": {"read", "write"},
                              "forget": {"read", "write"}}


def _needs(tool: str, read_only: bool) -> set[str]:
    return NEEDS.get(tool, {"read"} if read_only else {"write"})


def _allowed(rights: list[str], needed: set[str]) -> bool:
    return "admin" in rights or ("admin" not in needed and needed <= set(rights))


@pytest.fixture
def world(store: Any) -> dict[str, str]:
    for slug in ("/a", "/b"):
        ns_ops.create(store, slug)
        _episode(store, slug)
        _fact(store, slug)
        _link(store, slug)
    tokens = {name: auth.create_token(store, ["/a"], rights, name)["token"] for name, rights in TOKENS.items()}
    return tokens


def _body(result: Any) -> tuple[bool, dict[str, Any], str]:
    text = result.content[0].text if result.content else ""
    try:
        body = json.loads(text)
    except ValueError:
        body = {}
    return bool(result.is_error), body, text


async def _job_done(session: Any, job_id: str, namespace: str) -> None:
    """Wait for a background consolidation job, so its writes land inside its own cell."""
    for _ in range(600):
        _, status, _ = _body(await session.call_tool("consolidation_status", {"namespaces": namespace}))
        if any(j["job_id"] == job_id and j["status"] in ("done", "failed") for j in status.get("runs", [])):
            return
        await anyio.sleep(0.05)
    raise AssertionError(f"background job {job_id} did not finish")


async def test_token_scope_matrix_over_every_tool(
    settings: Any, store: Any, world: dict[str, str], tmp_path: Path
) -> None:
    problems: list[str] = []
    cells = 0
    with _serve_http(settings, tmp_path) as base:
        for token_name, secret in world.items():
            rights = TOKENS[token_name]
            async with _session(base, secret) as session:
                listed = {t.name: t for t in (await session.list_tools()).tools}
                assert set(listed) == set(CALLS), f"tools without a matrix row: {set(listed) ^ set(CALLS)}"
                for tool in sorted(listed):
                    read_only = bool(listed[tool].annotations and listed[tool].annotations.read_only_hint)
                    needed = _needs(tool, read_only)
                    for ns in ("/a", "/b"):
                        cells += 1
                        arguments = CALLS[tool](store, ns)
                        before = snapshot(store)
                        failed, body, text = _body(await session.call_tool(tool, arguments))
                        if tool == "consolidate" and not failed:
                            await _job_done(session, body["job"]["job_id"], ns)  # it runs in the background
                        label = f"{token_name} {tool} on {ns}"
                        changed = snapshot(store) != before
                        if tool == "init":  # never an error; never writes (no token covers /self)
                            if failed or body.get("self_available") is not False or changed:
                                problems.append(f"{label}: {text[:160]}")
                            continue
                        expect_ok = ns == "/a" and _allowed(rights, needed)
                        if expect_ok:
                            if failed:
                                problems.append(f"{label}: expected success, got {text[:160]}")
                            if read_only and changed:
                                problems.append(f"{label}: a read changed the database")
                            if "/b" in text or "B " in text:
                                problems.append(f"{label}: answer mentions /b: {text[:160]}")
                        else:
                            code = body.get("error")
                            allowed_codes = {"access_denied", "record_not_found"}
                            if not failed or code not in allowed_codes:
                                problems.append(f"{label}: expected denial, got {text[:160]}")
                            if changed:
                                problems.append(f"{label}: a denied call changed the database")
                            FIGURES["access: denials"][code] += 1
                # reads with the default scope never see /b
                for tool in sorted(t for t, info in listed.items() if "namespaces" in (info.input_schema or {}).get(
                        "properties", {}) and info.annotations and info.annotations.read_only_hint):
                    arguments = {k: v for k, v in CALLS[tool](store, "/a").items() if k != "namespaces"}
                    failed, body, text = _body(await session.call_tool(tool, arguments))
                    cells += 1
                    if "read" in rights or "admin" in rights:
                        if failed or '"/b"' in text or "B episode" in text or "B fact" in text:
                            problems.append(f"{token_name} {tool} default scope: {text[:160]}")
                    elif not failed or body.get("error") != "access_denied":
                        problems.append(f"{token_name} {tool} default scope without read: {text[:160]}")
    assert problems == [], "\n".join(problems)
    FIGURES["access"]["tools"] = len(CALLS)
    FIGURES["access"]["matrix cells (token x tool x namespace)"] += cells


async def test_revoked_token_is_refused_on_the_next_request(
    settings: Any, store: Any, world: dict[str, str], tmp_path: Path
) -> None:
    made = auth.create_token(store, ["/a"], ["read", "write"], "soon revoked")
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {made['token']}"}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "remember", "arguments": {"content": "before revocation", "namespace": "/a"}}}
    with _serve_http(settings, tmp_path) as base:
        async with httpx2.AsyncClient(timeout=30) as http:
            opened = await http.post(base + "/mcp", json=INITIALIZE, headers=headers)
            assert opened.status_code == 200, opened.text
            session = {"mcp-protocol-version": "2025-06-18"}
            if "mcp-session-id" in opened.headers:  # stateful servers; the HTTP app is stateless now
                session["mcp-session-id"] = opened.headers["mcp-session-id"]
            await http.post(base + "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                            headers={**headers, **session})
            ok = await http.post(base + "/mcp", json=call, headers={**headers, **session})
            assert ok.status_code == 200 and '"isError":false' in ok.text.replace(" ", ""), ok.text
            assert auth.revoke_token(store, made["id"]) is True
            for attempt in range(3):  # the very next request, and every one after it
                call["id"] = 10 + attempt
                call["params"]["arguments"]["content"] = f"after revocation {attempt}"
                refused = await http.post(base + "/mcp", json=call, headers={**headers, **session})
                assert refused.status_code == 401, refused.text
                assert refused.json()["error"] == "access_denied"
    with store.db.transaction() as tx:
        contents = [r["content"] for r in tx.conn.execute("SELECT content FROM episodes").fetchall()]
    assert "before revocation" in contents
    assert not [c for c in contents if c.startswith("after revocation")]
    FIGURES["access"]["revoked token: requests refused (401)"] += 3
