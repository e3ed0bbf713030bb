"""`stash dagster`: Dagster's own CLI on Stash's instance, with the environment `stash up` gives Dagster.

A STASH_HOME whose embedded database runs, and nothing else: no DAGSTER_HOME, no
STASH_DAGSTER_PG_* in the caller's environment. The command must find the instance in
Postgres (the `dagster` database next to `stash`), load the code location, pass dagster's
exit code on, and print the same variables `stash up`'s Dagster processes get.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import free_port

STASH = shutil.which("stash", path=str(Path(sys.executable).parent)) or "stash"
DEFS = "stash_pipeline.defs.definitions"


@pytest.fixture(scope="module")
def stash_env() -> Iterator[dict[str, str]]:
    # not under tmp_path: pytest makes its root 0700, which the root-run database user can't traverse
    base = Path(tempfile.mkdtemp(prefix="stash-dagster-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STASH_", "DAGSTER_"))}
    env.update(STASH_HOME=str(base / "home"), STASH_DB_PORT=str(free_port()), STASH_EMBEDDER="hash")
    started = subprocess.run([STASH, "db", "start"], env=env, capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr
    try:
        yield env
    finally:
        subprocess.run([STASH, "db", "stop"], env=env, capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


def _stash(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    # from a directory without dagster.yaml or workspace.yaml: nothing but the command supplies them
    return subprocess.run([STASH, *args], env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True,
                          timeout=180)


def test_dagster_commands_reach_the_instance_in_postgres(stash_env: dict[str, str]) -> None:
    home = Path(stash_env["STASH_HOME"])
    listed = _stash(stash_env, "dagster", "asset", "list", "-m", DEFS)
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert {"facts", "profiles", "decay"} <= set(listed.stdout.split())

    # after `--` every word is dagster's, an option first included
    info = _stash(stash_env, "dagster", "--", "instance", "info")
    assert info.returncode == 0, info.stderr[-2000:]
    assert f"$DAGSTER_HOME: {home / 'dagster'}" in info.stdout
    assert "run_storage: PostgresRunStorage" in info.stdout
    assert (home / "dagster" / "dagster.yaml").is_file()


def test_dagster_s_exit_code_is_the_command_s(stash_env: dict[str, str]) -> None:
    refused = _stash(stash_env, "dagster", "asset", "materialize", "-m", DEFS, "--select", "no_such_asset")
    assert refused.returncode != 0
    assert "no_such_asset" in refused.stdout + refused.stderr


def test_env_prints_what_stash_up_gives_its_dagster_processes(stash_env: dict[str, str]) -> None:
    from stash_pipeline.config import load_settings
    from stash_pipeline.db.dsn import database_dsn
    from stash_serve.up import dagster_process_env

    printed = _stash(stash_env, "dagster", "--env")
    assert printed.returncode == 0, printed.stderr
    exported = {}
    for line in printed.stdout.splitlines():
        word = shlex.split(line)
        assert word[0] == "export", line
        key, value = word[1].split("=", 1)
        exported[key] = value
    settings = load_settings(home=Path(stash_env["STASH_HOME"]), db_port=int(stash_env["STASH_DB_PORT"]))
    expected = dagster_process_env(settings, database_dsn(settings))  # what run_up passes its Dagster children
    names = ["DAGSTER_HOME", "STASH_DAGSTER_PG_HOST", "STASH_DAGSTER_PG_PORT", "STASH_DAGSTER_PG_USER",
             "STASH_DAGSTER_PG_PASSWORD", "STASH_DAGSTER_PG_DB"]
    assert {k: exported.get(k) for k in names} == {k: expected[k] for k in names}
    assert exported["STASH_DAGSTER_PG_PORT"] == stash_env["STASH_DB_PORT"]
    # the shell's own `stash db` commands keep managing the embedded server
    assert "STASH_DATABASE_URL" not in exported

    # a shell that evaluates them runs the bare dagster CLI on the same instance
    script = f'eval "$({shlex.quote(STASH)} dagster --env)" && dagster instance info'
    shell = subprocess.run(["bash", "-c", script], env={**stash_env, "PATH": f"{Path(STASH).parent}:{stash_env['PATH']}"},
                           cwd=tempfile.gettempdir(), capture_output=True, text=True, timeout=180)
    assert shell.returncode == 0, shell.stderr[-2000:]
    assert "run_storage: PostgresRunStorage" in shell.stdout
