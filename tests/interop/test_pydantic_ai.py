"""pydantic-ai: ``MCPToolset`` (its FastMCP client) under an ``Agent`` on an OpenAI-compatible model."""

from __future__ import annotations

import pytest
from agent_loop import check_error, check_loop, error_script, loop_script
from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from scripted_model import ScriptedModel

from conftest import Target


def _toolset(target: Target) -> MCPToolset[None]:
    if target.transport == "stdio":
        transport = StdioTransport(target.command, target.args, env=target.env)
    else:
        transport = StreamableHttpTransport(target.url, headers=target.headers)
    # "failed": a tool error goes to the model as the tool's answer (the default, "retry",
    # asks the model to try again with the same text)
    return MCPToolset(Client(transport, timeout=60), tool_error_behavior="failed")


async def _run(target: Target, model: ScriptedModel) -> str:
    async with AsyncOpenAI(base_url=f"{model.root}/v1", api_key="scripted") as client:
        agent = Agent(
            OpenAIChatModel("scripted", provider=OpenAIProvider(openai_client=client)),
            instructions="Use Stash to remember and recall.",
            toolsets=[_toolset(target)],
        )
        result = await agent.run("Remember where staging lives, then tell me.")
    return str(result.output)


@pytest.mark.anyio
async def test_agent_loop(target: Target) -> None:
    with ScriptedModel(loop_script(target.namespace("pydantic-ai"))) as model:
        check_loop(await _run(target, model))


@pytest.mark.anyio
async def test_tool_error_reaches_the_model(target: Target) -> None:
    with ScriptedModel(error_script(target.namespace("pydantic-ai"))) as model:
        check_error(await _run(target, model))
