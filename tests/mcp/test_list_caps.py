"""List arguments are capped and de-duplicated in linear time.

`recall` with 2,000 / 4,000 / 8,000 namespace paths took 0.19 / 0.53 / 2.12 s and 50,000
ran for minutes in a worker thread nothing could cancel: every list was de-duplicated
with a list's `not in`, several times a call. Now every list argument of every tool and
command has a cap (``validate.NAMESPACES_MAX``, ``IDS_MAX``, ``LIST_ITEMS_MAX``,
``BATCH_MAX``), advertised as ``maxItems`` in the tool's schema and checked before any
entry is, and what passes is de-duplicated with ``dict.fromkeys``.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx2
import pytest
from click.testing import CliRunner
from mcp import Client

from stash_pipeline import errors, operations
from stash_pipeline.memory import validate
from stash_serve.cli import cli
from tests.mcp.asgi import BASE, served
from tests.mcp.test_transports import MCP_HEADERS

pytestmark = pytest.mark.anyio

#: a list this long is refused at once, whatever it holds
HUGE = 100_000


def _call(name: str, arguments: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments}}).encode()


#: (tool, arguments with one list of HUGE entries, the cap its refusal names)
HUGE_CALLS = [
    ("recall", {"query": "x", "namespaces": [f"/p{i}" for i in range(HUGE)]}, "at most 1000 paths"),
    ("recall", {"query": "x", "namespaces": ",".join(f"/p{i}" for i in range(HUGE))}, "at most 1000 paths"),
    ("query_facts", {"namespaces": ["/p"] * HUGE}, "at most 1000 paths"),
    ("assert_fact", {"content": "x", "namespace": "/p", "source_episode_ids": list(range(1, HUGE + 1))},
     "at most 1000 ids"),
    ("create_hypothesis", {"content": "x", "verification_plan": "y", "namespace": "/p",
                           "source_fact_ids": ",".join(str(i) for i in range(1, HUGE + 1))}, "at most 1000 ids"),
    ("remember_batch", {"namespace": "/p", "items": [{"content": "x"}] * HUGE}, "at most 1000 items"),
    ("split_entity", {"id": 1, "aliases": ["a"] * HUGE}, "at most 1000 items"),
]


async def test_a_list_of_100000_paths_or_ids_is_refused_at_once_naming_the_cap(store: Any) -> None:
    """Over MCP (streamable HTTP through the real app): each refused as invalid_input,
    naming the argument and its cap, in well under a second (about 30 ms on the 2-core
    test machine for 100,000 paths, a 1.1 MB body)."""
    timings: dict[str, float] = {}
    async with (
        served(store, auth=False) as app,
        httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE, timeout=600) as http,
    ):
        for tool, arguments, cap in HUGE_CALLS:
            body = _call(tool, arguments)
            started = time.perf_counter()
            answer = await http.post("/mcp", content=body, headers=MCP_HEADERS)
            elapsed = time.perf_counter() - started
            assert answer.status_code == 200, answer.text[:300]
            result = answer.json()["result"]
            error = json.loads(result["content"][0]["text"])
            assert result["isError"] and error["error"] == "invalid_input", error
            (argument,) = (name for name, value in arguments.items() if isinstance(value, list | str) and len(value) > 1000)
            assert f"{argument}: {cap} (got {HUGE})" in error["message"], error
            timings[f"{tool} {argument} ({type(arguments[argument]).__name__})"] = elapsed
    print("refusal times:", {k: f"{v * 1000:.0f} ms" for k, v in timings.items()})
    assert max(timings.values()) < 1.0, timings


async def test_every_list_argument_has_a_cap_in_its_schema(server: Any) -> None:
    """Each argument that takes a list, of every operation, declares its cap, and each
    tool's input schema advertises it."""
    from stash_pipeline.operations.base import ListCap

    for subject in operations.SUBJECTS:
        for op in subject.OPERATIONS:
            for name, info in op.arguments.model_fields.items():
                if "list[" in str(info.annotation):
                    assert any(isinstance(m, ListCap) for m in info.metadata), f"{op.name}.{name} has no cap"
    async with Client(server) as client:
        listed = (await client.list_tools()).tools
    arrays = 0
    for tool in listed:
        for name, schema in tool.input_schema.get("properties", {}).items():
            kinds = schema.get("type")
            arms = [schema, *schema.get("anyOf", [])]
            if kinds == "array" or (isinstance(kinds, list) and "array" in kinds) or any(
                a.get("type") == "array" for a in arms
            ):
                arrays += 1
                assert any(a.get("maxItems") for a in arms), f"{tool.name}.{name}: no maxItems in {schema}"
    assert arrays >= 20


async def test_at_the_cap_a_list_is_served_and_de_duplicated(server: Any) -> None:
    async with Client(server) as client:
        await client.call_tool("create_namespace", {"namespace": "/p"})
        hit = await client.call_tool("recall", {"query": "x", "namespaces": ["/p"] * 1000})
        assert not hit.is_error, hit.content[0].text
        over = await client.call_tool("recall", {"query": "x", "namespaces": ["/p"] * (1000 + 1)})
        assert over.is_error and "at most 1000 paths (got 1001)" in over.content[0].text


def test_the_library_refuses_long_lists_before_de_duplicating_them() -> None:
    """Callers that are no surface (import, a stage, `stash token create -n …`) pass
    through the same parsers: a list over the cap is refused at once, and a list within it
    is de-duplicated in linear time, order kept."""
    started = time.perf_counter()
    with pytest.raises(errors.InvalidInput, match=r"namespaces: at most 1000 paths \(got 20000\)"):
        validate.slugs([f"/p{i}" for i in range(20_000)])
    with pytest.raises(errors.InvalidInput, match=r"source_episode_ids: at most 1000 ids \(got 20000\)"):
        validate.record_ids(list(range(1, 20_001)), "source_episode_ids")
    assert time.perf_counter() - started < 0.5
    assert validate.slugs(["/b", "/a", "/b/", " /a "]) == ["/b", "/a"]
    assert validate.record_ids("3, 1,3,2,1", "id") == [3, 1, 2]
    paths = [f"/p{i % 500}" for i in range(1000)]
    started = time.perf_counter()
    for _ in range(100):
        assert len(validate.slugs(paths)) == 500
    assert time.perf_counter() - started < 2.0


def test_the_cli_refuses_a_list_over_the_cap_in_one_line(database_url: str, tmp_path: Any) -> None:
    env = {"STASH_DATABASE_URL": database_url, "STASH_EMBEDDER": "hash", "STASH_HOME": str(tmp_path / "home")}
    runner = CliRunner()
    paths = ",".join(["/p"] * (1000 + 1))
    for argv, words in [
        (["recall", "x", "-n", paths], "namespaces: at most 1000 paths (got 1001)"),
        (["fact", "assert", "x", "-n", "/p", "--source-episode-ids", ",".join(["1"] * 1001)],
         "--source-episode-ids: at most 1000 ids (got 1001)"),
        (["token", "create", *["-n", "/p"] * 1001, "--rights", "read"], "namespaces: at most 1000 paths (got 1001)"),
    ]:
        result = runner.invoke(cli, argv, env=env, catch_exceptions=True)
        assert result.exit_code == 2, (argv[:2], result.output, result.stderr, result.exception)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], result.stderr
