"""Examples in README.md and docs/*.md that a newcomer copies as they are.

* A model server's example address is not a port `stash up` takes by default (a model on
  8080 would collide with Stash's own MCP server).
* An ``npx`` command names the package's version: an unpinned one runs whatever version
  npm has cached, which may be one the page was never checked with.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from stash_serve.up import run_up

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _stash_up_ports() -> set[int]:
    defaults = inspect.signature(run_up).parameters
    return {defaults["mcp_port"].default, defaults["dagster_port"].default}


def _model_addresses() -> list[tuple[str, str]]:
    """(page, address) of every model endpoint an example configures."""
    found = []
    for page in PAGES:
        for match in re.finditer(r"(?:STASH_OPENAI_BASE_URL=|--base-url )(\S+)", page.read_text(encoding="utf-8")):
            found.append((page.name, match[1]))
    return found


def test_model_servers_in_the_examples_leave_stash_up_its_ports() -> None:
    addresses = _model_addresses()
    assert len(addresses) >= 4
    ports = _stash_up_ports()
    clashes = [(page, url) for page, url in addresses
               if (port := re.search(r":(\d+)(?:/|$)", url)) and int(port[1]) in ports]
    assert not clashes, f"a model server on a port `stash up` takes: {clashes}"


def test_npx_commands_pin_their_version() -> None:
    unpinned = []
    for page in PAGES:
        for match in re.finditer(r"\bnpx\s+(?:-y\s+)?(@?[\w.-]+(?:/[\w.-]+)?(?:@[\w.-]+)?)", page.read_text(encoding="utf-8")):
            package = match[1]
            if not re.search(r".@\d+\.\d+\.\d+$", package):
                unpinned.append((page.name, package))
    assert not unpinned, f"npx commands without a pinned version: {unpinned}"
