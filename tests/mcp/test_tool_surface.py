"""The tool surface an agent sees: one name per concept across every tool, schemas every
framework's converter takes, the toolsets, and the size of what tools/list and initialize send.

The naming rule (also in ``stash_serve.mcp.params``):
  namespace        one exact namespace path (a string)
  namespaces       the trees a read covers (a list or a comma string)
  id               the record the tool acts on; ``<role>_id`` another record; ``<kind>_ids`` a list
  limit, offset    paging (both, on every tool whose answer has next_offset)
  since, until, as_of, ``<event>_at``, valid_from, valid_until   times, ISO 8601 text
  include_<what>   a boolean that adds records or fields to a read
  note             free text appended to a record
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from mcp import Client

from stash_pipeline import errors
from stash_pipeline.operations.base import Operation
from stash_serve.mcp import derive, toolsets
from stash_serve.mcp.calls import ToolCalls
from stash_serve.mcp.schemas import portable
from stash_serve.mcp.server import build_server
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
TIME_NAMES = {"since", "until", "as_of", "valid_from", "valid_until"}


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
        if "array" in _types({"type": option.get("type", [])}):
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
    assert len(tools) == 52
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


# --- the default surface and the toolsets -------------------------------------------------

#: characters of the default surface's tools/list result, as compact JSON (what the server
#: writes on the wire); every agent sends it with every model request
DEFAULT_LIST_BUDGET = 15_000


def _listing_chars(result: Any) -> int:
    return len(result.model_dump_json(by_alias=True, exclude_none=True))


async def test_the_default_surface_fits_its_budget(store: Any) -> None:
    async with Client(build_server(store, auth=False, toolsets="default")) as client:
        listed = await client.list_tools()
        instructions = client.instructions or ""
    assert [t.name for t in listed.tools] == [op.name for op in toolsets.toolsets()["default"]]
    assert set(toolsets.DEFAULT_TOOLS) == {t.name for t in listed.tools}
    used = _listing_chars(listed)
    assert used <= DEFAULT_LIST_BUDGET, f"the default tools/list is {used} characters"
    # the instructions name only tools this server offers
    every = {op.name for op in toolsets.every_operation()}
    named = set(re.findall(r"`([a-z_]+)`", instructions)) & every
    assert named and named <= {t.name for t in listed.tools}, named - {t.name for t in listed.tools}
    assert "Hypotheses" not in instructions and "`recall`" in instructions


async def test_the_full_surface_is_one_spec_away(store: Any) -> None:
    async with Client(build_server(store, auth=False, toolsets="all")) as every:
        full = await every.list_tools()
    async with Client(build_server(store, auth=False, toolsets="default,graph")) as some:
        names = [t.name for t in (await some.list_tools()).tools]
        # a tool outside the chosen sets is unknown to this server, which says how to add it
        missing = await fails(some, "create_hypothesis", {"content": "c", "verification_plan": "v"})
        typo = await fails(some, "recal", {"query": "q"})
        nothing = await fails(some, "no_such_tool_at_all", {})
    assert len(full.tools) == 52
    graph = [op.name for op in toolsets.toolsets()["graph"]]
    assert names == [t.name for t in full.tools if t.name in set(graph) | set(toolsets.DEFAULT_TOOLS)]
    assert missing["error"] == "unknown_tool"
    assert missing["message"] == (
        "create_hypothesis is not offered by this server (toolsets: default,graph); it is in the 'hypotheses' "
        "toolset: start the server with --toolsets default,graph,hypotheses (or STASH_TOOLSETS=default,graph,hypotheses)"
    )
    assert typo["error"] == "unknown_tool"
    assert typo["message"].startswith("unknown tool 'recal': no Stash tool has this name; did you mean recall?")
    assert "This server's toolsets: default,graph" in typo["message"]
    assert nothing["message"] == (
        "unknown tool 'no_such_tool_at_all': no Stash tool has this name. "
        "This server's toolsets: default,graph (tools/list shows its tools)."
    )


def test_an_unknown_tool_s_closest_names_say_where_they_are() -> None:
    message = toolsets.unknown_tool_message("consolidation_statu", " default ")
    assert "did you mean consolidation_status (in the 'consolidation' toolset) or consolidate?" in message
    assert "This server's toolsets: default " in message
    assert toolsets.unknown_tool_message("x" * 500, "all").startswith(f"unknown tool {'x' * 100!r}:")


def _descriptions(value: Any) -> list[str]:
    """Every "description" string anywhere in a JSON schema."""
    if isinstance(value, dict):
        return [text for key, item in value.items()
                for text in ([item] if key == "description" and isinstance(item, str) else _descriptions(item))]
    if isinstance(value, list):
        return [text for item in value for text in _descriptions(item)]
    return []


def _tools_named(text: str, names: set[str]) -> set[str]:
    """The tool names ``text`` mentions as words (``recall``, not ``recall_config`` or ``/recall``)."""
    return {name for name in names if re.search(rf"(?<![\w/-]){re.escape(name)}(?![\w-])", text)}


async def test_no_tool_points_at_a_tool_its_toolset_lacks(store: Any) -> None:
    """An agent follows a description's pointer ("then consolidation_status"): every tool a
    description names, the tool's own or any of its parameters' and answers', is offered
    by a server of that toolset. A server of several toolsets offers their union, so each
    toolset on its own is what must hold."""
    every = {op.name for op in toolsets.every_operation()}
    pointing = []
    for spec in toolsets.names():
        async with Client(build_server(store, auth=False, toolsets=spec)) as client:
            tools = (await client.list_tools()).tools
        offered = {t.name for t in tools}
        for tool in tools:
            texts = [tool.description or "", *_descriptions(tool.input_schema), *_descriptions(tool.output_schema)]
            missing = set().union(*(_tools_named(text, every) for text in texts)) - offered
            pointing += [f"{spec}: {tool.name} names {name}" for name in sorted(missing)]
    assert not pointing, pointing


def test_the_pointer_rule_catches_a_tool_name_in_prose() -> None:
    every = {op.name for op in toolsets.every_operation()}
    assert _tools_named("Returns at once: a job handle; then consolidation_status.", every) == {"consolidation_status"}
    assert _tools_named("recall it first", every) == {"recall"}
    assert _tools_named("see recall_config or /recall", every) == set()


def test_a_toolset_spec_is_checked_once_at_start() -> None:
    sets = toolsets.toolsets()
    assert [op.name for op in toolsets.select("all")] == [op.name for op in toolsets.every_operation()]
    assert toolsets.select(" goals , default ") == toolsets.select("default,goals")
    # every tool is in the set of its subject: no tool is out of reach
    assert {op.name for name, ops in sets.items() if name != "default" for op in ops} == {
        op.name for op in toolsets.every_operation()
    }
    for bad in ("defualt", "default,nope", "", " , "):
        with pytest.raises(errors.ConfigurationError) as raised:
            toolsets.select(bad)
        assert "default, namespaces" in str(raised.value) and "all" in str(raised.value), bad


# --- schemas every converter takes ----------------------------------------------------------


def _walk(schema: Any, where: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every (path, sub-schema) of a JSON schema, the root first."""
    if not isinstance(schema, dict):
        return []
    found = [(where, schema)]
    for key, value in schema.items():
        if key in ("properties", "$defs") and isinstance(value, dict):
            for name, item in value.items():
                found += _walk(item, f"{where}.{name}")
        elif key in ("items", "additionalProperties"):
            found += _walk(value, f"{where}.{key}")
        elif key in ("anyOf", "oneOf", "allOf") and isinstance(value, list):
            for i, item in enumerate(value):
                found += _walk(item, f"{where}.{key}[{i}]")
    return found


def _portability_problems(name: str, schema: dict[str, Any]) -> list[str]:
    problems = []
    for where, node in _walk(schema, name):
        if isinstance(node.get("additionalProperties"), bool):
            problems.append(f"{where}: boolean additionalProperties")
        if {"type": "null"} in node.get("anyOf", []):
            problems.append(f"{where}: a nullable anyOf (write type: [T, 'null'])")
        if isinstance(node.get("title"), str):
            problems.append(f"{where}: a generated title")
    return problems


async def test_every_input_schema_is_portable(server: Any) -> None:
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
    problems = [p for tool in tools for p in _portability_problems(tool.name, tool.input_schema)]
    assert problems == []
    remember = {t.name: t for t in tools}["remember"].input_schema["properties"]
    assert remember["metadata"]["type"] == ["object", "null"] and remember["metadata"]["additionalProperties"] == {}
    assert remember["occurred_at"]["description"].startswith("ISO 8601")


def test_portable_rewrites_what_converters_refuse() -> None:
    text = {"type": "string"}
    before = {
        "title": "toolArguments",
        "type": "object",
        "properties": {
            "title": {"title": "Title", "type": "string"},  # a parameter named title stays
            "when": {"anyOf": [text, {"type": "null"}], "default": None, "description": "ISO 8601 time."},
            "meta": {"anyOf": [{"type": "object", "additionalProperties": True}, {"type": "null"}]},
            "mode": {"anyOf": [{"enum": ["a", "b"], "type": "string"}, {"type": "null"}]},
            "trees": {"anyOf": [{"type": "array", "items": text}, text, {"type": "null"}]},
            "item": {"anyOf": [{"$ref": "#/$defs/Item"}, {"type": "null"}]},
        },
        "$defs": {"Item": {"type": "object", "additionalProperties": False, "properties": {"x": text}}},
    }
    after = portable(before)
    props = after["properties"]
    assert "title" not in after and props["title"] == {"type": "string"}
    assert props["when"] == {"type": ["string", "null"], "default": None, "description": "ISO 8601 time."}
    assert props["meta"] == {"type": ["object", "null"], "additionalProperties": {}}
    assert props["mode"] == {"type": ["string", "null"], "enum": ["a", "b", None]}
    assert props["trees"] == {"type": ["array", "string", "null"], "items": text}
    assert props["item"] == before["properties"]["item"]  # a $ref arm cannot merge
    assert after["$defs"]["Item"] == {"type": "object", "properties": {"x": text}}
    assert before["properties"]["meta"]["anyOf"][0]["additionalProperties"] is True  # the input is kept


def test_the_sdk_builds_each_tool_from_its_signature(store: Any) -> None:
    """``derive.tool`` gives the SDK a function whose ``__signature__`` lists the arguments;
    an SDK that stopped reading it would see ``ctx`` and ``**values`` only, and fail here."""
    calls = ToolCalls(store, False)
    for op in toolsets.every_operation():
        tool = derive.tool(op, calls)
        assert isinstance(op, Operation)
        assert list(tool.parameters.get("properties", {})) == list(op.arguments.model_fields), op.name
        assert list(tool.fn_metadata.arg_model.model_fields) == list(op.arguments.model_fields), op.name
        assert tool.context_kwarg == "ctx" and tool.name == op.name
