"""Stash for the framework interop suite: one embedded database, servers per surface.

The suite runs in its own environment (the frameworks pin ``mcp`` 1.x); Stash runs as
the product's ``stash`` command (``STASH_BIN``, default ``.venv/bin/stash`` of this
checkout), as an agent host would start it: spawned over stdio by the framework's own
client, or as a streamable-HTTP server reached with a bearer token.

Every test runs on both transports and on both surfaces: ``default`` (the agent's
everyday tools) and ``all`` (every tool, one flag away).
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STASH = os.environ.get("STASH_BIN") or str(REPO / ".venv" / "bin" / "stash")
SURFACES = ("default", "all")
TRANSPORTS = ("stdio", "http")
_names = itertools.count(1)


@dataclass(frozen=True)
class Target:
    """Where a framework's client finds Stash: a command to spawn, or a URL and a token."""

    transport: str
    surface: str
    env: dict[str, str]
    url: str = ""
    token: str = ""

    @property
    def command(self) -> str:
        return STASH

    @property
    def args(self) -> list[str]:
        return ["serve", "mcp", "--transport", "stdio"]

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def namespace(self, framework: str) -> str:
        """A fresh namespace for one test."""
        return f"/interop/{framework}-{self.transport}-{self.surface}-{next(_names)}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stash(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([STASH, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"stash {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="session")
def database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The settings of one embedded Stash database, migrated; stopped at the end."""
    if not Path(STASH).is_file():
        pytest.fail(f"no stash command at {STASH}: run `make install` first, or set STASH_BIN")
    home = tmp_path_factory.mktemp("stash-home")
    env = {
        "STASH_HOME": str(home),
        "STASH_DB_PORT": str(_free_port()),
        "STASH_ENV_FILE": "/nonexistent/.env",
        "STASH_EMBEDDER": "hash",
        "STASH_VECTOR_DIM": "384",
        "STASH_LOG_LEVEL": "warning",
        "STASH_EMBED_ON_WRITE": "sync",
    }
    _stash(env, "db", "start")
    try:
        served = {**env, "STASH_DATABASE_URL": _stash(env, "db", "url").strip()}
        _stash(served, "migrate")
        yield served
    finally:
        _stash(env, "db", "stop")  # without the URL: with it, `stash db stop` leaves the server be


@pytest.fixture(scope="session")
def http_servers(database: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Target]]:
    """One streamable-HTTP server per surface, and an admin token over ``/``."""
    token = json.loads(_stash(database, "token", "create", "--namespace", "/", "--rights", "admin",
                              "--name", "interop", "--json"))["token"]
    logs = tmp_path_factory.mktemp("http-logs")
    processes, targets = [], {}
    try:
        for surface in SURFACES:
            port, env = _free_port(), {**database, "STASH_TOOLSETS": surface}
            log = (logs / f"{surface}.log").open("w")
            processes.append(subprocess.Popen(
                [STASH, "serve", "mcp", "--transport", "http", "--host", "127.0.0.1", "--port", str(port)],
                env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT,
            ))
            _wait_ready(f"http://127.0.0.1:{port}/readyz", processes[-1], logs / f"{surface}.log")
            targets[surface] = Target("http", surface, env, url=f"http://127.0.0.1:{port}/mcp", token=token)
        yield targets
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"stash serve mcp exited:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"{url} did not answer 200 in 120 s:\n{log.read_text()}")


@pytest.fixture(params=[(t, s) for t in TRANSPORTS for s in SURFACES], ids=lambda p: f"{p[0]}-{p[1]}")
def target(request: pytest.FixtureRequest, database: dict[str, str]) -> Target:
    transport, surface = request.param
    if transport == "http":
        return request.getfixturevalue("http_servers")[surface]
    return Target("stdio", surface, {**database, "STASH_TOOLSETS": surface})


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
