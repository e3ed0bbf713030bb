"""Driving a `stash up` subprocess in end-to-end tests: wait for its ports, stop its whole tree."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import psutil
import pytest


def wait_port(port: int, timeout: float, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Wait until 127.0.0.1:port accepts connections; fail with the log's tail if `stash up` dies first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"stash up exited early ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"port {port} not open after {timeout}s:\n{log.read_text()[-3000:]}")


def wait_ready(port: int, timeout: float, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Wait until the MCP server on 127.0.0.1:port answers /readyz 200 (it can serve a recall)."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"stash up exited early ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
                if response.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.5)
    pytest.fail(f"/readyz on port {port} not ready after {timeout}s:\n{log.read_text()[-3000:]}")


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
