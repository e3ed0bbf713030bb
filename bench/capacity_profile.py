"""Where a call's time goes under load: one step of ``bench.capacity`` with the server profiled.

    python -m bench.capacity_profile                      # 16 agents, 1 worker, 20 s
    python -m bench.capacity_profile --agents 64 --workers 2 --duration 30

The same data, agents and mix as ``bench/capacity.py`` (one namespace of the conversational
turns; 80% ``recall`` of new questions, 20% ``remember`` of new texts over MCP streamable
HTTP, one session and token per agent) against ``stash serve mcp --transport http``, every
server process carrying ``bench/sampler.py`` (a ``sitecustomize`` on ``PYTHONPATH`` installs
it) for the measured window only. Tables:

1. CPU per answered call by process (the client processes, the Stash server, PostgreSQL),
   and the server's split between its event-loop thread (HTTP, MCP, JSON, the token
   check's awaits), its tool threads and its pending-vector worker; then one summary: a
   call's CPU by layer, measured where a thread's CPU or a timed function's says it, the
   event loop's parts estimated from its samples;
2. the layer timers: wall time (and thread CPU where the code runs in one thread) per tool
   call of each function wrapped (``sampler.WRAPPED``: model run, SQL round trip,
   read-your-writes embedding, grouping, shaping, argument model, pool wait, thread hop,
   result serialisation, token check, call_tool, the whole request);
3. the stack samples of each thread kind by what its innermost frame shows (running
   Python, running the ONNX graph with the GIL released, waiting on PostgreSQL, waiting for
   a pooled connection, idle), and the running ones by layer (the innermost frame of a
   named package, generic standard-library frames skipped) and by stage (the innermost
   frame that says what the work is for);
4. the innermost running functions (self time), all threads.

Samples are wall-clock: a thread running Python and one waiting for the GIL look alike, so
the shares say where the interpreter's time goes, and the CPU table says how much there
is. The profiler's own cost (a tick at ``--hz``, the wrappers) is in the figures: compare
the calls/s here with ``bench.capacity``'s.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from bench import capacity, common, sampler

#: innermost-frame kinds: what a thread was doing when sampled
IDLE_LEAVES = {
    "stdlib/threading.py:wait", "stdlib/threading.py:_wait_for_tstate_lock", "stdlib/queue.py:get",
    "stdlib/selectors.py:select", "stdlib/asyncio/runners.py:run", "stdlib/asyncio/base_events.py:run_forever",
    "stdlib/asyncio/base_events.py:_run_once", "stdlib/threading.py:_bootstrap_inner",
}
WAIT_PG = ("psycopg/connection.py:wait", "psycopg/waiting.py:", "psycopg/pq/")
NATIVE_ONNX = "onnxruntime/capi/onnxruntime_inference_collection.py:run"

#: frames passed over when looking for the layer (generic helpers: the caller says more)
GENERIC = (
    "stdlib/typing.py", "stdlib/abc.py", "stdlib/functools.py", "stdlib/contextlib.py", "stdlib/enum.py",
    "stdlib/re/", "stdlib/dataclasses.py", "stdlib/copy.py", "stdlib/collections/", "stdlib/weakref.py",
    "stdlib/_weakrefset.py", "stdlib/threading.py", "stdlib/inspect.py", "<frozen", "typing_extensions.py",
    "numpy/", "stdlib/hashlib.py", "stdlib/uuid.py", "stdlib/encodings/", "stdlib/codecs.py",
    "bench/sampler.py", "stdlib/string.py", "stdlib/datetime.py", "stdlib/operator.py",
)
#: (file prefix, layer): the innermost frame matching one names the layer
LAYERS = (
    ("onnxruntime/", "embedding: ONNX forward pass"),
    ("tokenizers/", "embedding: tokenise, pool, normalise"),
    ("stash_pipeline/embedding/", "embedding: tokenise, pool, normalise"),
    ("psycopg_pool/", "PostgreSQL client (psycopg, pool, Stash's gateway)"),
    ("psycopg/", "PostgreSQL client (psycopg, pool, Stash's gateway)"),
    ("pgvector/", "PostgreSQL client (psycopg, pool, Stash's gateway)"),
    ("stash_pipeline/db/", "PostgreSQL client (psycopg, pool, Stash's gateway)"),
    ("stash_pipeline/recall/grouping.py", "recall: grouping and answer shaping"),
    ("stash_pipeline/recall/shape.py", "recall: grouping and answer shaping"),
    ("stash_pipeline/models.py", "recall: grouping and answer shaping"),
    ("stash_pipeline/auth.py", "token check"),
    ("stash_serve/token_check.py", "token check"),
    ("stash_pipeline/", "Stash library: request, validation, other"),
    ("stdlib/json/", "JSON (encode, decode)"),
    ("jsonschema/", "JSON Schema validation"),
    ("referencing/", "JSON Schema validation"),
    ("pydantic_core/", "pydantic (models, validation, serialisation)"),
    ("pydantic/", "pydantic (models, validation, serialisation)"),
    ("mcp_types/", "pydantic (models, validation, serialisation)"),
    ("stash_serve/mcp/", "Stash MCP layer (tools, calls, results)"),
    ("mcp/", "MCP SDK (transport, dispatch, tool wrapper)"),
    ("prometheus_client/", "metrics"),
    ("stash_serve/metrics.py", "metrics"),
    ("uvicorn/", "HTTP (uvicorn, h11, Starlette, Stash's HTTP layers)"),
    ("h11/", "HTTP (uvicorn, h11, Starlette, Stash's HTTP layers)"),
    ("httptools/", "HTTP (uvicorn, h11, Starlette, Stash's HTTP layers)"),
    ("starlette/", "HTTP (uvicorn, h11, Starlette, Stash's HTTP layers)"),
    ("stash_serve/http", "HTTP (uvicorn, h11, Starlette, Stash's HTTP layers)"),
    ("stash_serve/admission.py", "HTTP (uvicorn, h11, Starlette, Stash's HTTP layers)"),
    ("stash_serve/limits.py", "HTTP (uvicorn, h11, Starlette, Stash's HTTP layers)"),
    ("anyio/", "event loop and threads (asyncio, anyio)"),
    ("stdlib/asyncio/", "event loop and threads (asyncio, anyio)"),
    ("sniffio/", "event loop and threads (asyncio, anyio)"),
    ("stdlib/logging/", "logging"),
    ("stash_serve/", "Stash serving: other"),
)
#: (frame prefix, stage): the innermost frame matching one says what the work is for
STAGES = (
    ("stash_pipeline/memory/pending.py:embed_pending_in", "recall: embed episodes still pending (read your writes)"),
    ("stash_pipeline/memory/pending.py:embed_pending_batch", "pending-vector worker: embed remembered texts"),
    ("stash_pipeline/recall/vectors.py:query_vector", "recall: embed the question"),
    ("stash_pipeline/recall/vectors.py:embedded_text", "recall: names to mask (round trip)"),
    ("stash_pipeline/recall/statement.py:round_trip", "recall: search round trip"),
    ("stash_pipeline/recall/grouping.py", "recall: grouping and shaping"),
    ("stash_pipeline/recall/shape.py", "recall: grouping and shaping"),
    ("stash_pipeline/memory/episodes.py:remember", "remember: the library call"),
    ("stash_pipeline/operations/base.py:parse", "arguments model (Operation.parse)"),
    ("stash_pipeline/recall/", "recall: request, parameters, other"),
    ("stash_serve/mcp/calls.py:result", "tool result serialisation (ToolCalls.result)"),
    ("stash_serve/token_check.py", "token check"),
    ("stash_pipeline/auth.py", "token check"),
    ("mcp/server/mcpserver/utilities/func_metadata.py", "MCP SDK: tool arguments and result (func_metadata)"),
    ("mcp/server/mcpserver/tools/", "MCP SDK: tool arguments and result (func_metadata)"),
    ("mcp/server/streamable_http", "MCP SDK: streamable HTTP transport"),
    ("mcp/", "MCP SDK: dispatch, session, models"),
    ("stash_serve/mcp/", "Stash MCP layer: other"),
    ("stash_serve/admission.py", "HTTP: admission, auth, body limit, app"),
    ("stash_serve/http", "HTTP: admission, auth, body limit, app"),
    ("starlette/", "HTTP: admission, auth, body limit, app"),
    ("uvicorn/", "HTTP: uvicorn and h11 (parse, write)"),
    ("h11/", "HTTP: uvicorn and h11 (parse, write)"),
    ("prometheus_client/", "metrics"),
)


def state(stack: list[str]) -> str:
    """What the innermost frame shows the thread doing."""
    leaf = stack[-1]
    if leaf.startswith(NATIVE_ONNX):
        return "running the ONNX graph (GIL released)"
    if leaf.startswith(WAIT_PG):
        return "waiting on PostgreSQL"
    if leaf in IDLE_LEAVES:
        if any(frame.startswith(("psycopg_pool/pool.py:getconn", "psycopg_pool/pool.py:_getconn")) for frame in stack):
            return "waiting for a pooled connection"
        if leaf == "stdlib/asyncio/runners.py:run":
            return "in the event loop's C code (waiting for I/O, or uvloop's own work)"
        return "idle (waiting for work)"
    return "running Python (or waiting for the GIL)"


RUNNING = ("running Python (or waiting for the GIL)", "running the ONNX graph (GIL released)")


def layer(stack: list[str]) -> str:
    for frame in reversed(stack):
        if frame.startswith(GENERIC):
            continue
        for prefix, name in LAYERS:
            if frame.startswith(prefix):
                return name
        return f"other ({frame.split(':')[0]})"
    return "other"


def stage(stack: list[str]) -> str:
    for frame in reversed(stack):
        for prefix, name in STAGES:
            if frame.startswith(prefix):
                return name
    return "other (event loop, threads)"


def leaf_function(stack: list[str]) -> str:
    for frame in reversed(stack):
        if not frame.startswith(GENERIC):
            return frame
    return stack[-1]


#: the timers whose thread CPU does not overlap (each call's tool-thread work, in parts)
TOOL_PARTS = (
    ("embedding (model run: questions, remembered texts, pending episodes)", "embedder: model run (CachedEmbedder.compute)"),
    ("recall's search round trip (client side: send, wait, rows)", "recall: SQL round trip (round_trip)"),
    ("recall's names-to-mask round trip", "recall: names to mask (embedded_text)"),
    ("remember's round trip", "remember: library call (episodes.remember)"),
    ("grouping", "recall: grouping (grouping.group)"),
    ("answer shaping", "recall: answer shaping (shape_results)"),
    ("arguments model", "arguments model (Operation.parse)"),
    ("result serialisation", "tool result: serialise (ToolCalls.result)"),
)
#: the event loop's stages, by the stage table's names (the rest: other)
LOOP_PARTS = (
    ("token check", ("token check",)),
    ("MCP SDK (transport, dispatch, tool wrapper)", ("MCP SDK: streamable HTTP transport", "MCP SDK: dispatch, session, models",
                                                     "MCP SDK: tool arguments and result (func_metadata)")),
    ("HTTP (uvicorn, h11, admission, auth, body limit)", ("HTTP: uvicorn and h11 (parse, write)",
                                                          "HTTP: admission, auth, body limit, app")),
    ("Stash's MCP layer", ("Stash MCP layer: other", "tool result serialisation (ToolCalls.result)")),
)


def summary(step: capacity.Step, timers: dict[str, list[float]], cpu_by_thread: Counter[str],
            samples: list[tuple[str, list[str], int]], tool_calls: int) -> None:
    """One table: a call's CPU by layer, ms per tool call. Measured: each process's CPU,
    each thread kind's, and the thread CPU of the timed functions; estimated: the event
    loop's parts, its CPU split by its running samples' stages."""
    if not tool_calls:
        return
    per_call = {part: step.cpu_ms_per_call(part) for part in ("client", "server", "postgres")}
    rows: list[list[Any]] = [["PostgreSQL (every backend)", capacity.ms(per_call["postgres"]), "measured"],
                             ["the agents' MCP SDK client", capacity.ms(per_call["client"]), "measured"]]
    tool_ms = 1000 * cpu_by_thread.get("tool threads", 0.0) / tool_calls
    named = 0.0
    for label, timer in TOOL_PARTS:
        value = 1000 * timers[timer][2] / tool_calls if timer in timers else 0.0
        named += value
        rows.append([f"Stash tool threads: {label}", value, "measured (thread CPU)"])
    rows.append(["Stash tool threads: the rest (pool checkout, thread start, library code between)",
                 max(0.0, tool_ms - named), "measured, less the parts above"])
    loop_ms = 1000 * cpu_by_thread.get("event loop", 0.0) / tool_calls
    loop_samples: Counter[str] = Counter()
    for kind, stack, n in samples:
        if kind == "event loop" and state(stack) in RUNNING:
            loop_samples[stage(stack)] += n
    total = sum(loop_samples.values())
    shared = 0.0
    for label, stages in LOOP_PARTS:
        value = loop_ms * sum(loop_samples[s] for s in stages) / total if total else 0.0
        shared += value
        rows.append([f"Stash event loop: {label}", value, "estimated (samples x the loop's CPU)"])
    rows.append(["Stash event loop: the rest (asyncio, anyio, uvloop, other)", max(0.0, loop_ms - shared),
                 "estimated"])
    for kind in ("pending-vector worker", "connection pools' own threads", "other"):
        rows.append([f"Stash {kind}", 1000 * cpu_by_thread.get(kind, 0.0) / tool_calls, "measured"])
    common.print_table("Where a call's CPU goes, ms per tool call (the tables below give the detail)",
                       ["layer", "CPU ms per call", "how"], rows)


def read_profiles(directory: Path, expected: int, wait_s: float = 15.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        found = sorted(directory.glob("profile-*.json"))
        if len(found) >= expected:
            break
        time.sleep(0.2)
    return [json.loads(path.read_text()) for path in sorted(directory.glob("profile-*.json"))]


def share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "–"


def tables(profiles: list[dict[str, Any]], step: capacity.Step, hz: float) -> None:
    answered = step.answered()
    timers: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    cpu_by_thread: Counter[str] = Counter()
    samples: list[tuple[str, list[str], int]] = []
    for profile in profiles:
        for name, t in profile["timers"].items():
            timers[name][0] += t["calls"]
            timers[name][1] += t["wall_s"]
            timers[name][2] += t["cpu_s"]
            timers[name][3] = max(timers[name][3], t["max_s"])
        cpu_by_thread.update(profile["thread_cpu_s"])
        samples += [(kind, stack.split(";"), n) for kind, stack, n in profile["samples"]]
    tool_calls = int(timers.get("MCP: StashMCPServer.call_tool", [0])[0]) or answered

    per_call = [[part, step.cpu_ms_per_call(part)] for part in ("client", "server", "postgres")]
    rows = [[f"{'the client processes (MCP SDK client)' if part == 'client' else part}", capacity.ms(v)] for part, v in per_call]
    server_total = sum(cpu_by_thread.values())
    for kind, seconds in sorted(cpu_by_thread.items(), key=lambda kv: -kv[1]):
        rows.append([f"  server: {kind} thread(s)", 1000 * seconds / tool_calls if tool_calls else "–"])
    common.print_table(
        f"CPU per answered call, ms ({step.agents} agents, {step.path}: {step.rate():.1f} calls/s under the "
        f"profiler, {answered} answered, {tool_calls} tool calls in the server; server threads from /proc, "
        f"{server_total:.1f} CPU s in all)",
        ["where", "CPU ms per call"], rows)
    summary(step, timers, cpu_by_thread, samples, tool_calls)

    rows = []
    for name, (calls, wall, cpu, longest) in sorted(timers.items(), key=lambda kv: -kv[1][1] / max(kv[1][0], 1)):
        sync = cpu > 0
        rows.append([name, int(calls), f"{calls / tool_calls:.2f}" if tool_calls else "–",
                     1000 * wall / calls if calls else 0.0, 1000 * longest,
                     1000 * wall / tool_calls if tool_calls else 0.0,
                     1000 * cpu / tool_calls if sync and tool_calls else "–"])
    common.print_table(
        "Layer timers: wall time (and the thread's CPU where the code runs in one thread) per tool call, ms",
        ["layer (wrapped function)", "calls", "per tool call", "wall ms each (mean)", "longest ms",
         "wall ms per tool call", "thread CPU ms per tool call"], rows)

    by_kind: dict[str, Counter[str]] = defaultdict(Counter)
    for kind, stack, n in samples:
        by_kind[kind][state(stack)] += n
    states = sorted({s for c in by_kind.values() for s in c})
    rows = []
    for kind, counts in sorted(by_kind.items(), key=lambda kv: -sum(kv[1].values())):
        total = sum(counts.values())
        rows.append([kind, total, *[share(counts[s], total) for s in states]])
    common.print_table(f"Stack samples by thread kind and what the innermost frame shows ({hz:g} Hz, wall clock)",
                       ["threads", "samples", *states], rows)

    for view, classify in (("layer", layer), ("stage", stage)):
        counts: dict[str, Counter[str]] = defaultdict(Counter)
        for kind, stack, n in samples:
            if state(stack) in RUNNING:
                counts[classify(stack)][kind] += n
        kinds = ["event loop", "tool threads", "pending-vector worker"]
        totals = {k: sum(c[k] for c in counts.values()) for k in kinds}
        everything = sum(sum(c.values()) for c in counts.values())
        rows = [[name, share(sum(c.values()), everything), *[share(c[k], totals[k]) for k in kinds]]
                for name, c in sorted(counts.items(), key=lambda kv: -sum(kv[1].values()))]
        common.print_table(
            f"Running samples by {view} (share of all running samples, then of each thread kind's)",
            [view, "all threads", *[f"{k} ({totals[k]} samples)" for k in kinds]], rows)

    leaves: Counter[str] = Counter()
    for _kind, stack, n in samples:
        if state(stack) in RUNNING:
            leaves[leaf_function(stack)] += n
    everything = sum(leaves.values())
    common.print_table("Innermost running functions (self time), all threads, top 25",
                       ["function", "samples", "share"],
                       [[f, n, share(n, everything)] for f, n in leaves.most_common(25)])


@common.writes_results
def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=16, help="agents in the profiled step (default 16)")
    parser.add_argument("--workers", type=int, default=1, help="Stash HTTP workers (default 1)")
    parser.add_argument("--duration", type=float, default=20.0, help="measured (profiled) seconds (default 20)")
    parser.add_argument("--warmup", type=float, default=4.0, help="seconds before, not profiled (default 4)")
    parser.add_argument("--turns", type=int, default=capacity.TURNS, help=f"episodes (default {capacity.TURNS:,})")
    parser.add_argument("--hz", type=float, default=100.0, help="stack samples a second (default 100)")
    parser.add_argument("--timeout", type=float, default=10.0, help="client timeout per call (default 10 s)")
    args = parser.parse_args(argv)
    capacity.raise_file_limit()
    load_before = os.getloadavg()
    with capacity.prepared_store(args.turns) as (store, texts, _vectors, home), \
            tempfile.TemporaryDirectory(prefix="stash-profile-") as tmp:
        hook, out = Path(tmp) / "hook", Path(tmp) / "out"
        hook.mkdir()
        out.mkdir()
        (hook / "sitecustomize.py").write_text(sampler.SITECUSTOMIZE)
        env = {"PYTHONPATH": os.pathsep.join([str(hook), str(common.ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               sampler.DIRECTORY_ENV: str(out), sampler.HZ_ENV: str(args.hz)}
        tokens = capacity.make_tokens(store, args.agents)
        with capacity.stash_server(store, home, args.workers, env) as server:
            cpu = capacity.Cpu(capacity.server_pids([server]), capacity.postmaster_pid(store))
            control = out / "on"

            def window(on: bool) -> None:
                if on:
                    control.touch()
                else:
                    control.unlink()

            step = capacity.http_step(server, store, tokens, texts, args.agents, args.warmup, args.duration,
                                      args.timeout, cpu, window)
            capacity.report(step)
            # the supervisor of several workers carries the sampler too
            profiles = read_profiles(out, args.workers + (1 if args.workers > 1 else 0))
    load_after = os.getloadavg()
    common.log(f"{len(profiles)} profiles, load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")
    recall, remember = step.latencies("recall"), step.latencies("remember")
    common.print_table(
        f"The profiled step ({args.turns:,} turns in one namespace, minilm-int8, {args.agents} agents, "
        f"{args.workers} worker(s), {args.duration:g} s, load average {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} after)",
        ["calls/s", "recall p50 ms", "recall p95 ms", "remember p50 ms", "remember p95 ms", "busy", "timeouts", "errors",
         "client loop lag p50 ms", "client loop lag p95 ms"],
        [[step.rate(), capacity.p(recall, 50), capacity.p(recall, 95), capacity.p(remember, 50),
          capacity.p(remember, 95), step.count("busy"), step.count("timeout"), step.count("error"),
          capacity.p(step.calls.lag_ms, 50), capacity.p(step.calls.lag_ms, 95)]])
    tables(profiles, step, args.hz)
    folded = save_folded(profiles)
    print(f"stacks: {folded.relative_to(common.ROOT)} (collapsed, thread kind first: for a flame graph)")


def save_folded(profiles: list[dict[str, Any]]) -> Path:
    """Every sampled stack as ``thread kind;outermost;…;innermost count`` in bench/out/."""
    counts: Counter[str] = Counter()
    for profile in profiles:
        for kind, stack, n in profile["samples"]:
            counts[f"{kind};{stack}"] += n
    common.OUT.mkdir(exist_ok=True)
    path = common.OUT / "capacity_profile.folded"
    path.write_text("".join(f"{stack} {n}\n" for stack, n in counts.most_common()), encoding="utf-8")
    return path


if __name__ == "__main__":
    sys.exit(main())
