"""Several worker processes serving one HTTP port: ``stash serve mcp --transport http --workers N``.

One Python process uses about one core, and the streamable HTTP transport keeps no state
between requests, so a host's cores are used by N processes that accept connections on
the same port. This process (the supervisor) binds the listening socket(s) once and
starts N workers, each a fresh interpreter (``python -c``, the sockets passed on as open
descriptors, the settings pickled on its stdin). A worker opens its own store and pools,
token checks, embedder and pending-vector worker, and serves the same app, with uvicorn
and the guarded h11 protocol of ``stash_serve.http_edge``, by the same code as a single
process (``stash_serve.serve.worker_main``). The kernel hands each new connection to one worker
waiting in accept; a worker busy on the CPU waits less, so the others take more.

Why not uvicorn's own ``workers=``: it wants the app as an import string, and pickles its
``Config`` to each worker, whose protocol class is built per settings here
(``uvicorn_options``) and does not pickle; each worker would also re-read the settings
from the environment rather than use this process's. Why not a socket per worker with
SO_REUSEPORT: the kernel hashes connections to sockets whatever a worker's load, a worker
that dies drops the connections queued on its socket, and any process of the same user
may bind the port beside it. Why not fork alone: the model runtime and the pools' threads
do not survive a fork; a fresh interpreter costs a few seconds at start, once.

What each worker has of its own (so a limit is per worker): its database pool
(STASH_DB_POOL_MAX) and token-check pool, the embedding model and its in-memory caches,
the admission limits (STASH_HTTP_MAX_CONCURRENT, STASH_HTTP_MAX_QUEUE), the per-token
limits (requests in flight, failed checks, guesses paced, unknown tokens remembered,
namespaces created an hour), its pending-vector worker (they share the work safely:
rows are claimed with SKIP LOCKED) and the consolidation jobs it runs without Dagster.
What they share: the port; ``/readyz``, ready only once every worker is
(``Peers.ready_count``); ``/metrics``, summed over the workers (prometheus_client's
multiprocess mode, in this server's run directory); and SSE sessions: a worker
answering a message for a session another holds passes it to that worker over a Unix
socket in the run directory (``SseForward``), since the client's POST may reach any worker.

Signals: SIGINT or SIGTERM to the supervisor sends SIGTERM to every worker, which drains
as one process does (uvicorn's graceful shutdown), and SIGKILL to any still running
after ``GRACE_S``. A worker whose supervisor is gone (killed) stops itself within a
second. ``stash up`` signals the whole process group, workers included. A worker that
exits on its own is replaced; when workers keep exiting soon after their start
(``QUICK_EXITS`` in a row) the server stops instead, saying so.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stash_pipeline import errors
from stash_pipeline.config import Settings

if TYPE_CHECKING:
    from starlette.routing import BaseRoute
    from starlette.types import Receive, Scope, Send

    from stash_pipeline.db.budget import Budget

log = logging.getLogger("stash.workers")

#: with --workers and STASH_HTTP_WORKERS unset: one worker per usable CPU, at most this many
#: (each loads the model, about 380 MB with the default embedder, and takes
#: STASH_DB_POOL_MAX + 4 connections: 4 such fit a stock PostgreSQL beside Dagster)
AUTO_MAX_WORKERS = 4
#: seconds workers get to drain after SIGTERM before they are killed (uvicorn's graceful
#: shutdown takes up to 10 s, closing the pools a little more)
GRACE_S = 15.0
#: a worker that exits within this many seconds of its start exited "soon"
QUICK_EXIT_S = 30.0
#: this many soon exits in a row stop the server: a replacement would only exit again
QUICK_EXITS = 3
#: how often a worker checks that its supervisor still runs, seconds
PARENT_CHECK_S = 1.0
#: the listen backlog (uvicorn's default)
BACKLOG = 2048

#: what a worker runs: ignore Ctrl-C until it can stop cleanly (the supervisor sends
#: SIGTERM), take the supervisor's import path, then its options, both pickled on stdin
_WORKER_CODE = (
    "import pickle, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "sys.path[:] = pickle.load(sys.stdin.buffer); "
    "from stash_serve.serve import worker_main; worker_main()"
)


# --- how many ------------------------------------------------------------------------------


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity, within a container's CPU quota."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        count = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    if quota is not None:
        count = min(count, max(1, math.floor(quota)))
    return max(1, count)


def cgroup_cpu_quota(root: Path = Path("/sys/fs/cgroup"), proc: Path = Path("/proc/self/cgroup")) -> float | None:
    """The CPU quota of this process's cgroup (cgroup v2 ``cpu.max``, or v1's CFS quota),
    the smallest along its path, in CPUs; None when there is none."""
    quotas: list[float] = []
    try:
        lines = proc.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":  # v2
            where = root / path.lstrip("/")
            while True:
                with contextlib.suppress(OSError, ValueError):
                    limit, period = (where / "cpu.max").read_text().split()[:2]
                    if limit != "max":
                        quotas.append(int(limit) / int(period))
                if where == root or root not in where.parents:
                    break
                where = where.parent
        elif "cpu" in controllers.split(","):  # v1
            for base in (root / "cpu", root / "cpu,cpuacct", root / controllers):
                with contextlib.suppress(OSError, ValueError):
                    limit_us = int((base / "cpu.cfs_quota_us").read_text())
                    period_us = int((base / "cpu.cfs_period_us").read_text())
                    if limit_us > 0 and period_us > 0:
                        quotas.append(limit_us / period_us)
                    break
    return min(quotas) if quotas else None


def choose_workers(requested: int | None, budget: Budget | None, cpus: int | None = None) -> tuple[int, str | None]:
    """How many workers to start, and a line to log when that is not what was asked.

    ``requested`` (``--workers``, STASH_HTTP_WORKERS) is taken as it is, unless the
    connection budget (``budget``, None when the database could not be asked) cannot hold
    that many: then it is refused, naming how many fit (one worker past the budget only
    warns, as a single process always did). Unset: one per usable CPU, at most
    AUTO_MAX_WORKERS, and no more than the budget holds (at least one).
    """
    if requested is not None:
        if requested > 1 and budget is not None and not budget.with_workers(requested).fits:
            fit = budget.most_workers()
            raise errors.ConfigurationError(
                f"{requested} workers do not fit the connection budget: {budget.with_workers(requested).spelled()}, "
                f"but the server gives {budget.available} available; "
                + (f"at most {fit} fit: " if fit >= 1 else "")
                + "lower --workers (STASH_HTTP_WORKERS) or STASH_DB_POOL_MAX, or raise max_connections"
            )
        return requested, None
    wanted = min(usable_cpus() if cpus is None else cpus, AUTO_MAX_WORKERS)
    if budget is None or wanted == 1 or budget.with_workers(wanted).fits:
        return wanted, None
    fit = max(1, min(wanted, budget.most_workers()))
    return fit, (
        f"starting {fit} worker(s), not one per CPU ({wanted}): {wanted} would need "
        f"{budget.with_workers(wanted).need} connections of the {budget.available} available "
        "(set STASH_HTTP_WORKERS, lower STASH_DB_POOL_MAX or raise max_connections)"
    )


# --- the listening sockets -----------------------------------------------------------------


def bind_sockets(host: str, port: int, backlog: int = BACKLOG) -> list[socket.socket]:
    """Listening sockets for ``host``:``port``, every address the name resolves to (as
    asyncio's ``create_server``, which one uvicorn process uses, binds them)."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise errors.ConfigurationError(f"cannot listen on {host!r}: {exc.strerror}") from None
    sockets: list[socket.socket] = []
    seen: set[tuple[int, Any]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                raise errors.ConfigurationError(
                    f"cannot listen on {address[0]} port {port}: {exc.strerror.lower() if exc.strerror else exc}"
                ) from None
            sock.listen(backlog)
            sock.set_inheritable(True)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


# --- what the workers share ----------------------------------------------------------------


@dataclass(frozen=True)
class WorkerOptions:
    """What the supervisor hands each worker (pickled on its stdin)."""

    settings: Settings
    host: str
    port: int
    no_auth: bool
    toolsets: str
    count: int
    rundir: Path
    #: the listening sockets' descriptors, the same numbers in every worker
    fds: tuple[int, ...]


@dataclass(frozen=True)
class Peers:
    """One worker's view of its siblings: readiness, and where each takes SSE messages."""

    index: int
    count: int
    rundir: Path

    def message_path(self, index: int) -> str:
        """The SSE message path of worker ``index``: its sessions' POSTs name their worker."""
        return f"/messages/{index}/"

    def socket_path(self, index: int) -> Path:
        return self.rundir / f"worker-{index}.sock"

    def _ready_file(self, index: int) -> Path:
        return self.rundir / f"ready-{index}"

    def mark_ready(self) -> None:
        self._ready_file(self.index).touch()

    def ready_count(self) -> int:
        return sum(self._ready_file(i).exists() for i in range(self.count))

    def forward_routes(self) -> list[BaseRoute]:
        """The message paths of the other workers, each passed on to that worker."""
        from starlette.routing import Mount

        return [
            Mount(self.message_path(i), app=SseForward(self.socket_path(i)))
            for i in range(self.count) if i != self.index
        ]

    def bind_own_socket(self) -> socket.socket:
        """This worker's Unix socket, where the others pass on its SSE sessions' messages."""
        path = self.socket_path(self.index)
        path.unlink(missing_ok=True)  # a predecessor's, if it died
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(path))
        sock.listen(BACKLOG)
        return sock


class SseForward:
    """ASGI app: a POST for an SSE session another worker holds, passed on to that worker.

    The request is passed whole (its token is checked again there) over the worker's Unix
    socket, and its answer (202, or 404 for a session that is gone) passed back. A worker
    that no longer answers held no session any more: 404, as for any unknown session.
    """

    #: hop-by-hop headers, and the length the client below sets itself
    SKIP = frozenset({b"connection", b"keep-alive", b"transfer-encoding", b"te", b"trailer", b"upgrade",
                      b"proxy-connection", b"content-length"})

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        import httpx2

        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        target = scope.get("raw_path") or scope["path"].encode()
        query = scope.get("query_string", b"")
        url = "http://worker" + target.decode("latin-1") + (f"?{query.decode('latin-1')}" if query else "")
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in self.SKIP]
        try:
            transport = httpx2.AsyncHTTPTransport(uds=str(self.socket_path))
            async with httpx2.AsyncClient(transport=transport, timeout=30) as client:
                answer = await client.request(scope["method"], url, headers=headers, content=b"".join(chunks))
        except httpx2.TransportError:
            status, answer_headers, body = 404, [(b"content-type", b"text/plain; charset=utf-8")], b"Could not find session"
        else:
            status, body = answer.status_code, answer.content
            answer_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers.items()
                              if k.lower().encode() not in self.SKIP and k.lower() not in ("date", "server")]
        await send({"type": "http.response.start", "status": status,
                    "headers": [*answer_headers, (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


# --- the supervisor ------------------------------------------------------------------------


@dataclass
class _Worker:
    index: int
    process: subprocess.Popen[bytes]
    started: float


class Supervisor:
    """Starts ``options.count`` workers, replaces one that exits, and stops them all on a signal."""

    def __init__(self, options: WorkerOptions, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options
        self.peers = Peers(-1, options.count, options.rundir)
        self.workers: dict[int, _Worker] = {}
        self.stopping = False
        self.quick_exits = 0
        self._clock = clock

    def _signal(self, signum: int, frame: Any) -> None:
        self.stopping = True

    def start(self, index: int) -> None:
        (self.options.rundir / f"ready-{index}").unlink(missing_ok=True)
        # The worker starts with SIGINT and SIGTERM blocked and SIGINT ignored (a mask and a
        # disposition that survive exec): a signal while it imports waits until it can stop
        # cleanly (``stash_serve.serve.worker_main``), no KeyboardInterrupt mid-import. Here
        # a signal meanwhile is held too, and handled once the handler is back.
        held = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, held)
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", _WORKER_CODE],
                stdin=subprocess.PIPE,
                pass_fds=self.options.fds,
            )
        finally:
            signal.signal(signal.SIGINT, previous)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
        assert process.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # it died at once: seen as an exit below
            pickle.dump(list(sys.path), process.stdin)
            pickle.dump((self.options, index, os.getpid()), process.stdin)
            process.stdin.close()
        self.workers[index] = _Worker(index, process, self._clock())
        log.info("worker %d started (pid %d)", index, process.pid)

    def run(self) -> None:
        """Serve until a signal; raise StashError when workers keep exiting."""
        previous = {s: signal.signal(s, self._signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            for index in range(self.options.count):
                if self.stopping:
                    break
                self.start(index)
            while not self.stopping:
                time.sleep(0.2)
                for worker in list(self.workers.values()):
                    if worker.process.poll() is not None and not self.stopping:
                        self._replace(worker)
        finally:
            self.stop()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        if self.quick_exits >= QUICK_EXITS:
            raise errors.StashError(
                f"{QUICK_EXITS} workers in a row exited within {QUICK_EXIT_S:g} s of their start; stopped "
                "(their reason is in the log above)"
            )

    def _replace(self, worker: _Worker) -> None:
        code = worker.process.returncode
        self._forget(worker)
        lived = self._clock() - worker.started
        self.quick_exits = self.quick_exits + 1 if lived < QUICK_EXIT_S else 0
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        if self.quick_exits >= QUICK_EXITS:
            log.error("worker %d (pid %d) %s after %.0f s; stopping the server", worker.index,
                      worker.process.pid, how, lived)
            self.stopping = True
            return
        log.warning("worker %d (pid %d) %s; starting another", worker.index, worker.process.pid, how)
        self.start(worker.index)

    def _forget(self, worker: _Worker) -> None:
        del self.workers[worker.index]
        (self.options.rundir / f"ready-{worker.index}").unlink(missing_ok=True)
        with contextlib.suppress(Exception):  # the worker's live gauges leave the sums
            from prometheus_client.multiprocess import mark_process_dead

            mark_process_dead(worker.process.pid, str(self.options.rundir / "metrics"))

    def stop(self) -> None:
        """SIGTERM to every worker, SIGKILL to those still running after GRACE_S."""
        self.stopping = True
        for worker in self.workers.values():
            with contextlib.suppress(ProcessLookupError):
                worker.process.send_signal(signal.SIGTERM)
        deadline = self._clock() + GRACE_S
        for worker in list(self.workers.values()):
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.process.wait(timeout=max(0.1, deadline - self._clock()))
            if worker.process.poll() is None:
                log.warning("worker %d (pid %d) did not stop within %g s; killing it",
                            worker.index, worker.process.pid, GRACE_S)
                worker.process.kill()
                worker.process.wait()
            self._forget(worker)


@contextlib.contextmanager
def run_directory() -> Iterator[Path]:
    """A directory of this server's own (mode 700): worker sockets, readiness, metric files."""
    rundir = Path(tempfile.mkdtemp(prefix="stash-mcp-"))
    try:
        (rundir / "metrics").mkdir()
        yield rundir
    finally:
        shutil.rmtree(rundir, ignore_errors=True)


def serve_workers(settings: Settings, count: int, *, host: str, port: int, no_auth: bool, toolsets: str) -> None:
    """Bind ``host``:``port`` and serve it with ``count`` worker processes until a signal."""
    from stash_pipeline.embedding import prepare_embedder
    from stash_serve.metrics import MULTIPROC_ENV

    # the model's cached graph built once here (the first start only), not by every worker at once
    try:
        if prepare_embedder(settings):
            log.info("built the %s graph in %s", settings.embedding_model_name, settings.home / "models")
    except Exception as exc:  # each worker meets it again, and /readyz says so
        log.warning("could not prepare the embedder: %s", exc)
    sockets = bind_sockets(host, port)
    try:
        with run_directory() as rundir:
            options = WorkerOptions(settings, host, port, no_auth, toolsets, count, rundir,
                                    tuple(s.fileno() for s in sockets))
            # the workers record metrics into files there; any of them answers with the sum
            previous = os.environ.get(MULTIPROC_ENV)
            os.environ[MULTIPROC_ENV] = str(rundir / "metrics")
            try:
                Supervisor(options).run()
            finally:
                if previous is None:
                    os.environ.pop(MULTIPROC_ENV, None)
                else:
                    os.environ[MULTIPROC_ENV] = previous
    finally:
        for sock in sockets:
            sock.close()


# --- a worker ------------------------------------------------------------------------------


def watch_parent(parent: int, interval: float = PARENT_CHECK_S) -> None:
    """Stop this worker (SIGTERM to itself) once its supervisor ``parent`` is gone."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="stash-parent-watch", daemon=True).start()


__all__ = [
    "AUTO_MAX_WORKERS",
    "Peers",
    "SseForward",
    "Supervisor",
    "WorkerOptions",
    "bind_sockets",
    "cgroup_cpu_quota",
    "choose_workers",
    "serve_workers",
    "usable_cpus",
    "watch_parent",
]
