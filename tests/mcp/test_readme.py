"""The README's claims about the MCP surface stay true: the tool count is the server's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

pytestmark = pytest.mark.anyio

README = Path(__file__).resolve().parents[2] / "README.md"


async def test_the_readme_states_the_number_of_tools(server: Any) -> None:
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
    claims = re.findall(r"\b(\d+) tools\b", README.read_text(encoding="utf-8"))
    assert claims, "the README states how many tools there are"
    assert {int(n) for n in claims} == {len(tools)}, f"README says {claims}, the server lists {len(tools)}"


def test_the_readme_says_how_to_change_ports() -> None:
    text = README.read_text(encoding="utf-8")
    assert "--mcp-port" in text and "--dagster-port" in text
