"""Driving a `stash up` subprocess in end-to-end tests: wait for its ports, stop its whole tree."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import psutil
import pytest

from stash_serve.up import wait_for_port, wait_for_ready


def _waited(found: bool, what: str, timeout: float, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Fail with the log's tail unless ``found``: `stash up` died first, or ``what`` timed out."""
    if found:
        return
    if proc.poll() is not None:
        pytest.fail(f"stash up exited early ({proc.returncode}):\n{log.read_text()[-3000:]}")
    pytest.fail(f"{what} after {timeout}s:\n{log.read_text()[-3000:]}")


def wait_port(port: int, timeout: float, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Wait until 127.0.0.1:port accepts connections (``stash up``'s own wait)."""
    found = wait_for_port("127.0.0.1", port, timeout, lambda: proc.poll() is None)
    _waited(found, f"port {port} not open", timeout, proc, log)


def wait_ready(port: int, timeout: float, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Wait until the MCP server on 127.0.0.1:port answers /readyz 200 (it can serve a recall)."""
    found = wait_for_ready(f"http://127.0.0.1:{port}/readyz", timeout, lambda: proc.poll() is None)
    _waited(found, f"/readyz on port {port} not ready", timeout, proc, log)


def process_tree(proc: subprocess.Popen[bytes]) -> list[psutil.Process]:
    root = psutil.Process(proc.pid)
    return [root, *root.children(recursive=True)]


def stop_and_check_tree_gone(proc: subprocess.Popen[bytes], tree: list[psutil.Process]) -> None:
    """SIGTERM `stash up`; fail unless it exits within 30 s and every process of its tree is gone within 5 s more."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("stash up did not exit within 30 s of SIGTERM")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(p) for p in tree):
        time.sleep(0.2)
    alive = [p for p in tree if _alive(p)]
    assert not alive, f"still running after SIGTERM: {[p.cmdline() for p in alive]}"


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
