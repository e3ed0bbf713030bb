"""google-genai: an MCP session passed as a tool, converted and called by the SDK itself."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agent_loop import check_error, check_loop, error_script, loop_script
from google import genai
from google.genai import types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from scripted_model import ScriptedModel

from conftest import Target


@contextlib.asynccontextmanager
async def _session(target: Target) -> AsyncIterator[ClientSession]:
    if target.transport == "stdio":
        streams: Any = stdio_client(StdioServerParameters(command=target.command, args=target.args, env=target.env))
    else:
        streams = streamablehttp_client(target.url, headers=target.headers)
    async with streams as (read, write, *_), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def _run(target: Target, model: ScriptedModel) -> str:
    client = genai.Client(api_key="scripted", http_options=types.HttpOptions(base_url=model.root, api_version="v1beta"))
    async with _session(target) as session:
        response = await client.aio.models.generate_content(
            model="gemini-scripted",
            contents="Remember where staging lives, then tell me.",
            # a dict, not GenerateContentConfig: 3.6.1 deep-copies a config object, and an MCP
            # session (its streams' futures) cannot be copied, whichever server it talks to
            config={"tools": [session]},
        )
    await client.aio.aclose()
    return str(response.text)


@pytest.mark.anyio
async def test_agent_loop(target: Target) -> None:
    with ScriptedModel(loop_script(target.namespace("google-genai"))) as model:
        check_loop(await _run(target, model))
    declarations = {d["name"]: d for d in model.gemini_declarations()}
    # a nullable parameter keeps its description through the converter
    assert declarations["recall"]["parameters"]["properties"]["as_of"].get("description")


@pytest.mark.anyio
async def test_tool_error_reaches_the_model(target: Target) -> None:
    with ScriptedModel(error_script(target.namespace("google-genai"))) as model:
        check_error(await _run(target, model))
