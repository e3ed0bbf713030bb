"""Capacity: closed-loop agents over MCP streamable HTTP, beside two floors, step by step.

    python -m bench.capacity                         # 1, 4, 16, 64, 256 agents; 1 and 2 workers; 20 s a step
    python -m bench.capacity --quick                 # 1, 16, 64, 256 agents, 8 s a step: a few minutes
    python -m bench.capacity --agents 16 --workers 2 --duration 30

Data: the first ``--turns`` turns of the conversational labelled set (bench/data; 5,882 by
default, the size of the external conversational benchmark's ten chats) as episodes of
ONE namespace, ``/bench/capacity``, their vectors from the committed MiniLM cache.

Each agent is one MCP session (the real SDK client, ``streamable_http_client`` +
``ClientSession``, its own HTTP connection and its own bearer token, as separate agents
have) on an anyio task, AGENTS_PER_CLIENT (32) to a client process (one process holding
256 sessions fell behind on this machine: its event loop woke up to seconds late, and the
latencies were its own; the "client loop lag" column says how late the clients' loops
woke from a 10 ms sleep), calling in a closed loop: 80% ``recall`` of a
question never asked before (the labelled set's questions in templated variants, so no
text repeats within a run and every recall pays the embedding), 20% ``remember`` of a new
text (a turn in a templated variant), into that namespace. A call answered with the typed
busy error (JSON-RPC -32005, HTTP 503, ``stash_serve.admission``) is a refusal: the agent
waits the ``retry_after_s`` it was given, as a client told to come back later does, then
calls again. A call with no answer within ``--timeout`` (10 s) is a timeout. The server is
``stash serve mcp --transport http --workers W`` in a subprocess (tokens on), one per
``--workers`` value (and ``--embed-on-write`` mode: ``auto,sync`` compares the product's
default, which defers a new text's vector with this embedder, with vectors computed before
``remember`` commits), all started before the first step.

Each step (a count of agents C) runs, one after the other on the same table: Stash with
each worker count, then the two floors, C clients each:

* ``bare HNSW top-10``: C threads in this process, each in a closed loop over a pool of
  min(C, 64) connections running one ``SELECT ... ORDER BY embedding <=> $1 LIMIT 10`` over
  the episodes with a precomputed vector (near copies of the questions' vectors): "find
  the ten nearest memories", nothing else;
* ``embed + top-10``: the same, each call first embedding a never-asked question with the
  product's own embedder (``minilm-int8``, in process, no cache): the floor of any search
  for a new text.

A step has ``--warmup`` seconds not kept, then ``--duration`` seconds measured: calls/s
are the calls answered within the window, latencies those of calls begun within it. After
Stash's step the bench waits until the pending-vector workers have embedded every
remembered text (``STASH_EMBED_ON_WRITE=auto`` defers them with this embedder): that CPU
is in the step's CPU figures, not in its calls/s. CPU per answered call is split into the
client (the client processes: the MCP SDK client; or this process: the floor's threads),
the Stash server processes and PostgreSQL's (``psutil``); on a shared machine the load
average is reported (a floor's C threads count in it while they run).

Last, one agent over MCP stdio (``stash serve mcp --transport stdio``) asks
``--stdio-rounds`` new questions, recall only, each round alternating with the
embed-and-search floor on one connection: the single agent's latency against that floor in
the same run. ``bench/capacity_profile.py`` says where a call's time goes under load.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from bench import common, mcp_overhead, recall_service
from bench.data import conversations

NAMESPACE = "/bench/capacity"
TURNS = 5_882
AGENTS = (1, 4, 16, 64, 256)
QUICK_AGENTS = (1, 16, 64, 256)
#: a floor's threads share at most this many connections (the embedded server allows 200,
#: and the Stash servers hold theirs; more would not make 2 cores search faster)
FLOOR_CONNECTIONS = 64
#: sessions opening at once before a step (an initialize is a request like any other)
OPENING = 8
BUSY_CODE = -32005
#: the client's event-loop probe sleeps this long, seconds
PROBE_S = 0.01
#: the share of calls that are ``remember`` (the rest ``recall``)
REMEMBER_SHARE = 0.2
STASH = "Stash"
FLOOR = "bare HNSW top-10"
EMBEDDED_FLOOR = "embed + top-10"


# --- texts never asked before -------------------------------------------------------------


QUESTION_FRAMES = (
    "{}", "Quick one: {}", "Remind me: {}", "Do you remember: {}", "From our earlier chats: {}",
    "I forgot: {}", "Can you look up: {}", "Tell me again: {}", "Before I reply: {}", "Checking my notes: {}",
    "One more thing: {}", "Sorry to ask again: {}",
)
QUESTION_ENDS = ("", " Thanks.", " Just the short answer.", " If you know.", " It came up today.",
                 " For the summary.", " I need it for a reply.", " No rush.")
NOTE_FRAMES = ("{}", "Note: {}", "Heard today: {}", "From the chat: {}", "Worth keeping: {}", "Overheard: {}")
NOTE_ENDS = ("", " (follow up later)", " (said again today)", " (from the call)", " (check this)")


class Texts:
    """Questions and notes never produced twice: the labelled set's questions and turns in
    templated variants (frame x question x ending, then numbered). Variant ``i`` for ``i`` in
    ``start, start + stride, …``; ``reserve(n)`` hands out a block of indices no other call
    gets, for another process's ``Texts`` (``start`` within it, ``stride`` its processes).
    Safe to share between threads and tasks."""

    def __init__(self, questions: Sequence[str], turns: Sequence[str], seed: int = 57, *,
                 start: int = 0, stride: int = 1) -> None:
        rng = random.Random(seed)
        self.questions, self.turns = list(questions), list(turns)
        rng.shuffle(self.questions)
        rng.shuffle(self.turns)
        self._lock = threading.Lock()
        self._next = {"question": start, "note": start}
        self.stride = stride

    def _take(self, which: str) -> int:
        with self._lock:
            i = self._next[which]
            self._next[which] = i + self.stride
            return i

    def reserve(self, count: int) -> int:
        """The first of ``count`` indices of both kinds that this instance will not produce."""
        with self._lock:
            first = max(self._next.values())
            self._next = {k: first + count for k in self._next}
            return first

    @staticmethod
    def _variant(i: int, base: Sequence[str], frames: Sequence[str], ends: Sequence[str]) -> str:
        n = len(base)
        text = frames[(i // n) % len(frames)].format(base[i % n]) + ends[(i // (n * len(frames))) % len(ends)]
        rounds = i // (n * len(frames) * len(ends))
        return text + (f" ({rounds})" if rounds else "")

    def question(self) -> str:
        return self._variant(self._take("question"), self.questions, QUESTION_FRAMES, QUESTION_ENDS)

    def note(self) -> str:
        return self._variant(self._take("note"), self.turns, NOTE_FRAMES, NOTE_ENDS)


# --- what a step records ------------------------------------------------------------------


@dataclass
class Calls:
    """Every call of a step: (kind, outcome, start, end) in perf_counter seconds; outcome is
    ok, busy, timeout or error; the first few error messages."""

    rows: list[tuple[str, str, float, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: how late the client's event loop woke from PROBE_S sleeps during the window, ms
    lag_ms: list[float] = field(default_factory=list)

    def add(self, kind: str, outcome: str, start: float, end: float, error: str | None = None) -> None:
        self.rows.append((kind, outcome, start, end))
        if error is not None and len(self.errors) < 5:
            self.errors.append(error[:300])


@dataclass
class Step:
    """One path at one count of agents: the calls within the window and the CPU they took."""

    path: str
    agents: int
    window: tuple[float, float]
    calls: Calls
    cpu_s: dict[str, float]
    drain_s: float = 0.0

    @property
    def seconds(self) -> float:
        return self.window[1] - self.window[0]

    def _within(self) -> list[tuple[str, str, float, float]]:
        start, end = self.window
        return [r for r in self.calls.rows if start <= r[2] < end]

    def answered(self) -> int:
        start, end = self.window
        return sum(1 for _, outcome, _, done in self.calls.rows if outcome == "ok" and start <= done < end)

    def rate(self) -> float:
        return self.answered() / self.seconds

    def latencies(self, kind: str, outcome: str = "ok") -> list[float]:
        return [(done - began) * 1000 for k, o, began, done in self._within() if k == kind and o == outcome]

    def count(self, outcome: str) -> int:
        return sum(1 for _, o, _, _ in self._within() if o == outcome)

    def slowest_s(self) -> float:
        """The longest wait for an answer of any kind (a result, a refusal, an error)."""
        return max(((done - began) for _, o, began, done in self._within() if o != "timeout"), default=0.0)

    def over(self, seconds: float, outcome: str | None = None) -> int:
        """Calls without an answer (a result or a refusal) within ``seconds``; of one
        ``outcome`` only ("ok", "busy"…) when given."""
        return sum(1 for _, o, began, done in self._within()
                   if (outcome is None or o == outcome) and (o == "timeout" or done - began > seconds))

    def cpu_ms_per_call(self, part: str) -> float | None:
        value, answered = self.cpu_s.get(part), self.answered()
        return None if value is None or not answered else 1000 * value / answered


def p(values: Sequence[float], q: float) -> float | str:
    return common.percentile(values, q) if values else "–"


# --- CPU of the processes involved ---------------------------------------------------------


class Cpu:
    """CPU seconds used so far by this process (the client), the Stash server processes and
    PostgreSQL (postmaster, every backend, the ones already gone), via psutil."""

    def __init__(self, servers: Callable[[], list[int]], postmaster: int | None) -> None:
        self.servers = servers
        self.postmaster = postmaster

    @staticmethod
    def _tree(pid: int) -> float | None:
        import psutil

        try:
            root = psutil.Process(pid)
            total = sum(root.cpu_times()[:4])  # user, system, and the reaped children's
            for child in root.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    total += sum(child.cpu_times()[:2])
            return total
        except psutil.Error:
            return None

    def read(self) -> dict[str, float | None]:
        own = resource.getrusage(resource.RUSAGE_SELF)
        servers = [self._tree(pid) for pid in self.servers()]
        return {
            "client": own.ru_utime + own.ru_stime,
            "server": sum(s for s in servers if s is not None) if servers else None,
            "postgres": self._tree(self.postmaster) if self.postmaster else None,
        }

    @staticmethod
    def spent(before: dict[str, float | None], after: dict[str, float | None]) -> dict[str, float]:
        return {k: after[k] - before[k] for k in before if before[k] is not None and after[k] is not None}  # type: ignore[operator]


def postmaster_pid(store: Any) -> int | None:
    import psutil

    try:
        with store.db.connection() as conn:
            backend = conn.info.backend_pid
        return psutil.Process(int(backend)).ppid()
    except (psutil.Error, OSError):
        return None


# --- the data ------------------------------------------------------------------------------


def load(store: Any, turns: list[dict[str, Any]]) -> None:
    """The turns as episodes of NAMESPACE through ``remember_batch``, their vectors put in the
    embedding cache first under the keys remember looks up (no model run)."""
    from stash_pipeline.embedding.cache import query_key
    from stash_pipeline.memory import episodes, namespaces

    texts = [t["content"] for t in turns]
    vectors = common.dataset_vectors(texts)
    store.embedder.ensure_lock()
    with store.db.transaction() as tx:
        store.embedder.store_in(tx, {query_key(t, [NAMESPACE]): v for t, v in zip(texts, vectors, strict=True)})
    namespaces.create(store, NAMESPACE, description="capacity bench: one conversation set, one namespace")
    for start in range(0, len(turns), 500):
        chunk = turns[start : start + 500]
        episodes.remember_batch(store, NAMESPACE, [
            {"content": t["content"], "occurred_at": t["occurred_at"], "metadata": {"dia_id": t["dia_id"]}}
            for t in chunk])
    with store.db.connection() as conn:
        conn.execute("ANALYZE episodes")
        conn.commit()


def pending(store: Any) -> int:
    """Episodes still waiting for their vector."""
    row = store.db.one("pending_vectors_backlog")
    return int(row["pending"]) if row else 0


def drain(store: Any, limit_s: float = 120.0) -> float:
    """Wait until no episode waits for its vector (the servers' workers embed them); seconds waited."""
    started = time.perf_counter()
    while pending(store) and time.perf_counter() - started < limit_s:
        time.sleep(0.2)
    return time.perf_counter() - started


# --- the Stash server ----------------------------------------------------------------------


@dataclass
class Server:
    workers: int
    url: str
    process: subprocess.Popen[bytes]
    #: STASH_EMBED_ON_WRITE of the server (auto: the default)
    vectors: str = "auto"

    @property
    def name(self) -> str:
        name = f"{STASH}, {self.workers} worker{'s' if self.workers > 1 else ''}"
        return name if self.vectors == "auto" else f"{name}, {self.vectors} vectors"


@contextlib.contextmanager
def stash_server(store: Any, home: Path, workers: int, extra_env: dict[str, str] | None = None,
                 vectors: str = "auto") -> Iterator[Server]:
    """``stash serve mcp --transport http --workers W`` on a free port, up once /readyz says
    ready (every worker warmed up); stopped (SIGTERM, its workers drain) after. ``vectors``
    is its STASH_EMBED_ON_WRITE."""
    import httpx2

    port = common._free_port()
    env = mcp_overhead._env(store, home) | {"STASH_EMBED_ON_WRITE": vectors} | (extra_env or {})
    command = [mcp_overhead._stash(), "serve", "mcp", "--transport", "http", "--port", str(port),
               "--workers", str(workers)]
    log_path = home / f"http-{workers}-{vectors}.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=common.ROOT)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 180
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"the server exited: {log_path.read_text()[-2000:]}")
                with contextlib.suppress(httpx2.HTTPError):
                    if httpx2.get(base + "/readyz", timeout=2).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the server was not ready in time: {log_path.read_text()[-2000:]}")
                time.sleep(0.3)
            yield Server(workers, base + "/mcp", process, vectors)
        finally:
            common.stop_process(process, 30)


def server_pids(servers: Sequence[Server]) -> Callable[[], list[int]]:
    return lambda: [s.process.pid for s in servers if s.process.poll() is None]


def raise_file_limit(wanted: int = 65_536) -> int:
    """The soft limit on open files raised toward the hard one (each agent holds a socket,
    and the SDK's streams more descriptors); returns the limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# --- agents over MCP streamable HTTP -------------------------------------------------------


async def agent(k: int, url: str, token: str, texts: Texts, calls: Calls, timeout: float,
                opening: anyio.Semaphore, opened: Callable[[], None], go: anyio.Event,
                stop_at: list[float]) -> None:
    """One agent: its own session, opened OPENING at a time (retried when refused while the
    others open), listed once; once ``go`` is set, calls until ``stop_at[0]``. A session the
    SDK gives up (a connection reset under a call ends its task group) counts that call as an
    error, and the agent opens another, as a client reconnects."""
    rng = random.Random(1000 + k)
    ready = False
    current: list[Any] = [None]  # the call in flight: (kind, began)
    while time.perf_counter() < stop_at[0]:
        await opening.acquire()
        held = True
        try:
            async with mcp_overhead.http_session(url, token) as session:
                await session.list_tools()  # as a client does once; the result check needs the schemas
                opening.release()
                held = False
                if not ready:
                    ready = True
                    opened()
                    await go.wait()
                await calling(session, rng, texts, calls, timeout, stop_at, current)
        except Exception as exc:  # counted, then a new session
            if current[0] is not None:
                kind, began = current[0]
                calls.add(kind, "error", began, time.perf_counter(), f"session lost: {_innermost(exc)}")
                current[0] = None
            await anyio.sleep(0.2 + rng.random())  # refused or reset while the others open: again
        finally:
            if held:
                opening.release()


def _innermost(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


async def calling(session: Any, rng: random.Random, texts: Texts, calls: Calls, timeout: float,
                  stop_at: list[float], current: list[Any]) -> None:
    """The closed loop of one agent until ``stop_at[0]``: every call recorded with its outcome
    (``current[0]`` names the call in flight)."""
    from mcp.shared.exceptions import MCPError

    while time.perf_counter() < stop_at[0]:
        if rng.random() < REMEMBER_SHARE:
            kind, arguments = "remember", {"content": texts.note(), "namespace": NAMESPACE}
        else:
            kind, arguments = "recall", {"query": texts.question(), "namespaces": NAMESPACE}
        began = time.perf_counter()
        current[0] = (kind, began)
        wait = 0.0
        try:
            with anyio.fail_after(timeout):
                result = await session.call_tool(kind, arguments)
        except TimeoutError:
            calls.add(kind, "timeout", began, time.perf_counter())
            current[0] = None
            continue
        except MCPError as exc:
            done = time.perf_counter()
            if exc.code == BUSY_CODE:
                calls.add(kind, "busy", began, done)
                data = exc.error.data if isinstance(exc.error.data, dict) else {}
                wait = float(data.get("retry_after_s", 1.0))
            else:
                calls.add(kind, "error", began, done, f"MCP error {exc.code}: {exc.error.message}")
                wait = 0.5
        except Exception as exc:  # counted and shown, the agent goes on
            calls.add(kind, "error", began, time.perf_counter(), f"{type(exc).__name__}: {exc}")
            wait = 0.5
        else:
            done = time.perf_counter()
            if result.is_error:
                text = result.content[0].text if result.content else ""
                calls.add(kind, "error", began, done, f"{kind}: {text}")
            else:
                calls.add(kind, "ok", began, done)
        current[0] = None
        if wait:  # as told (a refusal) or a pause after an error, never past the step's end
            await anyio.sleep(max(0.0, min(wait, stop_at[0] - time.perf_counter())))


#: agents per client process: one Python process running many more MCP sessions than this
#: falls behind on a small machine (its event loop wakes late) and then measures itself
AGENTS_PER_CLIENT = 32
#: indices of texts a step reserves (far more than a step asks)
BLOCK = 10_000_000


async def _client(url: str, tokens: Sequence[str], texts: Texts, timeout: float,
                  pipe: Any) -> tuple[Calls, float]:
    """This client process's agents: all opened, say so on ``pipe``, receive the window
    (start, stop) in perf_counter seconds (the system's monotonic clock, the same in every
    process), call until stop; the calls and this process's CPU seconds within the window."""
    calls = Calls()
    go = anyio.Event()
    all_open = anyio.Event()
    stop_at = [float("inf")]
    opening = anyio.Semaphore(OPENING)
    count = 0

    def opened() -> None:
        nonlocal count
        count += 1
        if count == len(tokens):
            all_open.set()

    def cpu_now() -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        return own.ru_utime + own.ru_stime

    async def probe(start: float) -> None:  # how late this process's own loop wakes: is it keeping up?
        while time.perf_counter() < stop_at[0]:
            asked = time.perf_counter()
            await anyio.sleep(PROBE_S)
            if asked >= start:
                calls.lag_ms.append(max(0.0, (time.perf_counter() - asked - PROBE_S) * 1000))

    async with anyio.create_task_group() as tasks:
        for k, token in enumerate(tokens):
            tasks.start_soon(agent, k, url, token, texts, calls, timeout, opening, opened, go, stop_at)
        with anyio.fail_after(300):
            await all_open.wait()
        pipe.send("ready")
        start, stop = await anyio.to_thread.run_sync(pipe.recv)
        stop_at[0] = stop
        go.set()
        tasks.start_soon(probe, start)
        await anyio.sleep(max(0.0, start - time.perf_counter()))
        before = cpu_now()
        await anyio.sleep(max(0.0, stop - time.perf_counter()))
        spent = cpu_now() - before
    return calls, spent


def client_main(url: str, tokens: Sequence[str], questions: Sequence[str], turns: Sequence[str],
                start: int, stride: int, timeout: float, pipe: Any) -> None:
    """A client process (``multiprocessing``, spawned): its agents, then its calls on ``pipe``."""
    raise_file_limit()
    texts = Texts(questions, turns, start=start, stride=stride)
    calls, spent = anyio.run(_client, url, tokens, texts, timeout, pipe, backend_options={"use_uvloop": True})
    pipe.send((calls.rows, calls.errors, calls.lag_ms, spent))  # plain values: this module is __mp_main__ here
    pipe.close()


def http_step(server: Server, store: Any, tokens: Sequence[str], texts: Texts, agents: int, warmup: float,
              duration: float, timeout: float, cpu: Cpu, window: Callable[[bool], None] = lambda on: None) -> Step:
    """C agents against one server, AGENTS_PER_CLIENT to a client process; then the wait for
    the remembered texts' vectors. ``window(True)`` and ``window(False)`` are called as the
    measured window opens and closes. The client CPU is the client processes' within the window."""
    import multiprocessing

    processes = max(1, -(-agents // AGENTS_PER_CLIENT))
    first = texts.reserve(BLOCK)
    context = multiprocessing.get_context("spawn")
    pipes, children = [], []
    for i in range(processes):
        ours, theirs = context.Pipe()
        child = context.Process(target=client_main, daemon=True, args=(
            server.url, list(tokens[i:agents:processes]), texts.questions, texts.turns, first + i, processes,
            timeout, theirs))
        child.start()
        pipes.append(ours)
        children.append(child)
    try:
        for pipe in pipes:
            if not pipe.poll(360) or pipe.recv() != "ready":
                raise RuntimeError("a client process did not open its sessions")
        start = time.perf_counter() + warmup
        stop = start + duration
        for pipe in pipes:
            pipe.send((start, stop))
        time.sleep(max(0.0, start - time.perf_counter()))
        before = cpu.read()
        window(True)
        time.sleep(max(0.0, stop - time.perf_counter()))
        window(False)
        spent = Cpu.spent(before, cpu.read())
        calls = Calls()
        client_cpu = 0.0
        for pipe in pipes:
            if not pipe.poll(timeout + 60):
                raise RuntimeError("a client process did not report its calls")
            rows, errors, lag_ms, part_cpu = pipe.recv()
            calls.rows += rows
            calls.errors += errors[: max(0, 5 - len(calls.errors))]
            calls.lag_ms += lag_ms
            client_cpu += part_cpu
    finally:
        for child in children:
            child.join(timeout=30)
            if child.is_alive():
                child.kill()
    spent["client"] = client_cpu + spent.get("client", 0.0)
    before = cpu.read()
    drained = drain(store)
    spent = {k: v + Cpu.spent(before, cpu.read()).get(k, 0.0) for k, v in spent.items()}
    return Step(server.name, agents, (start, stop), calls, spent, drained)


# --- the floors ----------------------------------------------------------------------------


def floor_step(store: Any, agents: int, warmup: float, duration: float, cpu: Cpu, *,
               texts: Texts | None, vectors: np.ndarray) -> Step:
    """C threads in a closed loop over min(C, FLOOR_CONNECTIONS) connections: the bare top-10,
    each call first embedding a new question when ``texts`` is given."""
    from pgvector.psycopg import register_vector
    from psycopg_pool import ConnectionPool

    query = common.sql("bench_bare_hnsw")
    embedder = store.embedder.inner
    size = min(agents, FLOOR_CONNECTIONS)
    calls = Calls()
    lock = threading.Lock()
    go = threading.Event()
    window = [0.0, 0.0]
    picks = itertools.count()

    def loop() -> None:
        mine: list[tuple[str, str, float, float]] = []
        go.wait()
        try:
            while (began := time.perf_counter()) < window[1]:
                if texts is not None:
                    vector = embedder.embed([texts.question()])[0]
                else:
                    vector = vectors[next(picks) % len(vectors)]
                with pool.connection() as conn:
                    conn.execute(query, {"embedding": vector}, prepare=True).fetchall()
                mine.append(("recall", "ok", began, time.perf_counter()))
        except Exception as exc:  # shown with the step, not lost in a thread
            calls.add("recall", "error", began, time.perf_counter(), f"{type(exc).__name__}: {exc}")
        with lock:
            calls.rows.extend(mine)

    with ConnectionPool(store.db.dsn, min_size=size, max_size=size, kwargs={"autocommit": True},
                        configure=register_vector, open=True) as pool:
        pool.wait(timeout=60)
        threads = [threading.Thread(target=loop, daemon=True) for _ in range(agents)]
        for thread in threads:
            thread.start()
        window[0] = time.perf_counter() + warmup
        window[1] = window[0] + duration
        go.set()
        time.sleep(warmup)
        before = cpu.read()
        time.sleep(max(0.0, window[1] - time.perf_counter()))
        after = cpu.read()
        for thread in threads:
            thread.join()
    return Step(EMBEDDED_FLOOR if texts is not None else FLOOR, agents, (window[0], window[1]), calls,
                Cpu.spent(before, after))


# --- one agent over stdio -------------------------------------------------------------------


async def stdio_rounds(store: Any, home: Path, texts: Texts, rounds: int) -> dict[str, list[float]]:
    """``rounds`` new questions over MCP stdio and as many through the embed-and-search
    floor, alternating (the first of each pair alternating too), milliseconds."""
    env = mcp_overhead._env(store, home)
    command = [mcp_overhead._stash(), "serve", "mcp", "--transport", "stdio"]
    embedder = store.embedder.inner
    samples: dict[str, list[float]] = {"stdio": [], EMBEDDED_FLOOR: []}
    with (home / "stdio.log").open("w") as errlog:
        async with mcp_overhead.stdio_session(command, env, errlog) as session:
            await session.list_tools()
            for i in range(-5, rounds):
                for path in (("stdio", EMBEDDED_FLOOR) if i % 2 == 0 else (EMBEDDED_FLOOR, "stdio")):
                    question = texts.question()
                    if path == "stdio":
                        elapsed = await mcp_overhead.timed_call(
                            session, "recall", {"query": question, "namespaces": NAMESPACE})
                    else:
                        elapsed = common.timed(
                            lambda q=question: recall_service.bare_hnsw(store, embedder.embed([q])[0]))[0]
                    if i >= 0:
                        samples[path].append(elapsed)
    return samples


# --- the run --------------------------------------------------------------------------------


def parse_counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"a comma-separated list of counts, not {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError("counts are at least 1")
    return counts


def arguments(argv: list[str] | None, description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--agents", type=parse_counts, default=None,
                        help="agent counts, one step each (default 1,4,16,64,256; --quick: 1,16,64,256)")
    parser.add_argument("--workers", type=parse_counts, default=(1, 2),
                        help="Stash HTTP worker counts, each its own server (default 1,2)")
    parser.add_argument("--embed-on-write", type=lambda text: tuple(text.split(",")), default=("auto",),
                        metavar="MODES", help="STASH_EMBED_ON_WRITE of the servers, each mode its own server per "
                        "worker count, e.g. auto,sync (default auto: the product's default)")
    parser.add_argument("--duration", type=float, default=None, help="measured seconds a step (default 20; --quick 8)")
    parser.add_argument("--warmup", type=float, default=None, help="seconds a step runs before (default 4; --quick 2)")
    parser.add_argument("--timeout", type=float, default=10.0, help="a call with no answer by then is a timeout (10 s)")
    parser.add_argument("--turns", type=int, default=TURNS, help=f"episodes in the namespace (default {TURNS:,})")
    parser.add_argument("--stdio-rounds", type=int, default=None,
                        help="new questions over MCP stdio vs the floor (default 150; --quick 50; 0: skip)")
    parser.add_argument("--skip-floors", action="store_true", help="Stash only (no floors: no ratios)")
    parser.add_argument("--quick", action="store_true", help="fewer steps, shorter: a few minutes")
    args = parser.parse_args(argv)
    if set(args.embed_on_write) - {"auto", "sync", "async"}:
        parser.error(f"--embed-on-write takes auto, sync and async, not {','.join(args.embed_on_write)}")
    quick = args.quick
    args.agents = args.agents or (QUICK_AGENTS if quick else AGENTS)
    args.duration = args.duration or (8.0 if quick else 20.0)
    args.warmup = args.warmup if args.warmup is not None else (2.0 if quick else 4.0)
    args.stdio_rounds = args.stdio_rounds if args.stdio_rounds is not None else (50 if quick else 150)
    return args


@contextlib.contextmanager
def prepared_store(turns: int) -> Iterator[tuple[Any, Texts, np.ndarray, Path]]:
    """A fresh store holding the turns in NAMESPACE, the texts, the floor's vectors, a home."""
    data = conversations.load()
    chosen = data["turns"][:turns]
    questions = [q["query"] for q in data["questions"]]
    texts = Texts(questions, [t["content"] for t in data["turns"]])
    base = common.dataset_vectors(questions)
    vectors = common.noisy_copies(base, 5_000, np.random.default_rng(57), noise=0.1)
    with common.fresh_store("minilm-int8") as store, tempfile.TemporaryDirectory(prefix="stash-capacity-") as tmp:
        started = time.perf_counter()
        load(store, chosen)
        store.embedder.inner.embed(["the model loaded before any step"])  # the floors' first call
        common.log(f"loaded {len(chosen):,} turns into {NAMESPACE} in {time.perf_counter() - started:.0f} s")
        yield store, texts, vectors, Path(tmp)


def make_tokens(store: Any, count: int) -> list[str]:
    from stash_pipeline import auth

    return [auth.create_token(store, ["/bench"], ["read", "write"], f"agent {k}")["token"] for k in range(count)]


def measure(args: argparse.Namespace) -> tuple[list[Step], dict[str, list[float]], dict[str, Any]]:
    files = raise_file_limit()
    steps: list[Step] = []
    stdio: dict[str, list[float]] = {}
    with prepared_store(args.turns) as (store, texts, vectors, home), contextlib.ExitStack() as running:
        tokens = make_tokens(store, max(args.agents))
        servers = []
        for count in args.workers:
            for mode in args.embed_on_write:
                started = time.perf_counter()
                servers.append(running.enter_context(stash_server(store, home, count, vectors=mode)))
                common.log(f"{servers[-1].name}: ready in {time.perf_counter() - started:.0f} s")
        cpu = Cpu(server_pids(servers), postmaster_pid(store))
        for agents in args.agents:
            for server in servers:
                steps.append(http_step(server, store, tokens, texts, agents, args.warmup, args.duration,
                                       args.timeout, cpu))
                report(steps[-1])
            if not args.skip_floors:
                for embedded in (False, True):
                    steps.append(floor_step(store, agents, args.warmup, args.duration, cpu,
                                            texts=texts if embedded else None, vectors=vectors))
                    report(steps[-1])
        running.close()  # the HTTP servers stop before the stdio one starts
        if args.stdio_rounds:
            stdio = anyio.run(stdio_rounds, store, home, texts, args.stdio_rounds)
            common.log(f"stdio: {args.stdio_rounds} rounds, load average {os.getloadavg()[0]:.1f}")
    return steps, stdio, {"files": files}


def report(step: Step) -> None:
    recall = step.latencies("recall")
    common.log(f"{step.agents:>3} agents, {step.path}: {step.rate():.1f} calls/s, recall p50/p95 "
               f"{p(recall, 50) if isinstance(p(recall, 50), str) else f'{p(recall, 50):.0f}'}/"
               f"{p(recall, 95) if isinstance(p(recall, 95), str) else f'{p(recall, 95):.0f}'} ms, "
               f"busy {step.count('busy')}, timeouts {step.count('timeout')}, errors {step.count('error')}, "
               f"load average {os.getloadavg()[0]:.1f}")
    for error in step.calls.errors[:2]:
        common.log(f"    error: {error}")


def judge(steps: list[Step], stdio: dict[str, list[float]]) -> list[list[Any]]:
    """The issue's targets, each against this run's figures."""
    rows: list[list[Any]] = []
    floors = {s.agents: s for s in steps if s.path == EMBEDDED_FLOOR}
    ours = [s for s in steps if s.path.startswith(STASH)]
    for step in ours:
        recall95 = p(step.latencies("recall"), 95)
        floor = floors.get(step.agents)
        if step.agents == 16:
            target = "≥ 0.8 of the embed-and-search floor's calls/s, recall p95 ≤ 250 ms"
            if floor is None or not floor.rate() or not isinstance(recall95, float):
                rows.append([f"16 agents, {step.path}", target,
                             f"{step.rate():.1f} calls/s, recall p95 {recall95 if isinstance(recall95, str) else f'{recall95:.0f}'} ms; "
                             "no floor in this run", "not judged"])
            else:
                ratio = step.rate() / floor.rate()
                met = ratio >= 0.8 and recall95 <= 250
                rows.append([f"16 agents, {step.path}", target,
                             f"{ratio:.2f} of the floor ({step.rate():.1f} vs {floor.rate():.1f} calls/s), "
                             f"recall p95 {recall95:.0f} ms", "met" if met else "**missed**"])
        if step.agents == 64:
            timeouts = step.count("timeout")
            met = timeouts == 0 and isinstance(recall95, float) and recall95 <= 1000
            rows.append([f"64 agents, {step.path}", "no timeouts, recall p95 ≤ 1 s",
                         f"{timeouts} timeouts, recall p95 {recall95 if isinstance(recall95, str) else f'{recall95:.0f}'} ms",
                         "met" if met else "**missed**"])
        if step.agents == 256:
            late = step.over(2.0)
            met = late == 0 and step.count("error") == 0
            rows.append([f"256 agents, {step.path}", "every call answered or refused busy within 2 s, no timeout",
                         f"{late} of {len(step._within())} calls past 2 s ({step.over(2.0, 'ok')} answers, "
                         f"{step.over(2.0, 'busy')} refusals; {step.count('timeout')} timeouts), "
                         f"{step.count('error')} errors, slowest answer {step.slowest_s():.2f} s, "
                         f"{step.count('busy')} refused busy", "met" if met else "**missed**"])
    by = {(s.agents, s.path): s for s in ours}
    for agents in sorted({s.agents for s in ours}):
        one, two = by.get((agents, f"{STASH}, 1 worker")), by.get((agents, f"{STASH}, 2 workers"))
        if one and two and agents >= 16 and one.rate():
            gain = two.rate() / one.rate()
            rows.append([f"{agents} agents, 2 workers vs 1", "more than one worker scales throughput",
                         f"{two.rate():.1f} vs {one.rate():.1f} calls/s ({gain:.2f}x)",
                         "met" if gain > 1.05 else "**missed**"])
    if stdio.get("stdio") and stdio.get(EMBEDDED_FLOOR):
        ours95, floor95 = common.percentile(stdio["stdio"], 95), common.percentile(stdio[EMBEDDED_FLOOR], 95)
        rows.append(["1 agent over MCP stdio, new questions", "recall p95 ≤ 1.5x the embed-and-search floor's",
                     f"{ours95:.1f} vs {floor95:.1f} ms ({ours95 / floor95:.2f}x)",
                     "met" if ours95 <= 1.5 * floor95 else "**missed**"])
    return rows


def ms(value: float | None) -> float | str:
    return "–" if value is None else value


def tables(args: argparse.Namespace, steps: list[Step], stdio: dict[str, list[float]], conditions: str) -> None:
    floors = {s.agents: s for s in steps if s.path == EMBEDDED_FLOOR}
    rows = []
    for s in steps:
        floor = floors.get(s.agents)
        recall, remember = s.latencies("recall"), s.latencies("remember")
        cpu = [s.cpu_ms_per_call(part) for part in ("client", "server", "postgres")]
        rows.append([
            s.agents, s.path, s.rate(), p(recall, 50), p(recall, 95), p(remember, 50) if remember else "–",
            p(remember, 95) if remember else "–", s.count("busy"), s.count("timeout"), s.count("error"),
            f"{s.slowest_s():.2f}", common.ratio(s.rate(), floor.rate()) if floor else "–",
            *[ms(c) for c in cpu], f"{sum(s.cpu_s.values()) / s.seconds:.2f}",
            f"{s.drain_s:.1f}" if s.path.startswith(STASH) else "–",
            p(s.calls.lag_ms, 95) if s.calls.lag_ms else "–",
        ])
    common.print_table(
        f"Closed loop, {args.duration:g} s a step after {args.warmup:g} s of warm-up ({conditions})",
        ["agents", "path", "calls/s", "recall p50 ms", "recall p95 ms", "remember p50 ms", "remember p95 ms",
         "busy", "timeouts", "errors", "slowest answer s", "calls/s ÷ embed + top-10", "CPU ms/call client",
         "CPU ms/call Stash", "CPU ms/call PostgreSQL", "cores busy", "vectors drained after, s",
         "client loop lag p95 ms"],
        rows)
    ours = [s for s in steps if s.path.startswith(STASH)]
    counts = sorted(set(args.workers))
    if len(counts) > 1:
        by = {(s.agents, s.path): s for s in ours}
        names = [f"{STASH}, {w} worker{'s' if w > 1 else ''}" for w in counts]
        worker_rows = []
        for agents in args.agents:
            found = [by.get((agents, name)) for name in names]
            if None in found:
                continue
            base = found[0].rate()  # type: ignore[union-attr]
            worker_rows.append([agents, *[f"{f.rate():.1f}" for f in found],  # type: ignore[union-attr]
                                *[common.ratio(f.rate(), base) for f in found[1:]],  # type: ignore[union-attr]
                                *[p(f.latencies("recall"), 95) for f in found]])  # type: ignore[union-attr]
        common.print_table(
            "Workers: calls/s and recall p95 by worker count, same steps",
            ["agents", *[f"{w} calls/s" for w in counts], *[f"{w} vs {counts[0]}" for w in counts[1:]],
             *[f"{w} recall p95 ms" for w in counts]],
            worker_rows)
    if stdio:
        floor = common.summarize(stdio[EMBEDDED_FLOOR])
        common.print_table(
            f"One agent over MCP stdio, new questions, recall only, vs the embed-and-search floor, ms "
            f"({len(stdio['stdio'])} rounds)",
            ["path", "n", "p50", "p95", "p50 / floor", "p95 / floor"],
            [[path, s["n"], s["p50"], s["p95"], common.ratio(s["p50"], floor["p50"]), common.ratio(s["p95"], floor["p95"])]
             for path, s in ((path, common.summarize(v)) for path, v in stdio.items())])
    verdicts = judge(steps, stdio)
    if verdicts:
        common.print_table("Against the targets", ["what", "target", "this run", "verdict"], verdicts)


def plot(steps: list[Step]) -> None:
    paths = list(dict.fromkeys(s.path for s in steps))

    def series(path: str, value: Callable[[Step], Any]) -> tuple[list[int], list[float]]:
        chosen = [s for s in steps if s.path == path]
        points = [(s.agents, value(s)) for s in chosen]
        points = [(a, v) for a, v in points if isinstance(v, float | int)]
        return [a for a, _ in points], [float(v) for _, v in points]

    def draw_rate(ax: Any) -> None:
        for path in paths:
            ax.plot(*series(path, Step.rate), marker="o", label=path)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("agents (closed loop)")
        ax.set_ylabel("calls answered / s")
        ax.set_yscale("log")
        ax.set_title("Capacity: calls/s by agents, Stash and the floors")
        ax.legend(fontsize=8)

    def draw_p95(ax: Any) -> None:
        for path in paths:
            ax.plot(*series(path, lambda s: p(s.latencies("recall"), 95)), marker="o", label=path)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("agents (closed loop)")
        ax.set_ylabel("recall p95, ms")
        ax.set_title("Capacity: recall p95 by agents (answered calls)")
        ax.legend(fontsize=8)

    common.save_plot("capacity_calls", draw_rate)
    common.save_plot("capacity_p95", draw_p95)


@common.writes_results
def main(argv: list[str] | None = None) -> None:
    args = arguments(argv, __doc__.split("\n\n")[0])
    load_before = os.getloadavg()
    steps, stdio, _info = measure(args)
    load_after = os.getloadavg()
    conditions = (f"{args.turns:,} turns in one namespace, minilm-int8, {REMEMBER_SHARE:.0%} remember of new texts, "
                  f"the rest recall of new questions, client timeout {args.timeout:g} s, "
                  f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")
    tables(args, steps, stdio, conditions)
    plot(steps)


if __name__ == "__main__":
    sys.exit(main())
