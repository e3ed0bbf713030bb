"""``stash up``: the one command that runs Stash locally.

It starts (or reuses) the embedded PostgreSQL, migrates, creates a local admin token the
first time, then supervises three children — the MCP HTTP server, the Dagster UI and the
Dagster daemon — each in its own process group. One Ctrl-C or SIGTERM stops
them all (process groups are signalled, so Dagster's run workers go too), then the
embedded database if this command started it.

Why not ``dagster dev``: started from a script it inherits an ignored SIGINT and then
ignores SIGTERM too (seen with Dagster 1.13; docs/dagster.md shows the workaround);
running webserver and daemon directly gives the same UI with signals we control, and is
how Dagster is deployed as a service. The UI is ``stash serve dagster-ui``
(``stash_serve.dagster_ui``): Dagster's webserver app behind Stash's token check, which
wants the admin token and a Host and Origin of its own; the bare ``dagster-webserver``
answers anyone who reaches its port, any local user or a page reached by DNS rebinding.

The Dagster files (``dagster.yaml``, ``workspace.yaml``) are package data of
``stash_serve`` so that an installed wheel, not only a source checkout, runs. ``stash
dagster`` runs Dagster's own CLI with the environment given here to the Dagster children
(``dagster_process_env``), so a command typed by hand reaches the same instance.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from stash_pipeline import errors
from stash_pipeline.config import Settings

#: dagster.yaml (the instance) and workspace.yaml (the code location), shipped in the wheel.
DAGSTER_CONFIG = Path(__file__).resolve().parent / "dagster_config"


@dataclass
class Child:
    name: str
    args: list[str]
    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as handle:  # the child keeps its own copy of the descriptor
            self.process = subprocess.Popen(
                self.args,
                env=self.env,
                stdout=handle,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # own process group: we signal the whole tree
                preexec_fn=_default_signals,
            )

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal_group(self, sig: int) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)


def _default_signals() -> None:
    # A parent started from a non-interactive shell may ignore SIGINT; children would
    # inherit that and never stop. Reset both to their defaults.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def wait_for_port(host: str, port: int, timeout: float, keep_waiting: Callable[[], bool] = lambda: True) -> bool:
    """True once host:port accepts connections; False after timeout or as soon as keep_waiting() is false."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and keep_waiting():
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.2)
    return False


def _url_host(host: str) -> str:
    """How this process reaches a server bound to ``host`` (a wildcard: over loopback)."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def wait_for_ready(url: str, timeout: float, keep_waiting: Callable[[], bool] = lambda: True) -> bool:
    """True once ``url`` (a /readyz) answers 200; False after timeout or as soon as keep_waiting() is false."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and keep_waiting():
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return True
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.2)
    return False


def dagster_home(settings: Settings) -> Path:
    """DAGSTER_HOME under STASH_HOME, holding the packaged dagster.yaml (refreshed on change)."""
    home = settings.home / "dagster"
    home.mkdir(parents=True, exist_ok=True)
    text = (DAGSTER_CONFIG / "dagster.yaml").read_text()
    target = home / "dagster.yaml"
    if not target.exists() or target.read_text() != text:
        target.write_text(text)
    return home


def dagster_env(settings: Settings, dsn_parts: dict[str, str]) -> dict[str, str]:
    """Environment for Dagster processes: storage in the `dagster` database of the same server."""
    env = dict(os.environ)
    env["DAGSTER_HOME"] = str(dagster_home(settings))
    env["STASH_DAGSTER_PG_HOST"] = dsn_parts.get("host", "127.0.0.1")
    env["STASH_DAGSTER_PG_PORT"] = str(dsn_parts.get("port", "5432"))
    env["STASH_DAGSTER_PG_USER"] = dsn_parts.get("user", "stash")
    env["STASH_DAGSTER_PG_PASSWORD"] = dsn_parts.get("password", "")
    env["STASH_DAGSTER_PG_DB"] = "dagster"
    env.setdefault("DAGSTER_TELEMETRY_DISABLED", "1")
    return env


def child_env(settings: Settings, dsn: str) -> dict[str, str]:
    """Environment of every process ``stash up`` starts: this one's, with the database they share."""
    env = dict(os.environ)
    if settings.embedded:
        env["STASH_DATABASE_URL"] = dsn  # children skip the embedded start-up dance
    return env


def dagster_process_env(settings: Settings, dsn: str) -> dict[str, str]:
    """Environment of the Dagster processes ``stash up`` starts, and of ``stash dagster``.

    ``dagster_env`` (DAGSTER_HOME, the ``STASH_DAGSTER_PG_*`` its dagster.yaml reads) with
    the ``STASH_*`` settings of ``child_env`` on top, so a variable the user set wins.
    """
    from psycopg.conninfo import conninfo_to_dict

    env = dagster_env(settings, conninfo_to_dict(dsn))
    env.update({k: v for k, v in child_env(settings, dsn).items() if k.startswith("STASH_")})
    return env


def dagster_cli(settings: Settings, args: Sequence[str], *, print_env: bool = False) -> None:
    """``stash dagster``: run Dagster's CLI with the environment ``stash up`` gives Dagster.

    The database must be reachable (an entry point starts the embedded one first). With
    ``print_env`` it prints that environment's additions as ``export`` lines instead, for a
    shell that starts Dagster's other programs by hand; without ``STASH_DATABASE_URL``
    there, so that shell's ``stash db`` commands still manage the embedded server (the
    Dagster processes find it from ``STASH_HOME`` as well).
    """
    import shlex
    import shutil

    from stash_pipeline.db.dsn import database_dsn, require_running

    require_running(settings)
    env = dagster_process_env(settings, database_dsn(settings))
    if print_env:
        added = {k: v for k, v in env.items() if os.environ.get(k) != v and k != "STASH_DATABASE_URL"}
        for key in sorted(added):
            print(f"export {key}={shlex.quote(env[key])}")
        return
    program = Path(sys.executable).parent / "dagster"
    if not program.exists():
        found = shutil.which("dagster")
        if found is None:
            raise errors.ConfigurationError("the `dagster` command is not installed in this environment")
        program = Path(found)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(program, ["dagster", *args], env)  # replaces this process: dagster's exit code is ours


def dagster_ui_command(bin_dir: Path, port: int, host: str = "127.0.0.1") -> list[str]:
    """How ``stash up`` starts the Dagster UI: behind the admin-token check, never bare."""
    return [str(bin_dir / "stash"), "serve", "dagster-ui", "--workspace", str(DAGSTER_CONFIG / "workspace.yaml"),
            "--host", host, "--port", str(port)]


def ensure_admin_token(settings: Settings) -> tuple[Path, bool]:
    """Create a local admin token (all namespaces, all rights) once; return (file, created)."""
    path = settings.home / "admin-token"
    if path.exists():
        return path, False
    from stash_pipeline.auth import create_token
    from stash_pipeline.store import Store

    path.parent.mkdir(parents=True, exist_ok=True)
    # Created owner-only from the first byte (no window in which another local user can
    # read it) and exclusively: an existing file or a planted symlink is refused rather
    # than written through. The token is minted only once the file is ours.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except FileExistsError:
        raise errors.ConfigurationError(
            f"{path} exists but is not a readable token file (a dangling link?); "
            "remove it and run `stash up` again"
        ) from None
    try:
        with Store.open(settings) as store:
            token = create_token(store, ["/"], ["read", "write", "admin"], name="local admin (stash up)")
        with os.fdopen(fd, "w") as handle:
            fd = -1
            handle.write(token["token"] + "\n")
    except BaseException:
        if fd >= 0:
            os.close(fd)
        path.unlink(missing_ok=True)
        raise
    return path, True


def run_up(
    settings: Settings,
    *,
    mcp_host: str = "127.0.0.1",
    mcp_port: int = 8080,
    dagster_port: int = 3000,
    with_dagster: bool = True,
    echo: object = print,
) -> int:
    """Start everything, block until a signal or a child dies; return the exit code."""
    from stash_pipeline.db.dsn import database_dsn
    from stash_pipeline.db.embedded import EmbeddedServer
    from stash_pipeline.db.migrate import migrate

    say = echo if callable(echo) else print
    started_db = False
    server = None
    if settings.embedded:
        server = EmbeddedServer(settings)
        if not server.status().running:
            server.start()
            started_db = True
        dsn = server.url()
    else:
        dsn = database_dsn(settings)
    migrate(settings, dsn)
    from stash_pipeline.embedding import prepare_embedder

    if prepare_embedder(settings):
        say(f"built the {settings.embedding_model_name} graph in {settings.home / 'models'} (first start only)")
    token_file, token_created = ensure_admin_token(settings)

    for host, port, what in [(mcp_host, mcp_port, "MCP")] + (
        [("127.0.0.1", dagster_port, "Dagster UI")] if with_dagster else []
    ):
        if not _port_free(host, port):
            say(f"error: port {port} for the {what} server is in use; pick another with --{'mcp' if what == 'MCP' else 'dagster'}-port")
            if started_db and server:
                server.stop()
            return 2

    logs = settings.home / "logs"
    base_env = child_env(settings, dsn)
    bin_dir = Path(sys.executable).parent
    children = [
        Child(
            "mcp",
            [str(bin_dir / "stash"), "serve", "mcp", "--transport", "http",
             "--host", mcp_host, "--port", str(mcp_port)],
            base_env,
            logs / "mcp.log",
        )
    ]
    if with_dagster:
        env = dagster_process_env(settings, dsn)
        workspace = DAGSTER_CONFIG / "workspace.yaml"
        children += [
            Child("dagster-ui", dagster_ui_command(bin_dir, dagster_port), env, logs / "dagster-webserver.log"),
            Child("dagster-daemon", [str(bin_dir / "dagster-daemon"), "run", "-w", str(workspace)], env,
                  logs / "dagster-daemon.log"),
        ]

    url_file = settings.home / "dagster" / "webserver_url"
    stopping = {"flag": False}

    def _stop(signum: int, frame: object) -> None:
        stopping["flag"] = True

    old_int = signal.signal(signal.SIGINT, _stop)
    old_term = signal.signal(signal.SIGTERM, _stop)
    try:
        for child in children:
            child.start()
        # a child that dies while starting is reported at once below, not after the timeout
        def all_alive() -> bool:
            return not stopping["flag"] and all(c.alive() for c in children)

        # ready, not only listening: /readyz passes once a recall can be served (stash_serve.warmup)
        ready_mcp = wait_for_ready(f"http://{_url_host(mcp_host)}:{mcp_port}/readyz", 60, all_alive)
        ready_ui = wait_for_port("127.0.0.1", dagster_port, 120, all_alive) if with_dagster else True
        if with_dagster and ready_ui:
            # `consolidate` (MCP and CLI) finds Dagster here and submits runs to it
            url_file.write_text(f"http://127.0.0.1:{dagster_port}\n", encoding="utf-8")
        if all_alive():
            say(_status_block(settings, mcp_host, mcp_port, dagster_port, with_dagster, token_file,
                              token_created, logs, ready_mcp and ready_ui))
        exit_code = 0
        while not stopping["flag"]:
            dead = [c for c in children if not c.alive()]
            if dead:
                say(f"error: {dead[0].name} exited (code {dead[0].process.returncode if dead[0].process else '?'}); "
                    f"see {dead[0].log}")
                exit_code = 1
                break
            time.sleep(0.3)
        return exit_code
    finally:
        url_file.unlink(missing_ok=True)
        _shutdown(children)
        if started_db and server is not None:
            server.stop()
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
        say("stash up: stopped")


def _shutdown(children: list[Child], grace: float = 10.0) -> None:
    for child in children:
        child.signal_group(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for child in children:
        if child.process is None:
            continue
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
    for child in children:
        child.signal_group(signal.SIGKILL)
        if child.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.process.wait(timeout=5)


def _status_block(
    settings: Settings,
    mcp_host: str,
    mcp_port: int,
    dagster_port: int,
    with_dagster: bool,
    token_file: Path,
    token_created: bool,
    logs: Path,
    ready: bool,
) -> str:
    reasoner = (
        f"{settings.reasoner_model} at {settings.openai_base_url}"
        if settings.reasoner_configured
        else "not configured (model stages idle; set STASH_REASONER_MODEL + STASH_OPENAI_BASE_URL)"
    )
    lines = [
        "Stash is running" + ("" if ready else " (some services are still starting; see logs)"),
        f"  MCP (streamable HTTP)  http://{mcp_host}:{mcp_port}/mcp",
        f"  console                http://{mcp_host}:{mcp_port}/console/  (sign in with a token)",
        f"  health / metrics       http://{mcp_host}:{mcp_port}/healthz  /metrics",
    ]
    if with_dagster:
        lines += [
            f"  Dagster UI             http://127.0.0.1:{dagster_port}",
            f"    log in with the admin token in {token_file}",
            "    (scripts: Authorization: Bearer <that token>)",
        ]
    lines += [
        f"  admin token            {token_file}" + ("  (new)" if token_created else ""),
        f"  database               {'embedded, ' + str(settings.home / 'pgdata') if settings.embedded else 'STASH_DATABASE_URL'}",
        f"  embedder               {settings.embedder} ({settings.embedding_model_name})",
        f"  reasoner               {reasoner}",
        f"  logs                   {logs}",
        "Press Ctrl-C to stop.",
    ]
    return "\n".join(lines)
