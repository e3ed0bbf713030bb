"""Benchmark 7 — what the MCP layer adds to a tool call, over stdio and streamable HTTP.

    python -m bench.mcp_overhead                 # 150 rounds per tool, hash embedder
    python -m bench.mcp_overhead --rounds N
    python -m bench.mcp_overhead --embedder minilm
    python -m bench.mcp_overhead --baseline-rev REV   # also revision REV's servers, same rounds

One fresh database, served several ways at once:

* library — the function the tool calls (``episodes.remember``, ``recall_results``,
  ``facts.query``...), in this process, with the same arguments;
* stdio — ``stash serve mcp --transport stdio`` spawned as an MCP client spawns it, driven
  by the real MCP SDK client (``stdio_client`` + ``ClientSession``);
* HTTP — ``stash serve mcp --transport http`` with a bearer token, driven by the SDK's
  ``streamable_http_client`` over a real socket;
* with ``--baseline-src DIR`` or ``--baseline-rev REV`` (an older tree, ``bench/common.py``),
  the same two servers importing that tree first: before and after in the same rounds;
* the floor — a bare SDK server (``MCPServer``, one no-op tool, no database) on the
  transports Stash uses (the SDK's stdio; stateless streamable HTTP answering JSON),
  driven by the same client: what any server on this SDK costs per call, the
  client's own work included.

Each round calls every tool once per path, the paths in rotating order, so load drift on
the shared machine hits all of them alike; the overhead of a path is the median over
rounds of (its call − the same round's library call). Embedder: the hash embedder by
default, so the model's run time does not drown the difference.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio

from bench import common
from bench.data import generate

NAMESPACE = "/bench/mcp"
EPISODES = 500
FACTS = 60
ROOT = Path(__file__).resolve().parents[1]


# --- the bare SDK server: the floor ----------------------------------------------------------


def floor_server() -> Any:
    """An MCPServer with one no-op tool: the SDK's own per-call cost, no Stash code."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("floor", log_level="WARNING")

    @server.tool()
    async def noop() -> dict[str, Any]:
        """Do nothing."""
        return {"ok": True}

    return server


def serve_floor(transport: str, port: int) -> None:
    """Run the floor server (``--serve-floor``) on the transports Stash uses: the SDK's
    stdio, or stateless streamable HTTP answering JSON on ``port``."""
    server = floor_server()
    if transport == "stdio":
        anyio.run(server.run_stdio_async)
        return
    import uvicorn

    app = server.streamable_http_app(stateless_http=True, json_response=True)
    uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")).run()


# --- processes and clients ---------------------------------------------------------------------


def _env(store: Any, home: Path) -> dict[str, str]:
    settings = store.settings
    return {
        **os.environ,
        "STASH_DATABASE_URL": settings.database_url,
        "STASH_EMBEDDER": settings.embedder,
        "STASH_VECTOR_DIM": str(settings.vector_dim),
        "STASH_HOME": str(home),
        "STASH_ENV_FILE": "/nonexistent/.env",
        "STASH_LOG_LEVEL": "warning",
    }


def _stash() -> str:
    return str(Path(sys.executable).with_name("stash"))


@contextlib.contextmanager
def http_process(command: list[str], env: dict[str, str], port: int, log_path: Path) -> Iterator[str]:
    """A server process on 127.0.0.1:``port``, up once its port answers; terminated after."""
    import httpx2

    with log_path.open("w") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 90
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"server exited: {log_path.read_text()}")
                try:
                    httpx2.get(base + "/", timeout=1)
                    break
                except httpx2.HTTPError:
                    if time.monotonic() > deadline:
                        raise RuntimeError("server did not start") from None
                    time.sleep(0.2)
            yield base + "/mcp"
        finally:
            common.stop_process(process, 15)


@contextlib.asynccontextmanager
async def stdio_session(command: list[str], env: dict[str, str], errlog: Any) -> AsyncIterator[Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(ROOT))
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def http_session(url: str, token: str | None) -> AsyncIterator[Any]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


# --- the tools measured ------------------------------------------------------------------------


def fill(store: Any) -> dict[str, Any]:
    """Episodes and asserted facts to read; returns ids and texts the calls use."""
    from stash_pipeline.memory import episodes, facts, namespaces

    data = generate.load()
    texts = [e["content"] for e in data["episodes"]]
    namespaces.create(store, NAMESPACE)
    episode_ids: list[int] = []
    for start in range(0, EPISODES, 250):
        batch = [{"content": f"{texts[i % len(texts)]} [{i}]"} for i in range(start, min(EPISODES, start + 250))]
        episode_ids += [r.id for r in episodes.remember_batch(store, NAMESPACE, batch)]
    fact_ids = [
        facts.assert_fact(store, NAMESPACE, f"{f['content']} [{i}]").fact.id
        for i, f in zip(range(FACTS), data["facts"] * 10, strict=False)
    ]
    return {
        "texts": texts,
        "questions": [q["query"] for q in data["questions"]],
        "fact_id": fact_ids[len(fact_ids) // 2],
        "episode_id": episode_ids[len(episode_ids) // 2],
    }


def calls(store: Any, fixture: dict[str, Any]) -> dict[str, Callable[[int, str], tuple[dict[str, Any], Callable[[], Any]]]]:
    """Per tool: (round, path) → (MCP arguments, the same call in the library)."""
    from stash_pipeline import recall as recall_module
    from stash_pipeline.memory import episodes, facts
    from stash_pipeline.memory.namespaces import list_

    texts, questions = fixture["texts"], fixture["questions"]

    def remember(i: int, path: str) -> tuple[dict[str, Any], Callable[[], Any]]:
        text = f"{texts[i % len(texts)]} (round {i}, {path})"  # new every call: never a repeat
        return {"content": text, "namespace": NAMESPACE}, lambda: episodes.remember(store, NAMESPACE, text)

    def recall(i: int, path: str) -> tuple[dict[str, Any], Callable[[], Any]]:
        query = questions[i % len(questions)]
        return (
            {"query": query, "namespaces": NAMESPACE},
            lambda: recall_module.recall_results(store, query, [NAMESPACE]),
        )

    def query_facts(i: int, path: str) -> tuple[dict[str, Any], Callable[[], Any]]:
        return (
            {"namespaces": NAMESPACE, "limit": 20},
            lambda: facts.query(store, [NAMESPACE], limit=20, offset=0),
        )

    def get_fact(i: int, path: str) -> tuple[dict[str, Any], Callable[[], Any]]:
        return {"id": fixture["fact_id"]}, lambda: facts.get(store, fixture["fact_id"], None)

    def get_episode(i: int, path: str) -> tuple[dict[str, Any], Callable[[], Any]]:
        return {"id": fixture["episode_id"]}, lambda: episodes.get(store, fixture["episode_id"], None)

    def list_namespaces(i: int, path: str) -> tuple[dict[str, Any], Callable[[], Any]]:
        return {"namespaces": "/bench", "limit": 50}, lambda: list_(store, ["/bench"], 50, 0)

    def assert_fact(i: int, path: str) -> tuple[dict[str, Any], Callable[[], Any]]:
        text = f"Asserted in round {i} on {path}: the bench runs on two cores"
        return (
            {"content": text, "namespace": NAMESPACE},
            lambda: facts.assert_fact(store, NAMESPACE, text),
        )

    return {
        "remember": remember,
        "recall": recall,
        "query_facts": query_facts,
        "get_fact": get_fact,
        "get_episode": get_episode,
        "list_namespaces": list_namespaces,
        "assert_fact": assert_fact,
    }


async def timed_call(session: Any, tool: str, arguments: dict[str, Any]) -> float:
    started = time.perf_counter()
    result = await session.call_tool(tool, arguments)
    elapsed = (time.perf_counter() - started) * 1000.0
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {result.content[0].text if result.content else ''}")
    return elapsed


# --- the run ------------------------------------------------------------------------------------

FLOOR = "noop (bare SDK)"


@contextlib.asynccontextmanager
async def servers(
    store: Any, home: Path, baseline_src: Path | None
) -> AsyncIterator[dict[str, Any]]:
    """MCP client sessions by path: Stash over stdio and HTTP (and the baseline's), the floor."""
    from stash_pipeline import auth

    env = _env(store, home)
    token = auth.create_token(store, ["/bench"], ["read", "write"], "bench")["token"]
    python = sys.executable
    stash = [_stash(), "serve", "mcp", "--transport"]
    floor = [python, "-m", "bench.mcp_overhead", "--serve-floor"]
    kinds: dict[str, tuple[list[str], dict[str, str]]] = {"": (stash, env), "floor ": (floor, env)}
    if baseline_src is not None:
        # the same console script, importing the package from the older tree first
        kinds["before "] = (stash, {**env, "PYTHONPATH": str(baseline_src)})
    sessions: dict[str, Any] = {}
    with contextlib.ExitStack() as processes, (home / "stdio.log").open("w") as errlog:
        async with contextlib.AsyncExitStack() as clients:
            for prefix, (command, environment) in kinds.items():
                port = common._free_port()
                url = processes.enter_context(http_process(
                    [*command, "http", "--port", str(port)], environment, port, home / f"{prefix or 'stash '}http.log",
                ))
                sessions[prefix + "stdio"] = await clients.enter_async_context(
                    stdio_session([*command, "stdio"], environment, errlog)
                )
                sessions[prefix + "http"] = await clients.enter_async_context(
                    http_session(url, None if prefix == "floor " else token)
                )
                sessions[prefix + "url"] = url
            yield sessions


async def measure(
    store: Any, fixture: dict[str, Any], rounds: int, home: Path, baseline_src: Path | None
) -> dict[str, dict[str, list[float]]]:
    """Per tool and path, the milliseconds of every round (rounds interleave all paths)."""
    tools = calls(store, fixture)
    async with servers(store, home, baseline_src) as sessions:
        urls = {p: sessions.pop(p) for p in list(sessions) if p.endswith("url")}
        paths = ["library", *(p for p in sessions if not p.startswith("floor "))]
        samples = {name: {path: [] for path in paths} for name in tools}
        samples[FLOOR] = {"library": [], "stdio": [], "http": []}
        for i in range(-3, rounds):  # three rounds of warm-up (imports, pools, plans), not kept
            for name, make in tools.items():
                for k in range(len(paths)):
                    path = paths[(i + k) % len(paths)]  # rotate which path goes first
                    arguments, library_call = make(i, path)
                    if path == "library":
                        elapsed = common.timed(library_call)[0]
                    else:
                        elapsed = await timed_call(sessions[path], name, arguments)
                    if i >= 0:
                        samples[name][path].append(elapsed)
            floor = [await timed_call(sessions[f"floor {t}"], "noop", {}) for t in ("stdio", "http")]
            if i >= 0:
                samples[FLOOR]["library"].append(0.0)
                samples[FLOOR]["stdio"].append(floor[0])
                samples[FLOOR]["http"].append(floor[1])
            if (i + 1) % 25 == 0:
                common.log(f"round {i + 1}/{rounds}, load average {os.getloadavg()[0]:.1f}")
        samples["server side"] = server_side_means(urls["url"], list(tools))
    return samples


def server_side_means(mcp_url: str, tools: list[str]) -> dict[str, list[float]]:
    """Mean milliseconds inside the HTTP server's ``call_tool`` per tool (its /metrics):
    argument checks, the worker thread, the library work and the result's serialisation."""
    import httpx2

    text = httpx2.get(mcp_url.removesuffix("/mcp") + "/metrics", timeout=10).text
    totals: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        for part in ("sum", "count"):
            prefix = f"stash_mcp_tool_duration_seconds_{part}{{tool=\""
            if line.startswith(prefix):
                name, value = line[len(prefix):].split("\"}")
                totals.setdefault(name, {})[part] = float(value)
    return {name: [1000.0 * totals[name]["sum"] / totals[name]["count"]] for name in tools if name in totals}


def paired_overhead(mcp: list[float], library: list[float]) -> float:
    """The median over rounds of (MCP call − the same round's library call)."""
    return common.percentile([m - b for m, b in zip(mcp, library, strict=True)], 50)


@common.writes_results
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=150, help="calls per tool and path (default 150)")
    parser.add_argument("--embedder", choices=("hash", "minilm"), default="hash")
    common.add_baseline_arguments(parser, "its servers too, same rounds")
    parser.add_argument("--serve-floor", choices=("stdio", "http"), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_floor:
        serve_floor(args.serve_floor, args.port)
        return

    load_before = os.getloadavg()
    with common.baseline_tree(args) as baseline, common.fresh_store(args.embedder) as store, \
            tempfile.TemporaryDirectory(prefix="stash-mcp-bench-") as tmp:
        fixture = fill(store)
        common.log(f"filled {EPISODES} episodes and {FACTS} facts; {args.rounds} rounds per tool")
        samples = anyio.run(measure, store, fixture, args.rounds, Path(tmp), baseline)
    load_after = os.getloadavg()
    conditions = (
        f"{args.rounds} rounds, {args.embedder} embedder, load average {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} after"
    )

    server_side = samples.pop("server side")
    rows = []
    for name, paths in samples.items():
        lib, stdio, http = (common.summarize(paths[p]) for p in ("library", "stdio", "http"))
        rows.append([
            name, lib["p50"], lib["p95"], stdio["p50"], stdio["p95"], http["p50"], http["p95"],
            paired_overhead(paths["stdio"], paths["library"]), paired_overhead(paths["http"], paths["library"]),
        ])
    common.print_table(
        f"MCP overhead, ms ({conditions})",
        ["tool", "library p50", "library p95", "stdio p50", "stdio p95", "HTTP p50", "HTTP p95",
         "stdio − library", "HTTP − library"],
        rows,
    )
    common.print_table(
        "Inside the HTTP server's call_tool (mean ms, all calls incl. warm-up) vs the library (mean ms)",
        ["tool", "library mean", "server call_tool mean", "difference"],
        [[name, statistics.fmean(samples[name]["library"]), server_side[name][0],
          server_side[name][0] - statistics.fmean(samples[name]["library"])] for name in server_side],
    )
    if baseline is not None:
        compared = [
            [name,
             paired_overhead(paths["before stdio"], paths["library"]), paired_overhead(paths["stdio"], paths["library"]),
             paired_overhead(paths["before http"], paths["library"]), paired_overhead(paths["http"], paths["library"])]
            for name, paths in samples.items() if name != FLOOR
        ]
        floor = samples[FLOOR]
        compared.append([FLOOR, "", common.percentile(floor["stdio"], 50), "", common.percentile(floor["http"], 50)])
        common.print_table(
            f"MCP − library, p50 of paired differences, ms: before ({baseline.name}) and now ({conditions})",
            ["tool", "stdio before", "stdio now", "HTTP before", "HTTP now"],
            compared,
        )
    labels = [r[0].split(" ")[0] for r in rows]
    common.save_paired_bars(
        "mcp_overhead", "MCP overhead per call (p50, MCP − library)", labels,
        [r[7] for r in rows], [r[8] for r in rows], ours_label="stdio", baseline_label="streamable HTTP",
    )


if __name__ == "__main__":
    main()
