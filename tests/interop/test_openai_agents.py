"""openai-agents: its MCP server classes, strict schema conversion and Runner loop."""

from __future__ import annotations

from typing import Any

import pytest
from agent_loop import LOOSE_TOOLS, check_error, check_loop, error_script, loop_script
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.mcp import MCPServerStdio, MCPServerStreamableHttp
from openai import AsyncOpenAI
from scripted_model import ScriptedModel

from conftest import Target

set_tracing_disabled(True)  # the SDK's traces go to api.openai.com unless told


def _server(target: Target) -> Any:
    if target.transport == "stdio":
        params = {"command": target.command, "args": target.args, "env": target.env}
        return MCPServerStdio(params, client_session_timeout_seconds=60, name="stash")
    return MCPServerStreamableHttp(
        {"url": target.url, "headers": target.headers}, client_session_timeout_seconds=60, name="stash"
    )


async def _run(target: Target, model: ScriptedModel) -> str:
    async with AsyncOpenAI(base_url=f"{model.root}/v1", api_key="scripted") as client, _server(target) as stash:
        agent = Agent(
            name="assistant",
            instructions="Use Stash to remember and recall.",
            model=OpenAIChatCompletionsModel(model="scripted", openai_client=client),
            mcp_servers=[stash],
            mcp_config={"convert_schemas_to_strict": True},
        )
        result = await Runner.run(agent, "Remember where staging lives, then tell me.")
    return str(result.final_output)


@pytest.mark.anyio
async def test_agent_loop_with_strict_schemas(target: Target) -> None:
    with ScriptedModel(loop_script(target.namespace("openai-agents"))) as model:
        check_loop(await _run(target, model))
    tools = model.openai_tools()
    loose = {t["name"] for t in tools if not t.get("strict")}
    assert loose == LOOSE_TOOLS & {t["name"] for t in tools}, "strict conversion fell back elsewhere"


@pytest.mark.anyio
async def test_tool_error_reaches_the_model(target: Target) -> None:
    with ScriptedModel(error_script(target.namespace("openai-agents"))) as model:
        check_error(await _run(target, model))
