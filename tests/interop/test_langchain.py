"""langchain-mcp-adapters: its client's tools bound to ``ChatOpenAI``, in a tool-calling loop."""

from __future__ import annotations

from typing import Any

import pytest
from agent_loop import LOOSE_TOOLS, check_error, check_loop, error_script, loop_script
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from langchain_openai import ChatOpenAI
from scripted_model import ScriptedModel

from conftest import Target


def _client(target: Target) -> MultiServerMCPClient:
    connection: dict[str, Any]
    if target.transport == "stdio":
        connection = {"transport": "stdio", "command": target.command, "args": target.args, "env": target.env}
    else:
        connection = {"transport": "streamable_http", "url": target.url, "headers": target.headers}
    return MultiServerMCPClient({"stash": connection})


async def _run(target: Target, model: ScriptedModel) -> tuple[str, list[Any]]:
    """The loop a LangChain agent runs: ask the model, run the tools it calls, until it answers."""
    async with _client(target).session("stash") as session:
        tools = await load_mcp_tools(session)
        by_name = {tool.name: tool for tool in tools}
        llm = ChatOpenAI(model="scripted", base_url=f"{model.root}/v1", api_key="scripted").bind_tools(tools)
        messages: list[Any] = [HumanMessage("Remember where staging lives, then tell me.")]
        for _ in range(10):
            reply = await llm.ainvoke(messages)
            messages.append(reply)
            if not reply.tool_calls:
                return str(reply.content), tools
            for call in reply.tool_calls:
                output = await by_name[call["name"]].ainvoke(call)  # a ToolMessage, errors included
                assert isinstance(output, ToolMessage)
                messages.append(output)
    raise AssertionError("the loop did not end")


@pytest.mark.anyio
async def test_agent_loop(target: Target) -> None:
    with ScriptedModel(loop_script(target.namespace("langchain"))) as model:
        answer, tools = await _run(target, model)
    check_loop(answer)
    # strict conversion takes every tool; it closes the open objects (metadata) to no keys
    for tool in tools:
        function = convert_to_openai_tool(tool, strict=True)["function"]
        assert function["strict"] is True
        metadata = function["parameters"]["properties"].get("metadata")
        if metadata is not None:
            assert tool.name in LOOSE_TOOLS, tool.name


@pytest.mark.anyio
async def test_tool_error_reaches_the_model(target: Target) -> None:
    with ScriptedModel(error_script(target.namespace("langchain"))) as model:
        answer, _ = await _run(target, model)
    check_error(answer)
