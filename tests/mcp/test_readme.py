"""The README's claims about the MCP surface stay true: the tool count is the server's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from stash_serve.mcp.toolsets import DEFAULT_TOOLS

pytestmark = pytest.mark.anyio

README = Path(__file__).resolve().parents[2] / "README.md"


async def test_the_readme_states_the_number_of_tools(server: Any) -> None:
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
    text = README.read_text(encoding="utf-8")
    claims = re.findall(r"\b(\d+) tools\b", text)
    assert claims, "the README states how many tools there are"
    assert {int(n) for n in claims} == {len(tools), len(DEFAULT_TOOLS)}, f"README says {claims}"
    assert f"the {len(DEFAULT_TOOLS)} tools" in text and f"all {len(tools)} tools" in text


def test_the_readme_offers_the_default_toolset_s_tools_as_such() -> None:
    """The tools it names as the default toolset's are in it; the others come with all."""
    text = " ".join(README.read_text(encoding="utf-8").split())
    default_part, _, all_part = text.partition("the default toolset, the ")[2].partition("With `STASH_TOOLSETS=all`")
    everyday = set(re.findall(r"`([a-z_]+)`", default_part))
    more = set(re.findall(r"`([a-z_]+)`", all_part.split(";")[0]))
    assert everyday and everyday <= set(DEFAULT_TOOLS), everyday - set(DEFAULT_TOOLS)
    assert "stats" in more and not more & set(DEFAULT_TOOLS), more & set(DEFAULT_TOOLS)


def test_the_readme_says_how_to_change_ports() -> None:
    text = README.read_text(encoding="utf-8")
    assert "--mcp-port" in text and "--dagster-port" in text
