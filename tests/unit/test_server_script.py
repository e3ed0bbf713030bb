"""`make test-server`'s script says clearly why it cannot start a server (no docker, no daemon)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "server.sh"


def _run(bin_dir: Path) -> subprocess.CompletedProcess[str]:
    for tool in ("bash", "env"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    env = {k: v for k, v in os.environ.items() if not k.startswith("STASH_")}
    env["PATH"] = str(bin_dir)
    return subprocess.run([str(SCRIPT)], cwd=REPO, env=env, capture_output=True, text=True, timeout=30)


def test_the_make_target_runs_the_script() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert "test-server" in makefile.split(".PHONY:")[1].splitlines()[0]
    assert "tests/server.sh" in makefile and os.access(SCRIPT, os.X_OK)


def test_without_docker_it_says_so(tmp_path: Path) -> None:
    result = _run(tmp_path)
    assert result.returncode == 2
    assert "error: docker not found" in result.stderr and "STASH_TEST_DATABASE_URL" in result.stderr


def test_without_a_docker_daemon_it_says_so(tmp_path: Path) -> None:
    docker = tmp_path / "docker"
    docker.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    docker.chmod(0o755)
    result = _run(tmp_path)
    assert result.returncode == 2
    assert "error: the docker daemon is not running" in result.stderr
