"""Bad input corpus: every hostile or malformed call is a typed error (or handled correctly).

Over MCP (in-process ``mcp.Client``) and the CLI (click's CliRunner): oversized, empty,
NUL bytes, lone surrogates, SQL/LIKE metacharacters in slugs and queries, negative and
huge limits and offsets, ids from another namespace, wrong types, unknown stages,
invalid transitions, deep causal chains and cycles. For each case:

* rejected → MCP ``isError`` with an error code from the expected set, no traceback;
  CLI exit code 2 and ONE line ``error: …`` on stderr, no traceback;
* handled → the call succeeds and its answer is right (e.g. ``%`` in a query matches
  nothing rather than everything);
* and the database is unchanged (row counts + an md5 over every row of every memory
  table) for every rejected call and every read.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from click.testing import CliRunner
from mcp import Client

from stash_pipeline.memory import episodes, facts, failures, goals, graph, hypotheses, validate
from stash_pipeline.memory import namespaces as ns_ops
from stash_serve.cli import cli
from stash_serve.mcp.server import build_server
from tests.reliability.conftest import FIGURES, snapshot

pytestmark = pytest.mark.reliability

SQLI = "'; DROP TABLE episodes; --"
BIG = "x" * 10_001  # one byte over max_content_bytes
SURROGATE = "bad \ud800 text"


@pytest.fixture
def world(store: Any) -> dict[str, int]:
    """/a and /b (and /a/sub), each with an episode, two facts, a link, a goal, a hypothesis, a failure."""
    ids: dict[str, int] = {}
    for slug in ("/a", "/b", "/a/sub"):
        ns_ops.create(store, slug)
    for key, slug in (("a", "/a"), ("b", "/b")):
        ids[f"{key}_episode"] = episodes.remember(store, slug, f"{key.upper()} team ships on Friday").id
        ids[f"{key}_fact"] = facts.assert_fact(store, slug, f"{key.upper()} team ships weekly").fact.id
        ids[f"{key}_fact2"] = facts.assert_fact(store, slug, f"{key.upper()} team has fewer outages").fact.id
        ids[f"{key}_link"] = graph.create_causal_link(
            store, slug, ids[f"{key}_fact"], effect_id=ids[f"{key}_fact2"]
        ).id
        ids[f"{key}_goal"] = goals.create(store, slug, f"{key.upper()} ships safely").id
        ids[f"{key}_hyp"] = hypotheses.create(store, slug, f"{key.upper()} weekly ships cut outages", "count outages").id
        ids[f"{key}_failure"] = failures.create(store, slug, f"{key.upper()} deploy broke", "no canary", "add canary").id
    # a finished goal and a rejected hypothesis, for invalid transitions
    ids["a_done_goal"] = goals.create(store, "/a", "A finished goal").id
    goals.complete(store, ids["a_done_goal"])
    ids["a_rejected_hyp"] = hypotheses.create(store, "/a", "A rejected idea", "look").id
    hypotheses.reject(store, ids["a_rejected_hyp"], "nope")
    return ids


@dataclass
class Case:
    tool: str
    args: dict[str, Any]
    #: error codes accepted, or None = must succeed
    errors: tuple[str, ...] | None
    #: for successes: a check of the structured result
    check: Callable[[dict[str, Any]], bool] | None = None
    #: successes that write may change the database
    writes: bool = False


def E(tool: str, args: dict[str, Any], *codes: str) -> Case:
    return Case(tool, args, codes or ("invalid_input",))


def OK(tool: str, args: dict[str, Any], check: Callable[[dict[str, Any]], bool] | None = None) -> Case:
    return Case(tool, args, None, check)


def _items(result: dict[str, Any]) -> list[Any]:
    return result.get("items", result.get("results", []))


def _empty(result: dict[str, Any]) -> bool:
    return _items(result) == []


def mcp_cases(w: dict[str, int]) -> list[Case]:
    """The MCP corpus; ``w`` holds the ids of the world fixture."""
    ns_bad = ("invalid_namespace", "invalid_input")
    cases = [
        # --- content: oversized, empty, NUL, surrogates, wrong types
        E("remember", {"content": BIG, "namespace": "/a"}, "content_too_large"),
        E("remember", {"content": "", "namespace": "/a"}, "empty_content"),
        E("remember", {"content": "   \n\t ", "namespace": "/a"}, "empty_content"),
        E("remember", {"content": "nul \x00 byte", "namespace": "/a"}),
        E("remember", {"content": SURROGATE, "namespace": "/a"}),
        E("remember", {"content": None, "namespace": "/a"}),
        E("remember", {"content": ["a", "list"], "namespace": "/a"}),
        E("remember", {"content": 42, "namespace": "/a"}),
        E("remember", {"content": {"x": 1}, "namespace": "/a"}),
        E("remember", {"namespace": "/a"}),
        E("remember", {"content": "ok", "namespace": "/a", "kind": "Bad Kind!"}),
        # an empty kind means the default kind (stored as an observation)
        Case("remember", {"content": "empty kind", "namespace": "/a", "kind": ""}, None, writes=True),
        E("remember", {"content": "ok", "namespace": "/a", "metadata": "not an object"}),
        E("remember", {"content": "ok", "namespace": "/a", "metadata": [1, 2]}),
        E("remember", {"content": "ok", "namespace": "/a", "metadata": {"k": "nul\x00"}}),
        E("remember", {"content": "ok", "namespace": "/a", "occurred_at": "yesterday-ish"}),
        E("remember", {"content": "ok", "namespace": "/a", "idempotency_key": "k" * 5000}),
        E("remember", {"content": "ok", "namespace": "/a", "idempotency_key": "nul\x00"}),
        E("remember", {"content": "ok", "namespace": "/a", "surprise": 1}),
        # --- slugs: SQL / LIKE metacharacters, traversal, case, length, types
        E("remember", {"content": "ok", "namespace": "/a%"}, *ns_bad),
        E("remember", {"content": "ok", "namespace": "/a_"}, "namespace_not_found"),
        E("remember", {"content": "ok", "namespace": "/%"}, *ns_bad),
        E("remember", {"content": "ok", "namespace": "/" + SQLI}, *ns_bad),
        E("remember", {"content": "ok", "namespace": "/a\\b"}, *ns_bad),
        E("remember", {"content": "ok", "namespace": "/a/../b"}, *ns_bad),
        E("remember", {"content": "ok", "namespace": "/A"}, *ns_bad),
        E("remember", {"content": "ok", "namespace": "a"}, *ns_bad),
        E("remember", {"content": "ok", "namespace": "//a"}, *ns_bad),
        E("remember", {"content": "ok", "namespace": "/" + "a" * 70}, *ns_bad),
        E("remember", {"content": "ok", "namespace": "/a/" + "/b" * 200}, *ns_bad),
        E("remember", {"content": "ok", "namespace": ""}, *ns_bad),
        E("remember", {"content": "ok", "namespace": 5}, *ns_bad),
        E("remember", {"content": "ok", "namespace": ["/a"]}, *ns_bad),
        E("remember", {"content": "ok", "namespace": "/nope"}, "namespace_not_found"),
        E("remember", {"content": "ok", "namespace": "/a\ud800"}, *ns_bad),
        E("create_namespace", {"namespace": "/" + SQLI}, *ns_bad),
        E("create_namespace", {"namespace": "/a%b"}, *ns_bad),
        E("create_namespace", {"namespace": "/x", "description": "d\x00"}),
        E("create_namespace", {"namespace": "/x", "name": BIG * 2}, "invalid_input", "content_too_large"),
        E("create_namespace", {"namespace": None}, *ns_bad),
        # without confirm: a preview that deletes nothing
        OK("delete_namespace", {"namespace": "/a", "confirm": False}, lambda r: r["deleted"] is False),
        E("delete_namespace", {"namespace": "/%", "confirm": True}, *ns_bad),
        E("delete_namespace", {"namespace": "/", "confirm": True}, "invalid_input", "invalid_namespace"),
        E("delete_namespace", {"namespace": "/nope", "confirm": True}, "namespace_not_found"),
        # --- reads with metacharacters: handled, match literally
        OK("list_namespaces", {"namespaces": "/a_"}, None),
        OK("recall", {"query": "%", "namespaces": "/a"}),
        OK("recall", {"query": "_", "namespaces": "/a"}),
        OK("recall", {"query": SQLI, "namespaces": "/a"}),
        OK("recall", {"query": "\\", "namespaces": "/a"}),
        OK("recall", {"query": "a:* & !b | (c", "namespaces": "/a"}),
        OK("query_facts", {"namespaces": "/a", "entity": "%"}, _empty),
        OK("query_facts", {"namespaces": "/a", "entity": "_"}, _empty),
        OK("query_facts", {"namespaces": "/a", "property": SQLI}, _empty),
        OK("query_facts", {"namespaces": "/a", "entity": "\\"}, _empty),
        OK("query_relationships", {"namespaces": "/a", "entity": "%"}, _empty),
        E("query_relationships", {"namespaces": "/a", "relation_type": "_"}),
        E("recall", {"query": ""}, "empty_content", "invalid_input"),
        E("recall", {"query": BIG}, "content_too_large", "invalid_input"),
        E("recall", {"query": "nul\x00"}),
        E("recall", {"query": SURROGATE}),
        E("recall", {"query": 7}),
        E("recall", {"query": "x", "namespaces": "/a%"}, *ns_bad),
        E("recall", {"query": "x", "namespaces": ["/a", 3]}, *ns_bad),
        E("recall", {"query": "x", "namespaces": {"a": 1}}, *ns_bad),
        E("recall", {"query": "x", "as_of": "not a time"}),
        E("recall", {"query": "x", "max_tokens": -5}),
        E("forget", {"about": ""}, "empty_content", "invalid_input"),
        E("forget", {"about": "x", "threshold": 1.5}),
        E("forget", {"about": "x", "threshold": -0.1}),
        E("forget", {"about": "x", "threshold": "high"}),
        E("set_context", {"focus": "", "namespace": "/a"}, "empty_content"),
        E("set_context", {"focus": BIG, "namespace": "/a"}, "content_too_large"),
        E("set_context", {"focus": "f", "namespace": "/nope"}, "namespace_not_found"),
        E("get_context", {"namespace": "/%"}, *ns_bad),
        # --- limits and offsets
        E("recall", {"query": "x", "limit": -1}),
        E("recall", {"query": "x", "limit": 0}),
        E("recall", {"query": "x", "limit": 10**18}),
        # JSON numbers sent as strings are coerced by the schema layer (pydantic lax mode)
        OK("recall", {"query": "x", "limit": "10"}),
        E("recall", {"query": "x", "limit": 2.5}),
        E("recall", {"query": "x", "limit": None}),
        E("list_namespaces", {"limit": -1}),
        E("list_namespaces", {"offset": -1}),
        E("list_namespaces", {"limit": 10**9}),
        E("query_facts", {"limit": 0}),
        E("query_facts", {"offset": -10}),
        OK("query_facts", {"offset": "0"}),
        OK("query_facts", {"offset": 10**12}, _empty),
        OK("list_goals", {"offset": 2**62}, _empty),
        E("list_goals", {"offset": 2**70}),
        OK("list_hypotheses", {"limit": True}, lambda r: r["limit"] == 1),  # lax: true → 1
        E("list_failures", {"limit": [1]}),
        E("query_patterns", {"limit": -3}),
        E("list_causal_links", {"offset": -3}),
        E("list_contradictions", {"limit": 1_000_000}),
        E("query_relationships", {"limit": -1}),
        # --- ids: wrong types, out of range, unknown
        E("get_episode", {"id": "abc"}),
        E("get_episode", {"id": -1}),
        E("get_episode", {"id": 0}),
        E("get_episode", {"id": 2**63}),
        E("get_episode", {"id": None}),
        E("get_episode", {"id": [1]}),
        E("get_episode", {"id": 1.5}),
        E("get_episode", {"id": 999_999_999}, "record_not_found"),
        E("get_fact", {"id": 999_999_999}, "record_not_found"),
        E("purge_fact", {"id": -5}),
        E("purge_episode", {"id": 999_999_999}, "record_not_found"),
        E("withdraw_fact", {"id": w["a_fact"], "reason": ""}, "empty_content", "invalid_input"),
        E("withdraw_fact", {"id": 999_999_999, "reason": "r"}, "record_not_found"),
        E("show_goal", {"id": 999_999_999}, "record_not_found"),
        E("show_hypothesis", {"id": "1; DROP TABLE hypotheses"}),
        E("show_failure", {"id": 999_999_999}, "record_not_found"),
        E("delete_causal_link", {"id": 999_999_999}, "record_not_found"),
        E("resolve_contradiction", {"id": 999_999_999, "resolution": "keep_new"}, "record_not_found"),
        E("resolve_contradiction", {"id": 1, "resolution": "burn_it"}),
        # --- ids from another namespace (cross-namespace references must not be made)
        E("create_causal_link", {"cause_id": w["b_fact"], "effect_id": w["a_fact"], "namespace": "/a"},
          "record_not_found", "invalid_input"),
        E("create_causal_link", {"cause_id": w["a_fact"], "effect_id": w["b_fact2"], "namespace": "/a"},
          "record_not_found", "invalid_input"),
        E("create_causal_link", {"cause_id": w["a_fact"], "effect_failure_id": w["b_failure"], "namespace": "/a"},
          "record_not_found", "invalid_input"),
        E("create_causal_link", {"cause_id": w["a_fact"], "effect_id": w["a_fact"], "namespace": "/a"}),
        E("create_causal_link", {"cause_id": w["a_fact"], "namespace": "/a"}),
        E("create_causal_link", {"cause_id": w["a_fact"], "effect_id": w["a_fact2"], "namespace": "/a"}, "conflict"),
        E("create_causal_link", {"cause_id": w["a_fact"], "effect_id": w["a_fact2"], "namespace": "/a",
                                 "confidence": 2.0}),
        E("assert_fact", {"content": "c", "namespace": "/a", "source_episode_ids": [w["b_episode"]]},
          "record_not_found", "invalid_input"),
        E("assert_fact", {"content": "c", "namespace": "/a", "source_episode_ids": "1,x"}),
        E("assert_fact", {"content": "c", "namespace": "/a", "confidence": -1}),
        E("assert_fact", {"content": "c", "namespace": "/a", "entity": "e"}),
        E("assert_fact", {"content": "c", "namespace": "/a", "entity": "e\x00", "property": "p"}),
        E("create_goal", {"content": "sub", "namespace": "/a", "parent_id": w["b_goal"]},
          "record_not_found", "invalid_input"),
        E("create_goal", {"content": "g", "namespace": "/a", "priority": "high"}),
        E("create_goal", {"content": "g", "namespace": "/a", "priority": 10**12}),
        E("create_failure", {"content": "f", "reason": "r", "lesson": "l", "namespace": "/a",
                             "goal_id": w["b_goal"]}, "record_not_found", "invalid_input"),
        E("create_failure", {"content": "f", "reason": "", "lesson": "l", "namespace": "/a"}, "empty_content"),
        E("create_hypothesis", {"content": "h", "verification_plan": "p", "namespace": "/a",
                                "source_fact_ids": [w["b_fact"]]}, "record_not_found", "invalid_input"),
        E("create_hypothesis", {"content": "h", "verification_plan": "", "namespace": "/a"}, "empty_content"),
        E("create_hypothesis", {"content": "h", "verification_plan": "p", "namespace": "/a", "confidence": 7}),
        E("trace_causal_chain", {"fact_id": w["b_fact"], "namespaces": "/a"}, "record_not_found"),
        OK("list_goals", {"namespaces": "/a", "parent_id": w["b_goal"]}, _empty),
        OK("list_failures", {"namespaces": "/a", "goal_id": w["b_goal"]}, _empty),
        # --- enums, stages, transitions
        E("list_goals", {"status": "everything"}),
        E("list_hypotheses", {"status": "maybe"}),
        E("query_facts", {"origin": "made_up"}),
        E("trace_causal_chain", {"fact_id": w["a_fact"], "direction": "sideways"}),
        E("trace_causal_chain", {"fact_id": w["a_fact"], "max_depth": 1000}),
        E("trace_causal_chain", {"fact_id": w["a_fact"], "max_depth": 0}),
        E("trace_causal_chain", {"fact_id": w["a_fact"], "max_depth": -1}),
        E("consolidate", {"namespaces": "/a", "stage": "nope"}),
        E("consolidate", {"namespaces": "/a", "stage": "facts; DROP TABLE facts"}),
        E("consolidate", {"namespaces": "/a", "stage": ""}),
        E("consolidate", {"namespaces": "/nope"}, "namespace_not_found"),
        E("consolidation_status", {"namespaces": "/%"}, *ns_bad),
        E("complete_goal", {"id": w["a_done_goal"]}, "invalid_transition"),
        E("abandon_goal", {"id": w["a_done_goal"]}, "invalid_transition"),
        E("update_goal", {"id": w["a_goal"], "priority": "x"}),
        E("confirm_hypothesis", {"id": w["a_rejected_hyp"]}, "invalid_transition"),
        E("test_hypothesis", {"id": w["a_rejected_hyp"]}, "invalid_transition"),
        E("reject_hypothesis", {"id": w["a_rejected_hyp"]}, "invalid_transition"),
        E("refine_hypothesis", {"id": w["a_hyp"], "confidence": 3}),
        E("refine_hypothesis", {"id": w["a_hyp"], "content": ""}, "empty_content", "invalid_input"),
        # --- batches: all or nothing
        E("remember_batch", {"namespace": "/a", "items": "nope"}),
        E("remember_batch", {"namespace": "/a", "items": []}),
        E("remember_batch", {"namespace": "/a", "items": [{"content": "fine"}, {"content": ""}]},
          "empty_content", "invalid_input"),
        E("remember_batch", {"namespace": "/a", "items": [{"content": "fine"}, {"content": "nul\x00"}]}),
        E("remember_batch", {"namespace": "/a", "items": [{"content": "fine"}, {"content": BIG}]},
          "content_too_large", "invalid_input"),
        E("remember_batch", {"namespace": "/a", "items": [{"content": "fine"}, "bare string"]}),
        E("remember_batch", {"namespace": "/a", "items": [{"content": "x"}] * 10_001},
          "invalid_input", "content_too_large"),
        # --- unknown tool / arguments
        E("no_such_tool", {}, "unknown_tool", "invalid_input"),
        E("stats", {"namespace": "/a"}),
        E("init", {"force": True}),
        # a destructive switch takes only a real JSON true: "yes" is refused, nothing deleted
        E("delete_namespace", {"namespace": "/a/sub", "confirm": "yes"}, "invalid_input"),
    ]
    return cases


@pytest.mark.anyio
async def test_mcp_bad_input_corpus(store: Any, world: dict[str, int]) -> None:
    server = build_server(store, auth=False)
    cases = mcp_cases(world)
    problems: list[str] = []
    async with Client(server) as client:
        for case in cases:
            before = snapshot(store)
            result = await client.call_tool(case.tool, case.args)
            text = result.content[0].text if result.content else ""
            label = f"{case.tool}({_short(case.args)})"
            if "Traceback" in text or "psycopg" in text:
                problems.append(f"{label}: leaked internals: {text[:200]}")
            if case.errors is None:
                if result.is_error:
                    problems.append(f"{label}: expected success, got {text[:200]}")
                elif case.check and not case.check(result.structured_content or {}):
                    problems.append(f"{label}: wrong answer {text[:200]}")
            else:
                code = json.loads(text).get("error") if result.is_error else None
                if code not in case.errors:
                    problems.append(f"{label}: expected {case.errors}, got {'error ' + str(code) if code else 'success'}: {text[:160]}")
            if not case.writes and snapshot(store) != before:
                problems.append(f"{label}: changed the database")
    assert problems == [], "\n".join(problems)
    FIGURES["bad input"]["mcp cases"] += len(cases)
    FIGURES["bad input"]["mcp rejected with a typed error"] += sum(c.errors is not None for c in cases)
    FIGURES["bad input"]["mcp handled correctly"] += sum(c.errors is None for c in cases)


def _short(args: dict[str, Any]) -> str:
    text = json.dumps(args, default=str)
    return text if len(text) < 90 else text[:87] + "..."


# --- CLI ------------------------------------------------------------------------------------


def cli_cases(w: dict[str, int]) -> list[tuple[list[str], int]]:
    """(argv, expected exit code): 2 = rejected as the caller's mistake."""
    a, b = str(w["a_fact"]), str(w["b_fact"])
    return [
        (["remember", BIG, "-n", "/a"], 2),
        (["remember", "", "-n", "/a"], 2),
        (["remember", "   ", "-n", "/a"], 2),
        (["remember", "nul \x00 byte", "-n", "/a"], 2),
        (["remember", "ok", "-n", "/a%"], 2),
        (["remember", "ok", "-n", "/" + SQLI], 2),
        (["remember", "ok", "-n", "/a\\b"], 2),
        (["remember", "ok", "-n", "/nope"], 2),
        (["remember", "ok", "-n", "a"], 2),
        (["remember", "ok", "-n", "/a", "--kind", "Bad Kind"], 2),
        (["remember", "ok", "-n", "/a", "--metadata", "{not json"], 2),
        (["remember", "ok", "-n", "/a", "--metadata", "[1, 2]"], 2),
        (["remember", "ok", "-n", "/a", "--occurred-at", "someday"], 2),
        (["remember", "ok"], 2),
        (["recall", "x", "--limit", "-1"], 2),
        (["recall", "x", "--limit", "0"], 2),
        (["recall", "x", "--limit", "99999999999999999999"], 2),
        (["recall", "x", "--limit", "ten"], 2),
        (["recall", "", "-n", "/a"], 2),
        (["recall", "x", "-n", "/a%"], 2),
        (["recall", "x", "--as-of", "not a date"], 2),
        (["facts", "--limit", "-5"], 2),
        (["facts", "--offset", "-1"], 2),
        (["facts", "--origin", "made_up"], 2),
        (["facts", "--since", "tomorrowish"], 2),
        (["episode", "show", "abc"], 2),
        (["episode", "show", "-1"], 2),
        (["episode", "show", "999999999"], 2),
        (["episode", "show", str(2**63)], 2),
        (["fact", "show", "999999999"], 2),
        (["fact", "withdraw", a, "--reason", ""], 2),
        (["fact", "assert", "c", "-n", "/a", "--confidence", "2"], 2),
        (["fact", "assert", "c", "-n", "/a", "--source-episode-ids", str(w["b_episode"])], 2),
        (["fact", "assert", "c", "-n", "/a", "--source-episode-ids", "1,x"], 2),
        (["fact", "assert", "c", "-n", "/a", "--entity", "e"], 2),
        (["causal", "create", "-n", "/a", "--cause-id", b, "--effect-id", a], 2),
        (["causal", "create", "-n", "/a", "--cause-id", a, "--effect-id", a], 2),
        (["causal", "create", "-n", "/a", "--cause-id", a], 2),
        (["causal", "trace", a, "--depth", "1000"], 2),
        (["causal", "trace", a, "--depth", "0"], 2),
        (["causal", "trace", a, "--direction", "sideways"], 2),
        (["causal", "trace", "999999999"], 2),
        (["goal", "create", "g", "-n", "/a", "--parent-id", str(w["b_goal"])], 2),
        (["goal", "create", "g", "-n", "/a", "--priority", "high"], 2),
        (["goal", "complete", str(w["a_done_goal"])], 2),
        (["goal", "abandon", str(w["a_done_goal"])], 2),
        (["hypothesis", "confirm", str(w["a_rejected_hyp"])], 2),
        (["hypothesis", "create", "h", "-n", "/a"], 2),
        (["failure", "create", "f", "-n", "/a", "--reason", "", "--lesson", "l"], 2),
        (["failure", "create", "f", "-n", "/a", "--reason", "r", "--lesson", "l", "--goal-id", str(w["b_goal"])], 2),
        (["namespace", "create", "/" + SQLI], 2),
        (["namespace", "create", "/A"], 2),
        (["namespace", "delete", "/nope", "--yes"], 2),
        (["namespace", "list", "-n", "/%"], 2),
        (["context", "set", "", "-n", "/a"], 2),
        (["consolidate", "run", "-n", "/a", "--stage", "nope"], 2),
        (["consolidate", "run", "-n", "/nope"], 2),
        (["consolidate", "status", "-n", "/a_"], 2),
        (["dead-letters", "retry", "abc"], 2),
        (["purge", "fact", "999999999"], 2),
        (["purge", "episode", "-3"], 2),
        (["no-such-command"], 2),
        (["token", "create", "-n", "/a", "--rights", "root"], 2),
        # handled: metacharacters in queries and filters are matched literally
        (["recall", "%", "-n", "/a"], 0),
        (["recall", SQLI, "-n", "/a"], 0),
        (["facts", "-n", "/a", "--entity", "%"], 0),
        (["facts", "-n", "/a", "--entity", "_"], 0),
        (["relationships", "-n", "/a", "--entity", "%"], 0),
    ]


def test_cli_bad_input_corpus(store: Any, world: dict[str, int], database_url: str, tmp_path: Any) -> None:
    env = {"STASH_DATABASE_URL": database_url, "STASH_EMBEDDER": "hash", "STASH_HOME": str(tmp_path / "home")}
    runner = CliRunner()
    problems: list[str] = []
    cases = cli_cases(world)
    for argv, expected in cases:
        before = snapshot(store)
        result = runner.invoke(cli, argv, env=env, catch_exceptions=True)
        label = "stash " + " ".join(a if len(a) < 40 else a[:37] + "..." for a in argv)
        err = result.stderr.strip()
        if result.exit_code != expected:
            problems.append(f"{label}: exit {result.exit_code} (expected {expected}): {err[:200]!r} {result.exception!r}")
        if "Traceback" in result.output + result.stderr or (result.exception and not isinstance(result.exception, SystemExit)):
            problems.append(f"{label}: traceback / uncaught {result.exception!r}")
        if expected == 2:
            lines = err.splitlines()
            # a Stash error is one line; click's own usage errors end with one "Error: …" line
            if not lines or not (
                (len(lines) == 1 and lines[0].startswith("error: ")) or lines[-1].startswith("Error: ")
            ):
                problems.append(f"{label}: not a one-line error: {err[:200]!r}")
        if snapshot(store) != before:
            problems.append(f"{label}: changed the database")
    assert problems == [], "\n".join(problems)
    FIGURES["bad input"]["cli cases"] += len(cases)
    FIGURES["bad input"]["cli rejected (exit 2, one line)"] += sum(e == 2 for _, e in cases)
    FIGURES["bad input"]["cli handled correctly"] += sum(e == 0 for _, e in cases)


# --- deep chains and cycles -------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("depth", [pytest.param(200, id="200"), pytest.param(1000, id="1000", marks=pytest.mark.slow)])
async def test_deep_causal_chain_and_cycle_traces_are_bounded(store: Any, depth: int) -> None:
    ns_ops.create(store, "/deep")
    with store.db.transaction() as tx:  # a chain of depth+1 facts, written directly for speed
        tx.conn.execute(
            """INSERT INTO facts (namespace_id, content, origin, embedding, embedding_model)
               SELECT n.id, 'step ' || g, 'asserted', array_fill(0.01, ARRAY[384])::vector, 'hash'
               FROM namespaces n, generate_series(0, %(d)s) g WHERE n.slug = '/deep'""",
            {"d": depth},
        )
        ids = [r["id"] for r in tx.conn.execute(
            "SELECT f.id FROM facts f JOIN namespaces n ON n.id = f.namespace_id WHERE n.slug = '/deep' ORDER BY f.id"
        ).fetchall()]
    for cause, effect in itertools.pairwise(ids):
        graph.create_causal_link(store, "/deep", cause, effect_id=effect)
    # a cycle: the last step causes the first
    graph.create_causal_link(store, "/deep", ids[-1], effect_id=ids[0], rationale="loop back")
    server = build_server(store, auth=False)
    async with Client(server) as client:
        deep = await client.call_tool("trace_causal_chain", {"fact_id": ids[0], "max_depth": depth})
        assert deep.is_error and json.loads(deep.content[0].text)["error"] == "invalid_input"
        for direction in ("forward", "backward"):
            before = snapshot(store)
            result = await client.call_tool(
                "trace_causal_chain", {"fact_id": ids[0], "max_depth": validate.TRACE_DEPTH_MAX, "direction": direction}
            )
            assert not result.is_error, result.content[0].text
            steps = result.structured_content.get("steps", result.structured_content.get("items", []))
            # bounded by max_depth despite the cycle, each link at most once per path
            assert 1 <= len(steps) <= validate.TRACE_DEPTH_MAX * 2, len(steps)
            assert snapshot(store) == before
    FIGURES["bad input"][f"deep chain of {depth} links + cycle traced, bounded"] += 1
