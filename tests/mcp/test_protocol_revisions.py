"""Each client gets the revision it asks for, and the server names itself on every path.

A 2026-07-28 client finds Stash through ``server/discover``; an older one through the
``initialize`` handshake. Both must learn the server's name and version (an empty version
leaves hosts unable to tell which Stash answered) and get the same instructions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters
from mcp.client import Client
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION

from stash_pipeline import __version__
from tests.mcp.test_transports import _env, _stash

pytestmark = pytest.mark.anyio


def _spawn(settings: Any, tmp_path: Path) -> StdioServerParameters:
    return StdioServerParameters(command=_stash(), args=["serve", "mcp", "--transport", "stdio"],
                                 env=_env(settings, tmp_path))


async def test_a_current_client_discovers_the_server(settings: Any, tmp_path: Path) -> None:
    async with Client(_spawn(settings, tmp_path)) as client:
        found = client.session.discover_result
        assert found is not None, "the client fell back to the handshake"
        assert LATEST_MODERN_VERSION in found.supported_versions
        assert found.meta["io.modelcontextprotocol/serverInfo"] == {
            "name": "stash", "title": "Stash memory", "version": __version__,
        }
        assert found.instructions and "recall" in found.instructions
        assert found.capabilities.tools is not None
        assert len((await client.list_tools()).tools) > 0


async def test_an_older_client_shakes_hands_and_learns_the_version(settings: Any, tmp_path: Path) -> None:
    async with Client(_spawn(settings, tmp_path), mode="legacy") as client:
        hello = client.session.initialize_result
        assert hello is not None and hello.protocol_version == LATEST_HANDSHAKE_VERSION
        assert (hello.server_info.name, hello.server_info.version) == ("stash", __version__)
        assert hello.instructions and "recall" in hello.instructions
