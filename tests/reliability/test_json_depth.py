"""JSON nesting: one limit for a request body and an import line.

`stash import` of a JSONL row nested 400 levels deep failed the whole file with
"unexpected RecursionError" (the metadata check recursed past Python's stack), while the
HTTP server refuses a request body nested more than 200 deep with a parse error
(pydantic-core's parser). Now ``validate.MAX_JSON_DEPTH`` (200, that parser's limit, pinned
below) holds for both: a deeper import line is a bad row named by its line, handled as the
import's rules for bad rows say, and metadata deeper than it is refused by every path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pydantic_core
import pytest
from click.testing import CliRunner, Result

from stash_pipeline.memory import namespaces, validate
from stash_serve.cli import cli
from tests.mcp.asgi import BASE, served
from tests.mcp.test_transports import MCP_HEADERS

pytestmark = pytest.mark.reliability


def nested(levels: int, leaf: Any = "x") -> Any:
    """``leaf`` inside ``levels`` objects: {"k": {"k": … leaf}}."""
    value = leaf
    for _ in range(levels):
        value = {"k": value}
    return value


def depth_of_line(row: dict[str, Any]) -> int:
    """Nesting of a JSON document (objects and arrays), counted as its parser counts it."""
    deepest, stack = 0, [(row, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in item.values())
    return deepest


@pytest.fixture
def env(database_url: str, tmp_path: Path) -> dict[str, str]:
    return {"STASH_DATABASE_URL": database_url, "STASH_EMBEDDER": "hash", "STASH_HOME": str(tmp_path / "home")}


def _run(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=True)


def _episodes(store: Any) -> int:
    with store.db.connection() as conn:
        return int(conn.execute("SELECT count(*) AS n FROM episodes").fetchone()["n"])


def test_the_limit_is_what_the_http_servers_parser_takes(store: Any) -> None:
    """The constant is the MCP transports' parser's limit: a request body nested
    MAX_JSON_DEPTH deep is served, one level more is a parse error."""
    pydantic_core.from_json(json.dumps(nested(validate.MAX_JSON_DEPTH)))
    with pytest.raises(ValueError, match="recursion limit"):
        pydantic_core.from_json(json.dumps(nested(validate.MAX_JSON_DEPTH + 1)))

    import anyio

    async def call(metadata: Any) -> httpx2.Response:
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "remember", "arguments": {"namespace": "/p", "content": "x", "metadata": metadata}}}
        assert depth_of_line(body) == 3 + depth_of_line(metadata)
        async with (
            served(store, auth=False) as app,
            httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE) as http,
        ):
            return await http.post("/mcp", content=json.dumps(body), headers=MCP_HEADERS)

    namespaces.create(store, "/p")
    served_ok = anyio.run(call, nested(validate.MAX_JSON_DEPTH - 3))  # the body: MAX_JSON_DEPTH deep
    assert served_ok.status_code == 200 and not served_ok.json()["result"]["isError"], served_ok.text[:300]
    refused = anyio.run(call, nested(validate.MAX_JSON_DEPTH - 2))
    assert refused.status_code == 400 and refused.json()["error"]["code"] == -32700, refused.text[:300]


def test_import_names_a_line_nested_too_deep_and_imports_nothing(store: Any, env: dict[str, str],
                                                                 tmp_path: Path) -> None:
    """An episode file: every bad row is listed by line and nothing is imported (the rule
    for bad rows of an episode file), a row nested too deep as any other."""
    assert _run(env, "namespace", "create", "/p").exit_code == 0
    at_limit = {"content": "at the limit", "metadata": nested(validate.MAX_JSON_DEPTH - 1)}
    assert depth_of_line(at_limit) == validate.MAX_JSON_DEPTH
    lines = [
        {"content": "fine"},
        {"content": "deep", "metadata": nested(400)},  # the reported case
        at_limit,
        {"content": "one too deep", "metadata": nested(validate.MAX_JSON_DEPTH)},
        # beyond what Python's own parser (or json.dumps) can nest: written by hand
        '{"content": "beyond Python\'s parser", "metadata": ' + '{"k": ' * 5000 + '"x"' + "}" * 5000 + "}",
        {"content": nested(400)},  # deep where no metadata check looks
    ]
    file = tmp_path / "deep.jsonl"
    file.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    result = _run(env, "import", str(file), "-n", "/p")
    assert result.exit_code == 2, (result.output, result.exception)
    out = result.output
    assert "unexpected" not in out and "RecursionError" not in out and "Traceback" not in out, out
    assert "4 invalid row(s) in deep.jsonl; nothing was imported" in out, out
    for number in (2, 4, 5, 6):
        assert f"line {number}: nested deeper than {validate.MAX_JSON_DEPTH} levels" in out, out
    assert "line 1:" not in out and "line 3:" not in out, out
    assert _episodes(store) == 0
    # the good rows alone, the one at the limit among them, are imported
    file.write_text("\n".join(json.dumps(lines[i]) for i in (0, 2)) + "\n")
    result = _run(env, "import", str(file), "-n", "/p")
    assert result.exit_code == 0, result.output
    assert _episodes(store) == 2


def test_a_tree_export_line_nested_too_deep_is_a_reported_bad_row(store: Any, env: dict[str, str],
                                                                  tmp_path: Path) -> None:
    """A `stash export` file: a bad row is skipped and reported (the rest restored), or
    with --stop-on-bad-row ends the import with nothing written."""
    assert _run(env, "namespace", "create", "/src").exit_code == 0
    for i in range(3):
        assert _run(env, "remember", f"turn {i}", "-n", "/src", "--metadata", json.dumps({"i": i})).exit_code == 0
    backup = tmp_path / "backup.jsonl"
    assert _run(env, "export", str(backup), "-n", "/src").exit_code == 0, "export"
    lines = backup.read_text().splitlines()
    deep_line = next(n for n, text in enumerate(lines, start=1)
                     if json.loads(text).get("type") == "episode" and json.loads(text)["row"]["content"] == "turn 1")
    record = json.loads(lines[deep_line - 1])
    record["row"]["metadata"] = nested(400)
    lines[deep_line - 1] = json.dumps(record)
    backup.write_text("\n".join(lines) + "\n")

    stopped = _run(env, "import", str(backup), "--into", "/stopped", "--stop-on-bad-row")
    assert stopped.exit_code == 2, (stopped.output, stopped.exception)
    assert f"line {deep_line} column metadata: is nested deeper than" in stopped.output, stopped.output
    assert "unexpected" not in stopped.output and "RecursionError" not in stopped.output
    assert _episodes(store) == 3  # the source's only

    restored = _run(env, "import", str(backup), "--into", "/restored")
    assert restored.exit_code == 0, (restored.output, restored.exception)
    assert f"line {deep_line} column metadata: is nested deeper than" in restored.output, restored.output
    assert "skipped 1 episodes" in restored.output, restored.output
    assert _episodes(store) == 5  # the source's 3, and the 2 good ones restored


def test_metadata_nested_too_deep_is_refused_on_every_path(store: Any, env: dict[str, str]) -> None:
    """The CLI (and any caller of the library) takes no more nesting than the server does."""
    assert _run(env, "namespace", "create", "/p").exit_code == 0
    result = _run(env, "remember", "x", "-n", "/p", "--metadata", json.dumps(nested(400)))
    assert result.exit_code == 2, (result.output, result.exception)
    assert f"metadata is nested deeper than {validate.MAX_JSON_DEPTH} levels" in result.output
    assert _run(env, "remember", "x", "-n", "/p", "--metadata", json.dumps(nested(200))).exit_code == 0
    assert _episodes(store) == 1
