"""What a Stash server process does with its time, recorded inside it (``bench/capacity_profile.py``).

Installed in every server process (a worker is a fresh interpreter) by a ``sitecustomize``
the bench writes to a temporary directory put first on ``PYTHONPATH``, when
``STASH_BENCH_PROFILE`` names a directory. While ``<directory>/on`` exists it records:

* stack samples: every ``1/STASH_BENCH_PROFILE_HZ`` s (default 100) the Python stack of
  every thread (``sys._current_frames``), counted by (thread, collapsed stack): a
  wall-clock profile; what a stack's innermost frame says (waiting in a queue or on a
  socket, running the ONNX graph, running Python) is read afterwards;
* layer timers: the wall time (and, for code running in one thread, the thread's CPU
  time, ``time.thread_time``) of the functions a call goes through, wrapped here: the
  embedder's model run, recall's SQL round trip, the read-your-writes embedding, grouping
  and shaping, the argument model, the pooled-connection wait, the thread hop, the
  result's serialisation, the token check, the SDK's call_tool, the whole HTTP request,
  and how late a task on the event loop wakes from a 10 ms sleep (the loop's lag);
* each thread's CPU time when recording starts and stops (``/proc/self/task``): how much
  the event loop's thread used against the others.

When the file goes, it writes ``<directory>/profile-<pid>.json`` (replacing the last).
Only the standard library at import; the product's modules are imported to be wrapped.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import sysconfig
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

DIRECTORY_ENV = "STASH_BENCH_PROFILE"
HZ_ENV = "STASH_BENCH_PROFILE_HZ"
ROOT = str(Path(__file__).resolve().parents[1]) + os.sep
STDLIB = sysconfig.get_paths()["stdlib"] + os.sep
MAX_DEPTH = 120

#: what the sitecustomize the bench writes holds
SITECUSTOMIZE = (
    "import os\n"
    f"if os.environ.get({DIRECTORY_ENV!r}):\n"
    "    import bench.sampler\n"
    "    bench.sampler.install()\n"
)


def short(filename: str) -> str:
    """A source file's name without the machine's paths: package-relative, repository-relative,
    or ``stdlib/…``."""
    marker = "site-packages" + os.sep
    if marker in filename:
        return filename.split(marker, 1)[1]
    if filename.startswith(ROOT):
        return filename[len(ROOT):]
    if filename.startswith(STDLIB):
        return "stdlib/" + filename[len(STDLIB):]
    return os.path.basename(filename)


_names: dict[Any, str] = {}


def frame_name(code: Any) -> str:
    name = _names.get(code)
    if name is None:
        name = _names[code] = f"{short(code.co_filename)}:{code.co_name}"
    return name


def collapsed(frame: Any) -> str:
    """The stack of ``frame``, outermost first, ``;``-joined (the flame-graph "collapsed" form)."""
    names: list[str] = []
    while frame is not None and len(names) < MAX_DEPTH:
        names.append(frame_name(frame.f_code))
        frame = frame.f_back
    return ";".join(reversed(names))


def thread_kind(thread: threading.Thread | None) -> str:
    if thread is None:
        return "other"
    if thread is threading.main_thread():
        return "event loop"
    name = thread.name
    if name.startswith("AnyIO worker thread"):
        return "tool threads"
    if name.startswith("stash-pending"):
        return "pending-vector worker"
    if "pool" in name or "worker" in name:  # psycopg_pool's maintenance threads
        return "connection pools' own threads"
    return "other"


def thread_cpu() -> dict[str, float]:
    """CPU seconds of this process's threads so far, by kind (threads not started by Python: other)."""
    kinds = {t.native_id: thread_kind(t) for t in threading.enumerate()}
    out: Counter[str] = Counter()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/schedstat") as f:
                ns = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        out[kinds.get(int(task), "other")] += ns / 1e9
    return dict(out)


class Timers:
    """Totals per wrapped function: calls, wall seconds, thread CPU seconds (sync ones), the
    longest wall."""

    def __init__(self) -> None:
        self.on = False
        self.totals: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def add(self, name: str, wall: float, cpu: float | None) -> None:
        if not self.on:
            return
        with self._lock:
            entry = self.totals.setdefault(name, [0, 0.0, 0.0, 0.0])
            entry[0] += 1
            entry[1] += wall
            entry[2] += cpu or 0.0
            entry[3] = max(entry[3], wall)


TIMERS = Timers()


def _timed(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    import inspect

    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                TIMERS.add(name, time.perf_counter() - began, None)

        return timed_async

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        began, cpu = time.perf_counter(), time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            TIMERS.add(name, time.perf_counter() - began, time.thread_time() - cpu)

    return timed


#: (module, attribute path, timer name): what a call goes through, outermost last
WRAPPED = (
    ("stash_pipeline.embedding.cache", "CachedEmbedder.compute", "embedder: model run (CachedEmbedder.compute)"),
    ("stash_pipeline.recall.vectors", "query_vector", "recall: the question's vector (query_vector)"),
    ("stash_pipeline.recall.vectors", "embedded_text", "recall: names to mask (embedded_text)"),
    ("stash_pipeline.recall.statement", "round_trip", "recall: SQL round trip (round_trip)"),
    ("stash_pipeline.memory.pending", "embed_pending_in", "recall: read-your-writes embedding (embed_pending_in)"),
    ("stash_pipeline.memory.pending", "embed_pending_batch", "pending-vector worker: one batch"),
    ("stash_pipeline.recall.grouping", "group", "recall: grouping (grouping.group)"),
    ("stash_pipeline.recall.shape", "shape_results", "recall: answer shaping (shape_results)"),
    ("stash_pipeline.recall.pipeline", "answer", "recall: library call (pipeline.answer)"),
    ("stash_pipeline.memory.episodes", "remember", "remember: library call (episodes.remember)"),
    ("stash_pipeline.operations.base", "Operation.parse", "arguments model (Operation.parse)"),
    ("psycopg_pool", "ConnectionPool.getconn", "pool: wait for a connection (getconn)"),
    ("stash_serve.mcp.calls", "ToolCalls.result", "tool result: serialise (ToolCalls.result)"),
    ("stash_serve.mcp.calls", "ToolCalls.run", "tool: ToolCalls.run (token wait, thread hop, work, result)"),
    ("stash_serve.token_check", "TokenCheck.check", "token check (TokenCheck.check)"),
    ("stash_serve.limits", "Admission._take", "admission: the wait for a place, or the refusal (Admission._take)"),
    ("stash_serve.mcp.server", "StashMCPServer.call_tool", "MCP: StashMCPServer.call_tool"),
)


def _replace_everywhere(original: Any, replacement: Any) -> None:
    """Put ``replacement`` wherever a loaded Stash module bound ``original`` by a from-import."""
    for name, module in list(sys.modules.items()):
        if not name.startswith(("stash_pipeline", "stash_serve")) or module is None:
            continue
        for attribute, value in list(vars(module).items()):
            if value is original:
                setattr(module, attribute, replacement)


def install_timers() -> None:
    import importlib

    for module_name, path, name in WRAPPED:
        module = importlib.import_module(module_name)
        owner: Any = module
        *parents, attribute = path.split(".")
        for parent in parents:
            owner = getattr(owner, parent)
        original = getattr(owner, attribute)
        wrapped = _timed(original, name)
        setattr(owner, attribute, wrapped)
        if owner is module:
            _replace_everywhere(original, wrapped)
    _time_thread_hop()
    _time_requests()
    _probe_event_loop()


def _time_thread_hop() -> None:
    """anyio.to_thread.run_sync: the whole await, and the function inside its thread; the
    difference is the hop (waiting for a thread of the limiter, the handover both ways)."""
    import anyio.to_thread

    original = anyio.to_thread.run_sync

    async def run_sync(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        inside = [0.0]

        def timed(*inner: Any) -> Any:
            start = time.perf_counter()
            try:
                return func(*inner)
            finally:
                inside[0] = time.perf_counter() - start

        try:
            return await original(timed, *args, **kwargs)
        finally:
            total = time.perf_counter() - began
            TIMERS.add("thread hop: to_thread.run_sync minus its function", total - inside[0], None)

    anyio.to_thread.run_sync = run_sync


def _time_requests() -> None:
    """Each POST /mcp, from the app's first call to its last body byte sent (uvicorn's own
    parsing and writing are outside)."""
    import stash_serve.http as http

    original = http.build_app

    def build_app(*args: Any, **kwargs: Any) -> Any:
        app = original(*args, **kwargs)

        async def timed_app(scope: Any, receive: Any, send: Any) -> None:
            if scope.get("type") != "http" or scope.get("path") != "/mcp" or scope.get("method") != "POST":
                await app(scope, receive, send)
                return
            began = time.perf_counter()
            status = [0]

            async def sending(message: Any) -> None:
                if message["type"] == "http.response.start":
                    status[0] = message["status"]
                await send(message)

            try:
                await app(scope, receive, sending)
            finally:
                TIMERS.add(f"HTTP: POST /mcp in the app ({status[0]})", time.perf_counter() - began, None)

        return timed_app

    http.build_app = build_app
    _replace_everywhere(original, build_app)


#: how often the event-loop probe asks to be woken, seconds
PROBE_S = 0.01


def _probe_event_loop() -> None:
    """A task on uvicorn's event loop asking to wake every PROBE_S: how late it wakes is
    how long any ready request waits for the loop (a loop busy, or its thread waiting for
    the GIL). Recorded as one timer call per wake, wall = the lateness."""
    import asyncio

    import uvicorn

    original = uvicorn.Server.startup

    async def probe() -> None:
        loop = asyncio.get_running_loop()
        while True:
            asked = loop.time()
            await asyncio.sleep(PROBE_S)
            TIMERS.add("event loop: lateness of a 10 ms wake-up", max(0.0, loop.time() - asked - PROBE_S), None)

    async def startup(self: Any, *args: Any, **kwargs: Any) -> None:
        self._stash_bench_probe = asyncio.get_running_loop().create_task(probe())
        await original(self, *args, **kwargs)

    uvicorn.Server.startup = startup


class Sampler:
    """Counts (thread kind, collapsed stack) every tick while ``<directory>/on`` exists."""

    def __init__(self, directory: Path, hz: float) -> None:
        self.directory = directory
        self.interval = 1.0 / hz
        self.control = directory / "on"
        self.samples: Counter[tuple[str, str]] = Counter()
        self.ticks = 0
        self.started: dict[str, float] | None = None
        self.began = 0.0
        self.thread = threading.Thread(target=self._run, name="stash-bench-sampler", daemon=True)

    def _run(self) -> None:
        me = threading.get_ident()
        while True:
            time.sleep(self.interval)
            on = self.control.exists()
            if on and self.started is None:
                self.samples.clear()
                self.ticks = 0
                TIMERS.totals.clear()
                TIMERS.on = True
                self.started, self.began = thread_cpu(), time.perf_counter()
            elif not on and self.started is not None:
                TIMERS.on = False
                self._dump(thread_cpu(), time.perf_counter() - self.began)
                self.started = None
            if not on:
                continue
            threads = {t.ident: t for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                self.samples[(thread_kind(threads.get(ident)), collapsed(frame))] += 1
            self.ticks += 1

    def _dump(self, ended: dict[str, float], seconds: float) -> None:
        assert self.started is not None
        cpu = {k: ended.get(k, 0.0) - self.started.get(k, 0.0) for k in set(ended) | set(self.started)}
        data = {
            "pid": os.getpid(),
            "seconds": seconds,
            "ticks": self.ticks,
            "interval_s": self.interval,
            "thread_cpu_s": cpu,
            "timers": {name: {"calls": c, "wall_s": w, "cpu_s": u, "max_s": m}
                       for name, (c, w, u, m) in TIMERS.totals.items()},
            "samples": [[kind, stack, n] for (kind, stack), n in self.samples.most_common()],
        }
        target = self.directory / f"profile-{os.getpid()}.json"
        temporary = target.with_suffix(".tmp")
        temporary.write_text(json.dumps(data))
        temporary.replace(target)


def install() -> None:
    """Wrap the timers and start the sampler (from the sitecustomize, at interpreter start)."""
    directory = Path(os.environ[DIRECTORY_ENV])
    install_timers()
    Sampler(directory, float(os.environ.get(HZ_ENV, "100"))).thread.start()
