"""Stash driven by the official TypeScript MCP SDK client, over stdio and streamable HTTP.

Most MCP hosts, and the MCP Inspector, build on that client, and it is stricter than the
Python one: it validates every structured answer against the tool's output schema and
throws when an answer (error results included) carries structured content the schema
does not describe, so a tool error would never reach the agent. One node process per
transport lists the tools, makes a good and a bad call on every tool and records what
the client saw; the assertions are here.

The SDK comes from npm at test time, pinned, into the pytest cache (``.pytest_cache``),
once per machine. Skipped, with the reason, only where ``node`` or ``npm`` is absent.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx2
import pytest

from stash_pipeline import __version__, auth
from stash_serve.mcp.toolsets import DEFAULT_TOOLS
from tests.mcp.test_transports import _env, _serve_http, _stash

#: the client under test (the version the interop problem was found with, or newer)
SDK = "@modelcontextprotocol/sdk@1.32.2"
#: the revision that client offers in its handshake, and Stash accepts
HANDSHAKE_REVISION = "2025-11-25"
DRIVER = Path(__file__).with_name("ts_client") / "drive.mjs"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def ts_client(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the pinned SDK and the driver script (node resolves from it).

    It lives in pytest's cache, so a second run installs nothing; with the cache plugin
    off (``-p no:cacheprovider``) in a temporary directory of this session.
    """
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed to run the TypeScript MCP SDK client")
    cache = getattr(request.config, "cache", None)
    home = Path(cache.mkdir("ts-mcp-client")) if cache is not None else tmp_path_factory.mktemp("ts-mcp-client")
    marker = home / "installed.txt"
    with (home / "install.lock").open("w") as lock:  # parallel test workers install once
        fcntl.flock(lock, fcntl.LOCK_EX)
        _install(npm, home, marker)
        shutil.copy(DRIVER, home / "drive.mjs")
    return home


def _install(npm: str, home: Path, marker: Path) -> None:
    if not marker.is_file() or marker.read_text() != SDK:
        (home / "package.json").write_text('{"name": "stash-ts-client-test", "private": true, "type": "module"}\n')
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--no-save", "--prefix", str(home), SDK],
            capture_output=True, text=True, timeout=600,
        )
        assert done.returncode == 0, f"npm install {SDK} failed:\n{done.stdout}\n{done.stderr}"
        marker.write_text(SDK)


def drive(home: Path, plan: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """Run the driver on ``plan``; what the TypeScript client saw."""
    plan_file = tmp_path / f"plan-{plan['target']['kind']}.json"
    plan_file.write_text(json.dumps(plan))
    done = subprocess.run(
        ["node", str(home / "drive.mjs"), str(plan_file)],
        capture_output=True, text=True, timeout=300, cwd=home,
    )
    assert done.returncode == 0, f"driver failed:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout)


def good_calls(p: str) -> list[dict[str, Any]]:
    """A call that must succeed for every tool, in namespace ``p`` (fresh), in order."""

    def c(tool: str, arguments: dict[str, Any], save: str | None = None) -> dict[str, Any]:
        return {"tool": tool, "arguments": arguments, "save": save, "expect": "ok"}

    fact = {"namespace": p}
    return [
        c("init", {}),
        c("create_namespace", {"namespace": p, "description": "TypeScript client"}),
        c("list_namespaces", {"namespaces": p}),
        c("remember", {"content": "Deploys to production happen on Fridays", "namespace": p}, "ep"),
        c("remember_batch", {"namespace": p, "items": [{"content": "The build uses Bazel"}, {"content": "CI runs on Linux"}]}),
        c("get_episode", {"id": "$ep.id"}),
        c("recall", {"query": "when do we deploy", "namespaces": p}),
        c("forget", {"about": "The build uses Bazel", "namespaces": p, "preview": True}),
        c("remember", {"content": "scratch note to purge", "namespace": p}, "scratch"),
        c("purge_episode", {"id": "$scratch.id"}),
        c("set_context", {"focus": "ship v2", "namespace": p}),
        c("get_context", {"namespace": p}),
        c("clear_context", {"namespace": p}),
        c("assert_fact", {**fact, "content": "Alice reviews every release", "entity": "Alice", "property": "role",
                          "value": "reviewer"}, "f1"),
        c("assert_fact", {**fact, "content": "The API limit is 100 rps", "entity": "api", "property": "rate limit",
                          "value": "100 rps"}),
        c("assert_fact", {**fact, "content": "The API limit is 500 rps", "entity": "api", "property": "rate limit",
                          "value": "500 rps"}),
        c("assert_fact", {**fact, "content": "Ally leads the Lisbon office", "entity": "Ally", "property": "office",
                          "value": "Lisbon"}, "f2"),
        c("query_facts", {"namespaces": p}),
        c("get_fact", {"id": "$f1.fact.id", "include_lineage": True}),
        c("get_entity", {"name": "Alice", "namespaces": p}, "alice"),
        c("get_entity", {"name": "Ally", "namespaces": p}, "ally"),
        c("merge_entities", {"id": "$alice.entity.id", "merge_id": "$ally.entity.id", "note": "same person"}),
        c("split_entity", {"id": "$alice.entity.id", "aliases": ["Ally"]}, "split"),
        c("query_relationships", {"namespaces": p}),
        c("query_patterns", {"namespaces": p}),
        c("create_causal_link", {"cause_id": "$f1.fact.id", "effect_id": "$f2.fact.id", "namespace": p}, "link"),
        c("list_causal_links", {"namespaces": p}),
        c("trace_causal_chain", {"fact_id": "$f1.fact.id"}),
        c("delete_causal_link", {"id": "$link.id"}),
        c("list_contradictions", {"namespaces": p}, "contradictions"),
        c("resolve_contradiction", {"id": "$contradictions.items.0.id", "resolution": "keep_new"}),
        c("withdraw_fact", {"id": "$f2.fact.id", "reason": "wrong office"}),
        c("purge_fact", {"id": "$f2.fact.id"}),
        c("purge_entity", {"id": "$split.new_id"}),
        c("create_hypothesis", {"content": "Friday deploys cause incidents", "verification_plan": "count incidents",
                                "namespace": p}, "h1"),
        c("show_hypothesis", {"id": "$h1.id"}),
        c("test_hypothesis", {"id": "$h1.id"}),
        c("refine_hypothesis", {"id": "$h1.id", "content": "Friday deploys cause weekend incidents"}),
        c("test_hypothesis", {"id": "$h1.id"}),
        c("confirm_hypothesis", {"id": "$h1.id"}),
        c("create_hypothesis", {"content": "Bazel is slow", "verification_plan": "time builds", "namespace": p}, "h2"),
        c("reject_hypothesis", {"id": "$h2.id", "reason": "it is fast"}),
        c("create_hypothesis", {"content": "To delete", "verification_plan": "none", "namespace": p}, "h3"),
        c("delete_hypothesis", {"id": "$h3.id"}),
        c("list_hypotheses", {"namespaces": p}),
        c("create_goal", {"content": "Ship v2", "namespace": p}, "g1"),
        c("show_goal", {"id": "$g1.id"}),
        c("update_goal", {"id": "$g1.id", "priority": 2}),
        c("create_goal", {"content": "Try Rust", "namespace": p}, "g2"),
        c("abandon_goal", {"id": "$g2.id"}),
        c("create_goal", {"content": "To delete", "namespace": p}, "g3"),
        c("delete_goal", {"id": "$g3.id"}),
        c("create_failure", {"content": "Deploy broke", "reason": "no canary", "lesson": "add a canary",
                             "namespace": p}, "fl"),
        c("show_failure", {"id": "$fl.id"}),
        c("list_failures", {"namespaces": p}),
        c("delete_failure", {"id": "$fl.id"}),
        c("complete_goal", {"id": "$g1.id"}),
        c("list_goals", {"namespaces": p}),
        c("consolidate", {"namespaces": p, "stage": "decay"}),  # decay needs no model
        c("consolidation_status", {"namespaces": p}),
        c("stats", {"namespaces": p}),
        c("delete_namespace", {"namespace": p, "confirm": False}),  # a preview
    ]


#: passed to every listed tool by the driver: a misspelt argument the tool must refuse
UNKNOWN = "bogus_argument"


def bad_calls(p: str) -> list[dict[str, Any]]:
    """Errors from the library (the driver adds an unknown argument to every tool)."""
    return [
        {"tool": "remember", "arguments": {"content": "", "namespace": p}, "expect": "empty_content", "says": "empty"},
        {"tool": "recall", "arguments": {"query": "x", "namespaces": "/ts-missing"}, "expect": "namespace_not_found",
         "says": "/ts-missing"},
        {"tool": "list_goals", "arguments": {"status": "done"}, "expect": "invalid_input", "says": "status"},
        {"tool": "get_fact", "arguments": {"id": 424242}, "expect": "record_not_found", "says": "424242"},
        {"tool": "list_namespaces", "arguments": {"limit": "many"}, "expect": "invalid_input", "says": "limit"},
    ]


def check(seen: dict[str, Any], calls: list[dict[str, Any]]) -> None:
    assert seen["server"]["server"] == {"name": "stash", "title": "Stash memory", "version": __version__}
    listed = {t["name"]: t["output_schema"] for t in seen["tools"]}
    assert {c["tool"] for c in calls if c["expect"] == "ok"} == set(listed), "a good call for every tool"
    calls = calls + [
        {"tool": t, "arguments": {UNKNOWN: 1}, "expect": "invalid_input", "says": f"{UNKNOWN} for {t}"} for t in listed
    ]
    problems = []
    for call, got in zip(calls, seen["calls"], strict=True):
        label = f"{call['tool']}({json.dumps(call['arguments'])[:80]})"
        if "thrown" in got:
            problems.append(f"{label}: the client threw {got['thrown']}")
        elif call["expect"] == "ok":
            if got["is_error"]:
                problems.append(f"{label}: failed: {got['text'][:200]}")
            elif listed[call["tool"]] and got["structured"] is None:
                problems.append(f"{label}: no structured content")
        else:
            body = json.loads(got["text"]) if got["is_error"] else {}
            if body.get("error") != call["expect"] or call["says"] not in body.get("message", ""):
                problems.append(f"{label}: expected {call['expect']} saying {call['says']!r}, got {got['text'][:200]}")
            elif got["structured"] is not None:
                problems.append(f"{label}: an error result with structured content")
            elif (got["meta"] or {}).get("stash/error", {}).get("error") != call["expect"]:
                problems.append(f"{label}: the code is not in _meta: {got['meta']}")
    assert problems == [], "\n".join(problems)


def test_typescript_sdk_client_over_stdio(ts_client: Path, settings: Any, tmp_path: Path) -> None:
    calls = good_calls("/ts") + bad_calls("/ts")
    target = {
        "kind": "stdio",
        "command": _stash(),
        "args": ["serve", "mcp", "--transport", "stdio"],
        "env": {**os.environ, **_env(settings, tmp_path)},
        "cwd": str(REPO),
    }
    check(drive(ts_client, {"target": target, "calls": calls, "unknown_argument": UNKNOWN}, tmp_path), calls)


def test_typescript_sdk_client_over_streamable_http(
    ts_client: Path, settings: Any, store: Any, tmp_path: Path
) -> None:
    admin = auth.create_token(store, ["/"], ["read", "write", "admin"], "ts")["token"]
    revoked = auth.create_token(store, ["/"], ["read"], "old")
    auth.revoke_token(store, revoked["id"])
    # the default toolset here (stdio above serves every tool): its tools, called the same way
    default = set(DEFAULT_TOOLS)
    calls = [c for c in good_calls("/ts") + bad_calls("/ts") if c["tool"] in default]
    with _serve_http(settings, tmp_path, "--toolsets", "default") as base:
        url = base + "/mcp"
        probes = [
            {"kind": "http", "url": url, "token": None},
            {"kind": "http", "url": url, "token": "stash_nope_nope"},
            {"kind": "http", "url": url, "token": revoked["token"]},
        ]
        seen = drive(ts_client, {"target": {"kind": "http", "url": url, "token": admin}, "auth_probes": probes,
                                 "calls": calls, "unknown_argument": UNKNOWN}, tmp_path)
        assert seen["server"]["protocol"] == HANDSHAKE_REVISION  # the newest this SDK offers
        # nothing the client did looked for OAuth: it was told the token is wrong, and why
        log = "".join(p.read_text() for p in tmp_path.glob("http-*.log"))
        assert "/.well-known/" not in log and "/register" not in log, log
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-authorization-server", "/register"):
            discovery = httpx2.post(base + path, timeout=10) if path == "/register" else httpx2.get(base + path, timeout=10)
            assert discovery.status_code == 404 and "static bearer token" in discovery.json()["message"], path
        for headers in ({}, {"Authorization": "Bearer stash_nope_nope"}):
            refused = httpx2.post(url, json={}, headers=headers, timeout=10)
            challenge = refused.headers["www-authenticate"]
            assert refused.status_code == 401 and 'error="invalid_token"' in challenge, challenge
            assert "resource_metadata" not in challenge  # nothing points the client at OAuth
    missing, unknown, revoked_seen = seen["auth"]
    assert not missing["connected"] and "a valid bearer token is required" in missing["message"], missing
    assert not unknown["connected"] and "unknown or revoked token" in unknown["message"], unknown
    assert not revoked_seen["connected"] and "unknown or revoked token" in revoked_seen["message"], revoked_seen
    assert all(p["code"] == 401 for p in seen["auth"]), seen["auth"]
    check(seen, calls)

