"""An operation is declared once: its MCP tool and its CLI command follow the declaration.

A throwaway operation is declared here and given to both derivations. Adding one field
to its arguments model must show up in the tool's input schema, in the command's help
and options, and reach the library function from both surfaces, with the model's
validation on both. The operation's function needs no store, so no database runs.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Annotated, Any

import click
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.server.mcpserver import MCPServer
from pydantic import AfterValidator, Field

from stash_pipeline.config import Settings
from stash_pipeline.operations.base import UNRESTRICTED, Arguments, CliView, Operation, iso_time
from stash_pipeline.operations.fields import Limit, Namespaces, Offset
from stash_serve.cli import derive as cli_derive
from stash_serve.mcp import derive as mcp_derive
from stash_serve.mcp.calls import ToolCalls

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _operation(with_colour: bool) -> Operation:
    """A list operation; ``with_colour`` adds the one field the test is about."""

    class ListThings(Arguments):
        namespaces: Namespaces = None
        limit: Limit = 100
        offset: Offset = 0

    arguments: type[Arguments] = ListThings
    if with_colour:

        class ListColouredThings(ListThings):
            colour: Annotated[
                str | None, Field(description="Only things of this colour."), AfterValidator(_known_colour)
            ] = None
            seen_at: Annotated[str | None, Field(description="ISO 8601 time seen."), AfterValidator(iso_time)] = None

        arguments = ListColouredThings

    def call(store: Any, args: Any, namespaces: list[str]) -> list[dict[str, Any]]:
        return [{"namespaces": namespaces, **args.model_dump(exclude={"namespaces"})}]

    return Operation(
        name="list_things",
        description="Things, newest first.",
        arguments=arguments,
        call=call,
        right="read",
        reach="trees",
        effect="read",
        paged=True,
        cli=CliView(path=("things",), example="stash things -n /x", columns=("namespaces", "colour")),
    )


def _known_colour(value: str | None) -> str | None:
    if value not in (None, "red", "blue"):
        raise ValueError("red or blue")
    return value


def _server(op: Operation) -> MCPServer:
    store = SimpleNamespace(settings=Settings())  # the operation never touches it
    return MCPServer("test", tools=[mcp_derive.tool(op, ToolCalls(store, auth=False))])  # type: ignore[arg-type]


async def _tool(op: Operation) -> Any:
    async with Client(_server(op)) as client:
        (tool,) = (await client.list_tools()).tools
    return tool


async def test_a_new_field_appears_in_the_tool_schema() -> None:
    before = await _tool(_operation(with_colour=False))
    after = await _tool(_operation(with_colour=True))
    assert "colour" not in before.input_schema["properties"]
    colour = after.input_schema["properties"]["colour"]
    assert colour["description"] == "Only things of this colour."
    assert colour["default"] is None
    assert after.description == "Things, newest first."
    assert after.annotations.read_only_hint is True
    assert "next_offset" in after.output_schema["properties"]
    # the shared fields keep their constraints
    assert after.input_schema["properties"]["limit"]["minimum"] == 1


async def test_the_tool_passes_the_field_and_validates_it() -> None:
    async with Client(_server(_operation(with_colour=True))) as client:
        answer = await client.call_tool("list_things", {"colour": "red", "namespaces": "/a,/b"})
        assert not answer.is_error
        (item,) = answer.structured_content["items"]
        assert item["colour"] == "red" and item["namespaces"] == ["/a", "/b"]
        assert answer.structured_content["next_offset"] is None

        bad = await client.call_tool("list_things", {"colour": "green", "seen_at": "yesterday"})
        assert bad.is_error
        assert bad.structured_content is None  # error results carry the error in _meta and the text
        error = bad.meta["stash/error"]
        assert error["error"] == "invalid_input"
        message = error["message"]
        assert "colour: red or blue" in message and "seen_at: not an ISO 8601 time" in message


def _cli(op: Operation) -> click.Group:
    @click.group()
    def root() -> None:
        """Root."""

    root.add_command(cli_derive.command(op))
    return root


def test_a_new_field_appears_in_the_command_help() -> None:
    runner = CliRunner()
    before = runner.invoke(_cli(_operation(with_colour=False)), ["things", "--help"])
    after = runner.invoke(_cli(_operation(with_colour=True)), ["things", "--help"])
    assert before.exit_code == after.exit_code == 0
    assert "--colour" not in before.output
    assert "--colour TEXT" in after.output and "Only things of this colour." in after.output
    assert "--seen-at TEXT" in after.output
    assert "Things, newest first." in after.output and "stash things -n /x" in after.output
    # and in the reference's options line (docs/cli.md is written from the commands)
    from stash_serve.cli.reference import options_line

    line = options_line(_cli(_operation(with_colour=True)).commands["things"])
    assert line is not None and "`--colour`" in line and "`--seen-at`" in line


def test_the_command_passes_the_field_and_validates_it_before_the_store() -> None:
    runner = CliRunner()
    group = _cli(_operation(with_colour=True))
    bad = runner.invoke(group, ["things", "--colour", "green", "--seen-at", "yesterday"])
    assert isinstance(bad.exception, Exception) and not isinstance(bad.exception, SystemExit)
    message = str(getattr(bad.exception, "message", bad.exception))
    # at a shell the argument is named as it is typed there
    assert "--colour: red or blue" in message and "--seen-at: not an ISO 8601 time" in message


def test_every_declared_operation_is_a_tool_of_the_server_and_a_command() -> None:
    """The converted subjects' tools and commands come from their declarations."""
    from stash_pipeline.operations import SUBJECTS
    from stash_serve.cli import cli

    for module in SUBJECTS:
        for op in module.OPERATIONS:
            if op.cli is None:  # an operation with no command (remember_batch: `stash import` at a shell)
                continue
            command: Any = cli
            for word in op.cli.path:
                command = command.commands[word] if isinstance(command, click.Group) else None
            assert command is not None, op.cli.path
            options = {o for p in command.params for o in getattr(p, "opts", [])}
            for name in op.arguments.model_fields:
                if name in op.cli.arguments or name in op.cli.hidden:
                    continue
                flag = "--namespace" if name == "namespaces" else "--" + name.replace("_", "-")
                assert flag in options, (op.name, name)


def _who_asks() -> Operation:
    """An operation of reach ``scope``: its answer says what the caller's scope carried."""

    class WhoAsks(Arguments):
        pass

    def call(store: Any, args: Any, scope: Any) -> dict[str, Any]:
        return {
            "token": scope.token,
            "allowance": None if scope.namespaces_created is None else scope.namespaces_created.limit,
            "runs": scope.runs is not None,
        }

    return Operation(
        name="who_asks", description="Who is asking, as the call sees it.", arguments=WhoAsks, call=call,
        right="read", reach="scope", effect="read",
    )


async def test_reach_scope_hands_the_call_the_whole_scope() -> None:
    """The tool's call gets the server's per-token allowance and run board; a shell's, neither."""
    async with Client(_server(_who_asks())) as client:
        answer = await client.call_tool("who_asks", {})
    assert answer.structured_content == {"token": None, "allowance": Settings().namespaces_per_token_per_hour,
                                         "runs": True}
    # what a command calls (it opens a store first; this operation ignores it)
    op = _who_asks()
    assert op.invoke(None, UNRESTRICTED, op.parse({})) == {"token": None, "allowance": None, "runs": False}


# --- the same for recall, the operation with the richest answer ------------------------------


def _recall(with_floor: bool) -> tuple[Operation, list[Any]]:
    """``recall`` as declared, its call recording the arguments it gets; ``with_floor`` adds
    one field to its arguments model, the one edit a new parameter takes."""
    import dataclasses

    from stash_pipeline.operations.recall import RECALL, Recall

    arguments: type[Arguments] = Recall
    if with_floor:

        class RecallWithFloor(Recall):
            min_relevance: Annotated[
                float | None, Field(description="Leave out results below this relevance.", ge=0, le=1)
            ] = None

        arguments = RecallWithFloor
    seen: list[Any] = []

    def call(store: Any, args: Any, namespaces: list[str]) -> dict[str, Any]:
        seen.append((args, namespaces))
        return {"results": []}

    return dataclasses.replace(RECALL, arguments=arguments, call=call), seen


async def test_a_new_recall_field_appears_in_the_tool_and_reaches_the_call() -> None:
    before = await _tool(_recall(with_floor=False)[0])
    op, seen = _recall(with_floor=True)
    after = await _tool(op)
    added = after.input_schema["properties"].pop("min_relevance")
    assert added["description"] == "Leave out results below this relevance." and added["default"] is None
    # nothing else moved: the rest of the schema, the description, the published answer shape
    assert after.input_schema == before.input_schema and after.description == before.description
    assert after.output_schema == before.output_schema and "RecallItem" in after.output_schema["$defs"]
    async with Client(_server(op)) as client:
        answer = await client.call_tool("recall", {"query": "deploys", "namespaces": "/a", "min_relevance": 0.3})
        assert not answer.is_error and answer.structured_content == {"results": []}
        ((args, namespaces),) = seen
        assert (args.min_relevance, args.query, namespaces) == (0.3, "deploys", ["/a"])
        assert (await client.call_tool("recall", {"query": "deploys", "min_relevance": 2})).is_error
        # the declared validators still run (the schema's constraints are checked by the SDK first)
        bad = await client.call_tool("recall", {"query": "deploys", "min_relevance": 0.3, "as_of": "yesterday"})
        assert bad.is_error and "as_of: not an ISO 8601 time" in bad.meta["stash/error"]["message"]
        assert len(seen) == 1


def test_a_new_recall_field_appears_in_the_command_and_the_reference() -> None:
    from stash_serve.cli.reference import options_line

    runner = CliRunner()
    before = runner.invoke(_cli(_recall(with_floor=False)[0]), ["recall", "--help"])
    group = _cli(_recall(with_floor=True)[0])
    after = runner.invoke(group, ["recall", "--help"])
    assert "--min-relevance" not in before.output
    assert "--min-relevance FLOAT" in after.output and "Leave out results below this relevance." in after.output
    line = options_line(group.commands["recall"])
    assert line is not None and "`--min-relevance`" in line and line.startswith("Arguments and options: `QUERY`")
    bad = runner.invoke(group, ["recall", "deploys", "--min-relevance", "2"])
    message = str(getattr(bad.exception, "message", bad.exception))
    assert "--min-relevance: Input should be less than or equal to 1" in message


async def test_consolidate_names_the_stage_table_when_its_schema_is_built() -> None:
    """The declaration loads without the stage table (``stash --help`` stays offline); the
    tool's ``stage`` description lists the table's names, and the model checks them."""
    from stash_pipeline.operations.consolidation import CONSOLIDATE
    from stash_pipeline.stages import STAGE_NAMES

    tool = await _tool(CONSOLIDATE)
    described = tool.input_schema["properties"]["stage"]["description"]
    assert described == f"Only this stage (default: all): {', '.join(STAGE_NAMES)}."
    assert CONSOLIDATE.parse({"stage": STAGE_NAMES[-1]}).stage == STAGE_NAMES[-1]
    with pytest.raises(Exception, match="stage: unknown stage 'nope'; use one of facts"):
        CONSOLIDATE.parse({"stage": "nope"})
