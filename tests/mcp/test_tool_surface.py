"""The tool surface an agent sees: one name per concept across every tool, deprecated
names still accepted, and the size of what tools/list and initialize send.

The naming rule (also in ``stash_serve.mcp.params``):
  namespace        one exact namespace path (a string)
  namespaces       the trees a read covers (a list or a comma string)
  id               the record the tool acts on; ``<role>_id`` another record; ``<kind>_ids`` a list
  limit, offset    paging (both, on every tool whose answer has next_offset)
  since, until, as_of, ``<event>_at``   times, ISO 8601 text
  include_<what>   a boolean that adds records or fields to a read
  note             free text appended to a record
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from stash_serve.mcp.aliases import DEPRECATED_ARGUMENTS
from tests.mcp.conftest import fails, ok

pytestmark = pytest.mark.anyio

#: characters of every description an agent receives (tool descriptions, every
#: "description" inside the input and output schemas) plus the server instructions.
#: Measured before the cut: 13,971 (3,409 tool, 7,163 parameter and 897 output-schema
#: description characters, 2,502 of instructions); after it: 9,386.
DESCRIPTION_BUDGET = 10_000

#: names that mean a concept which has another, canonical name
SYNONYMS = {
    "slug": "namespace",
    "path": "namespace",
    "ns": "namespace",
    "namespace_path": "namespace",
    "namespace_id": "namespace",
    "paths": "namespaces",
    "trees": "namespaces",
    "notes": "note",
    "comment": "note",
    "lineage": "include_lineage",
    "page_size": "limit",
    "max_results": "limit",
    "top_k": "limit",
    "k": "limit",
    "skip": "offset",
    "cursor": "offset",
    "start": "since",
    "end": "until",
    "from_time": "since",
    "to_time": "until",
    "after": "since",
    "before": "until",
    "timestamp": "<event>_at",
    "time": "<event>_at",
    "when": "<event>_at",
    "at": "as_of",
    "dry_run": "preview",
}
#: booleans that are switches rather than include_<what>: each means one thing everywhere
SWITCHES = {
    "confirm": "a destructive tool acts only when this is true (otherwise it reports what it would do)",
    "preview": "a tool that acts by default only reports what it would do",
    "supersede": "retire current facts that the new one replaces",
    "top_level_only": "only records without a parent",
}
TIME_NAMES = {"since", "until", "as_of"}


def _types(prop: dict[str, Any]) -> set[str]:
    """The JSON types a property accepts (null included)."""
    if "type" in prop:
        kinds = prop["type"]
        return set(kinds) if isinstance(kinds, list) else {kinds}
    found: set[str] = set()
    for option in prop.get("anyOf", []):
        found |= _types(option)
    if "enum" in prop or "const" in prop:
        found.add("enum")
    return found


def _items_types(prop: dict[str, Any]) -> set[str]:
    options = [prop, *prop.get("anyOf", [])]
    found: set[str] = set()
    for option in options:
        if option.get("type") == "array":
            found |= _types(option.get("items", {}))
    return found


def _minimum(prop: dict[str, Any]) -> Any:
    for option in [prop, *prop.get("anyOf", [])]:
        if "minimum" in option:
            return option["minimum"]
    return None


def _rule_violations(name: str, tool: Any) -> list[str]:
    """Every way one tool's input schema breaks the naming rule."""
    problems: list[str] = []
    properties: dict[str, Any] = tool.input_schema.get("properties", {})
    for arg, prop in properties.items():
        where = f"{name}.{arg}"
        kinds = _types(prop)
        description = prop.get("description", "")
        if arg in SYNONYMS:
            problems.append(f"{where}: use {SYNONYMS[arg]!r}")
        if arg == "namespace" and kinds - {"string"}:
            problems.append(f"{where}: one exact namespace is a string, got {kinds}")
        if arg == "namespaces" and not ({"array", "string"} <= kinds and _items_types(prop) == {"string"}):
            problems.append(f"{where}: trees are a list of paths or a comma string, got {kinds}")
        if (arg == "id" or arg.endswith("_id")) and not (kinds - {"null"} == {"integer"} and _minimum(prop) == 1):
            problems.append(f"{where}: a record id is an integer >= 1")
        if arg.endswith("_ids") and _items_types(prop) != {"integer"}:
            problems.append(f"{where}: a list of ids holds integers")
        if "integer" in kinds and "id" in description.lower().split() and not arg.endswith("id"):
            problems.append(f"{where}: an id argument is named id or <role>_id")
        if arg == "limit" and not (kinds == {"integer"} and _minimum(prop) == 1):
            problems.append(f"{where}: limit is an integer >= 1")
        if arg == "offset" and not (kinds == {"integer"} and _minimum(prop) == 0):
            problems.append(f"{where}: offset is an integer >= 0")
        is_time = arg in TIME_NAMES or arg.endswith("_at")
        if is_time != ("ISO 8601" in description):
            problems.append(f"{where}: times are since/until/as_of/<event>_at and say 'ISO 8601'")
        if is_time and kinds - {"string", "null"}:
            problems.append(f"{where}: a time is ISO 8601 text")
        if kinds - {"null"} == {"boolean"} and not arg.startswith("include_") and arg not in SWITCHES:
            problems.append(f"{where}: a boolean is include_<what> or one of {sorted(SWITCHES)}")
    answers_pages = "next_offset" in (tool.output_schema or {}).get("properties", {})
    if answers_pages and not {"limit", "offset"} <= set(properties):
        problems.append(f"{name}: a paged list takes limit and offset")
    return problems


def _description_chars(value: Any) -> int:
    """Characters of every "description" string anywhere in a JSON schema."""
    if isinstance(value, dict):
        return sum(
            len(item) if key == "description" and isinstance(item, str) else _description_chars(item)
            for key, item in value.items()
        )
    if isinstance(value, list):
        return sum(_description_chars(item) for item in value)
    return 0


async def test_every_tool_names_one_concept_one_way(server: Any) -> None:
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
    assert len(tools) == 51
    problems = [problem for tool in tools for problem in _rule_violations(tool.name, tool)]
    assert problems == []


def test_the_rule_catches_each_kind_of_mistake() -> None:
    """The checker itself must be able to fail: each bad schema below is reported."""

    class Tool:
        def __init__(self, properties: dict[str, Any], output: dict[str, Any] | None = None) -> None:
            self.input_schema = {"properties": properties}
            self.output_schema = output

    text = {"type": "string"}
    bad = {
        "slug": Tool({"slug": text}),
        "notes": Tool({"notes": text}),
        "namespace list": Tool({"namespace": {"anyOf": [{"type": "array", "items": text}, text]}}),
        "namespaces string only": Tool({"namespaces": text}),
        "string id": Tool({"goal_id": text}),
        "unbounded id": Tool({"id": {"type": "integer"}}),
        "time without ISO": Tool({"since": text}),
        "ISO without time name": Tool({"moment": {"type": "string", "description": "ISO 8601 time."}}),
        "loose boolean": Tool({"lineage_too": {"type": "boolean"}}),
        "page without offset": Tool({"limit": {"type": "integer", "minimum": 1}}, {"properties": {"next_offset": {}}}),
    }
    for label, tool in bad.items():
        assert _rule_violations("t", tool), label


async def test_descriptions_and_instructions_fit_the_budget(server: Any) -> None:
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
        instructions = client.instructions or ""
    used = len(instructions) + sum(
        len(tool.description or "") + _description_chars(tool.input_schema) + _description_chars(tool.output_schema)
        for tool in tools
    )
    assert instructions.startswith("Stash is your long-term memory")
    assert used <= DESCRIPTION_BUDGET, f"{used} characters of descriptions and instructions"
    for tool in tools:
        # the cut keeps what a model needs to choose the tool: every tool still says what it does
        assert tool.description and len(tool.description.split()) >= 3, tool.name


async def test_deprecated_names_are_accepted_but_not_advertised(server: Any) -> None:
    async with Client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name, renames in DEPRECATED_ARGUMENTS.items():
            properties = set(tools[name].input_schema["properties"])
            for old, new in renames.items():
                assert new in properties and old not in properties, (name, old)

        made = await ok(client, "create_namespace", {"slug": "/old", "description": "old name"})
        assert made["slug"] == "/old" and made["created"] is True
        both = await fails(client, "create_namespace", {"slug": "/a", "namespace": "/b"})
        assert both["error"] == "invalid_input" and "deprecated" in both["message"]

        goal = await ok(client, "create_goal", {"content": "ship it", "namespace": "/old"})
        done = await ok(client, "complete_goal", {"id": goal["id"], "notes": "shipped"})
        assert "shipped" in str(done)
        preview = await ok(client, "delete_namespace", {"slug": "/old"})
        assert preview["deleted"] is False


async def test_errors_name_the_tool_that_fixes_them(server: Any) -> None:
    async with Client(server) as client:
        missing = await fails(client, "remember", {"content": "x", "namespace": "/nope"})
        assert missing["error"] == "namespace_not_found"
        assert missing["message"] == 'namespace \'/nope\' not found; create it first (create_namespace {"namespace": "/nope"})'
        assert missing["next_step"] == {"tool": "create_namespace", "arguments": {"namespace": "/nope"}}
        assert "stash " not in missing["message"]

        await ok(client, "create_namespace", {"namespace": "/p", "description": "test"})
        hypothesis = await ok(
            client, "create_hypothesis", {"content": "c", "verification_plan": "v", "namespace": "/p"}
        )
        early = await fails(client, "confirm_hypothesis", {"id": hypothesis["id"]})
        assert early["error"] == "invalid_transition"
        assert early["next_step"] == {"tool": "test_hypothesis", "arguments": {"id": hypothesis["id"]}}
        assert "stash " not in early["message"]
        # following the advice works
        await ok(client, early["next_step"]["tool"], early["next_step"]["arguments"])
        await ok(client, "confirm_hypothesis", {"id": hypothesis["id"]})


async def test_every_next_step_has_a_tool_and_a_command(server: Any) -> None:
    from stash_pipeline.errors import NEXT_STEP_ACTIONS
    from stash_serve.cli.base import NEXT_STEP_COMMANDS
    from stash_serve.mcp.next_steps import TOOLS

    assert set(TOOLS) == set(NEXT_STEP_ACTIONS) == set(NEXT_STEP_COMMANDS)
    async with Client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    for action, arguments in NEXT_STEP_ACTIONS.items():
        assert set(arguments) <= set(tools[TOOLS[action]].input_schema["properties"]), action
