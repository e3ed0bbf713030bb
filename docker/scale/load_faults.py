#!/usr/bin/env python3
"""Load-and-fault test of the scale profile (docker/compose.scale.yml), on loopback only.

Starts the profile under a project of its own (plus the tests' scripted model,
docker/smoke/compose.smoke.yml), then for DURATION_S seconds AGENTS concurrent agents,
spread over NAMESPACES namespaces, each loop: remember one episode with an idempotency
key, then recall. Each request ends answered, busy (the server's typed refusal: 503 or 429
with Retry-After, or the JSON-RPC error -32005; nothing of it ran), timeout (the client's
own, 30 s) or error (anything else). An agent sends the same call again, as a real one
should: after a busy refusal once the wait it asks for (its ``retry_after_s``) has passed,
after a timeout or an error 0.5 s later, each plus up to half again as jitter; a remember
keeps its key and is retried up to 60 s until acknowledged, a recall up to 30 s until
answered. Mid-run it SIGKILLs one mcp replica the balancer routes to (the container's
process, from the host, as a crash would) and later restarts PostgreSQL once. Afterwards it checks in PostgreSQL
that every acknowledged write is stored exactly once, waits for the watermark sensor's
runs (each in its own container) to consolidate every namespace, and reports:

* acknowledged writes lost and duplicated (both must be 0);
* per window (before, during and after each fault) and tool: requests sent, answered,
  busy, timeouts and other errors, the p95 of the answered ones, calls never answered
  and the p95 time to an answer (busy retries included), the most frequent failures and
  how late the client's own event loop ran; timeouts before the faults must be 0;
* runs launched / succeeded / failed, run containers, and whether any namespace had two
  runs at once (must not); each failed run with its namespace, its error and whether the
  PostgreSQL restart caught it (a run the restart caught fails by design and the sensor
  runs the namespace again; a failed run outside it must not be);
* the peak of open connections against max_connections.

Exit status 1 when a must-be-zero figure is not. Run it with the venv's python (it uses
httpx2, the MCP SDK's HTTP client): ``.venv/bin/python docker/scale/load_faults.py``. Environment: AGENTS (200),
NAMESPACES (50), DURATION_S (120), KEEP=1 leaves the stack up, SCALE_PROJECT
(stash-scale), STASH_MCP_PORT (28080), STASH_DAGSTER_PORT (23000), STASH_IMAGE
(stash-scale:latest), REPORT (a path for the JSON report); POSTGRES_PASSWORD, which the
compose file requires, is a fresh random one unless set (the stack's volumes are its own).
The Dagster UI is asked with a token with the admin right on /, created like the agents' one.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import secrets
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx

from stash_serve.admission import BUSY_CODE

DOCKER = Path(__file__).resolve().parents[1]
PROJECT = os.environ.get("SCALE_PROJECT", "stash-scale")
MCP_PORT = int(os.environ.setdefault("STASH_MCP_PORT", "28080"))
DAGSTER_PORT = int(os.environ.setdefault("STASH_DAGSTER_PORT", "23000"))
os.environ.setdefault("STASH_IMAGE", "stash-scale:latest")
os.environ.setdefault("DOCKER_GID", str(os.stat("/var/run/docker.sock").st_gid))
# the compose file has no default password; this stack (own project, own volumes) gets a fresh one
os.environ.setdefault("POSTGRES_PASSWORD", secrets.token_hex(24))
AGENTS = int(os.environ.get("AGENTS", "200"))
NAMESPACES = int(os.environ.get("NAMESPACES", "50"))
DURATION_S = float(os.environ.get("DURATION_S", "120"))
KEEP = os.environ.get("KEEP") == "1"
COMPOSE = ["docker", "compose", "-p", PROJECT, "-f", str(DOCKER / "docker-compose.yml"),
           "-f", str(DOCKER / "compose.scale.yml"), "-f", str(DOCKER / "smoke" / "compose.smoke.yml")]

#: the faults, as fractions of the run: a replica killed, PostgreSQL restarted
KILL_AT, RESTART_AT = 0.25, 0.6
#: seconds after a fault counted as "during" it
FAULT_WINDOW_S = 20
#: an agent's pause between its calls (seconds, uniform): agents think; keeps the load bounded
THINK_S = (0.5, 1.5)
#: how long a remember is retried with its key before it counts as not acknowledged
WRITE_RETRY_S = 60
#: how long a recall is retried before it counts as not answered
RECALL_RETRY_S = 30
#: the pause before sending a call again after a timeout or an error (a busy refusal says its own)
RETRY_PAUSE_S = 0.5
#: the client's own timeout per request (the server answers or refuses within 2 s of arrival)
CLIENT_TIMEOUT_S = 30
HEALTHY_TIMEOUT_S = 600
CONSOLIDATION_TIMEOUT_S = 900
PREFIX = "/load"
SENTENCES = [
    "deploys the billing service to the staging cluster",
    "prefers dark mode in the dashboard",
    "fixed the flaky integration test in the payments module",
    "moved the weekly sync to Thursday afternoon",
    "reported that the search index lags behind by an hour",
]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def compose(*args: str, check: bool = True, timeout: float = 900) -> str:
    result = subprocess.run([*COMPOSE, *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode:
        raise SystemExit(f"docker compose {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def psql(sql: str) -> list[list[str]]:
    out = compose("exec", "-T", "postgres", "psql", "-U", "stash", "-d", "stash", "-At", "-F", "\t", "-c", sql)
    return [line.split("\t") for line in out.splitlines() if line]


def containers(service: str | None = None) -> list[dict[str, Any]]:
    out = compose("ps", "-a", "--format", "json").strip()
    rows = json.loads(out) if out.startswith("[") else [json.loads(line) for line in out.splitlines() if line]
    return [r for r in rows if service is None or r["Service"] == service]


def wait_healthy() -> None:
    deadline = time.monotonic() + HEALTHY_TIMEOUT_S
    while time.monotonic() < deadline:
        state = {c["Name"]: c.get("Health") or c["State"] for c in containers()}
        pending = {n: s for n, s in state.items() if s not in ("healthy", "exited")}
        if state and not pending and len([n for n in state if "-mcp-" in n]) >= 3:
            return
        time.sleep(3)
    raise SystemExit(f"not healthy within {HEALTHY_TIMEOUT_S} s: {pending}")


# -- the agents -------------------------------------------------------------------------

#: how one request ended: answered, refused busy (the server's typed "retry after"; nothing
#: of it ran), timed out in the client, or failed otherwise (HTTP, JSON-RPC or tool error)
ANSWERED, BUSY, TIMEOUT, ERROR = "answered", "busy", "timeout", "error"


class Busy(Exception):
    """The server's typed refusal: 503 or 429 with Retry-After, or the JSON-RPC error BUSY_CODE."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"busy, retry after {retry_after_s:g} s")
        self.retry_after_s = retry_after_s


class CallFailed(RuntimeError):
    """An answer that is an error other than busy: named by its JSON-RPC code or its tool error code."""


@dataclass(frozen=True)
class Attempt:
    """One request sent: its tool, when (seconds into the run), how it ended, how long it took."""

    tool: str
    at: float
    outcome: str
    seconds: float
    detail: str = ""


@dataclass(frozen=True)
class Call:
    """One call of an agent with its retries: when it began, whether it was answered, the time to the answer."""

    tool: str
    at: float
    answered: bool
    seconds: float


@dataclass
class Tally:
    started: float = field(default_factory=time.monotonic)
    acked: dict[str, str] = field(default_factory=dict)  # idempotency key -> namespace
    unacked: list[str] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    loop_lag: list[tuple[float, float]] = field(default_factory=list)  # (t, seconds late)
    faults: dict[str, float] = field(default_factory=dict)
    #: the PostgreSQL restart in wall-clock time (begun, back), to judge Dagster's runs by
    restart_epoch: tuple[float, float] = (0.0, 0.0)


async def call(client: httpx.AsyncClient, token: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One MCP tools/call; raises Busy on the server's typed refusal, another error on any other failure."""
    response = await client.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}},
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
                 "MCP-Protocol-Version": "2025-06-18"},
    )
    try:
        answer = response.json()
    except ValueError:
        answer = None
    error = answer.get("error") if isinstance(answer, dict) else None
    if is_busy(response, error):
        raise Busy(retry_after_s(response, error))
    response.raise_for_status()
    if error:
        raise CallFailed(f"JSON-RPC {error.get('code')}" if isinstance(error, dict) else "JSON-RPC error")
    if answer["result"].get("isError"):
        stash_error = (answer["result"].get("_meta") or {}).get("stash/error") or {}
        raise CallFailed(f"tool error {stash_error.get('error', 'unnamed')}")
    return answer["result"]


def is_busy(response: httpx.Response, error: Any) -> bool:
    """A refusal to send again later: 503/429 with Retry-After, or a JSON-RPC error coded BUSY_CODE
    (a bare 503, as the balancer sends with no replica up, is an error, not busy)."""
    if response.status_code in (429, 503) and "retry-after" in response.headers:
        return True
    return isinstance(error, dict) and error.get("code") == BUSY_CODE


def retry_after_s(response: httpx.Response, error: Any) -> float:
    """The wait a refusal asks for: its ``data.retry_after_s`` (finer), else Retry-After, else 1 s."""
    data = error.get("data") if isinstance(error, dict) else None
    if isinstance(data, dict) and isinstance(data.get("retry_after_s"), int | float):
        return float(data["retry_after_s"])
    try:
        return float(response.headers.get("retry-after", 1))
    except ValueError:
        return 1.0


async def attempt(client: httpx.AsyncClient, token: str, tally: Tally, name: str,
                  arguments: dict[str, Any]) -> tuple[str, float]:
    """Send a call once and record how it ended: (outcome, seconds to wait before sending it again)."""
    begun = time.monotonic()
    detail = ""
    try:
        await call(client, token, name, arguments)
        outcome, wait = ANSWERED, 0.0
    except Busy as refusal:
        outcome, wait = BUSY, refusal.retry_after_s
    except httpx.TimeoutException as exc:
        outcome, wait, detail = TIMEOUT, RETRY_PAUSE_S, type(exc).__name__
    except (httpx.HTTPError, CallFailed, ValueError, KeyError, TypeError) as exc:
        outcome, wait, detail = ERROR, RETRY_PAUSE_S, describe(exc)
    tally.attempts.append(Attempt(name, begun - tally.started, outcome, time.monotonic() - begun, detail))
    return outcome, wait


def describe(exc: Exception) -> str:
    """A short name for a failure, to count alike ones together."""
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code}"
    return str(exc) if isinstance(exc, CallFailed) else type(exc).__name__


async def until_answered(client: httpx.AsyncClient, token: str, tally: Tally, rng: random.Random, name: str,
                         arguments: dict[str, Any], patience_s: float) -> bool:
    """Send the same call until it is answered or ``patience_s`` has passed, as an agent should:
    after a busy refusal wait what it asks, after a timeout or another error RETRY_PAUSE_S,
    each up to half again (jitter, so refused agents do not come back together)."""
    begun = time.monotonic()
    while True:
        outcome, wait = await attempt(client, token, tally, name, arguments)
        if outcome == ANSWERED or time.monotonic() - begun > patience_s:
            break
        await asyncio.sleep(wait * rng.uniform(1.0, 1.5))
    tally.calls.append(Call(name, begun - tally.started, outcome == ANSWERED, time.monotonic() - begun))
    return outcome == ANSWERED


async def agent(index: int, token: str, client: httpx.AsyncClient, tally: Tally, stop_at: float) -> None:
    namespace = f"{PREFIX}/ns{index % NAMESPACES:02d}"
    rng = random.Random(index)
    seq = 0
    await asyncio.sleep(rng.uniform(0, THINK_S[1]))
    while time.monotonic() < stop_at:
        key = f"agent{index:03d}-{seq:05d}"
        content = f"[{key}] agent {index} {rng.choice(SENTENCES)} (note {seq})"
        arguments = {"content": content, "namespace": namespace, "idempotency_key": key}
        if await until_answered(client, token, tally, rng, "remember", arguments, WRITE_RETRY_S):
            tally.acked[key] = namespace
        else:
            tally.unacked.append(key)
        seq += 1
        await asyncio.sleep(rng.uniform(*THINK_S))
        arguments = {"query": rng.choice(SENTENCES), "namespaces": [namespace], "limit": 5}
        await until_answered(client, token, tally, rng, "recall", arguments, RECALL_RETRY_S)
        await asyncio.sleep(rng.uniform(*THINK_S))


def kill_one_replica(tally: Tally) -> str:
    """SIGKILL the process of one running mcp replica from the host (a crash, not a stop)."""
    victim = sorted(c["Name"] for c in containers("mcp") if c["State"] == "running")[0]
    pid = int(subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", victim],
                             capture_output=True, text=True, check=True).stdout)
    os.kill(pid, signal.SIGKILL)
    tally.faults["replica killed"] = time.monotonic() - tally.started
    return victim


async def faults(tally: Tally) -> None:
    await asyncio.sleep(DURATION_S * KILL_AT)
    victim = await asyncio.to_thread(kill_one_replica, tally)
    log(f"SIGKILL {victim}")
    await asyncio.sleep(DURATION_S * (RESTART_AT - KILL_AT))
    tally.faults["PostgreSQL restarted"] = time.monotonic() - tally.started
    log("restarting PostgreSQL")
    begun = time.time()
    await asyncio.to_thread(compose, "restart", "postgres")
    tally.restart_epoch = (begun, time.time())
    log("PostgreSQL back")


async def sample_connections(samples: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            rows = await asyncio.to_thread(
                psql, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")
            samples.append(int(rows[0][0]))
        except (SystemExit, subprocess.TimeoutExpired, IndexError, ValueError):
            pass  # PostgreSQL restarting
        await asyncio.sleep(2)


async def sample_loop_lag(tally: Tally, stop: asyncio.Event) -> None:
    """How late the client's own event loop wakes from a 100 ms sleep: a late loop delays every call's
    reading of its answer, so a client short of CPU shows here, not in the server."""
    while not stop.is_set():
        begun = time.monotonic()
        await asyncio.sleep(0.1)
        tally.loop_lag.append((begun - tally.started, time.monotonic() - begun - 0.1))


async def load(token: str) -> tuple[Tally, list[int]]:
    tally = Tally()
    stop_at = tally.started + DURATION_S
    samples: list[int] = []
    stop = asyncio.Event()
    limits = httpx.Limits(max_connections=AGENTS, max_keepalive_connections=AGENTS)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{MCP_PORT}", timeout=CLIENT_TIMEOUT_S,
                                 limits=limits) as client:
        samplers = [asyncio.create_task(sample_connections(samples, stop)),
                    asyncio.create_task(sample_loop_lag(tally, stop))]
        await asyncio.gather(faults(tally), *(agent(i, token, client, tally, stop_at) for i in range(AGENTS)))
        stop.set()
        await asyncio.gather(*samplers)
    return tally, samples


# -- the checks -------------------------------------------------------------------------

def stored_writes(tally: Tally) -> tuple[int, int, int]:
    """(acknowledged writes not stored, stored more than once, rows stored) from PostgreSQL."""
    rows = psql(
        "SELECT substring(e.content from '^\\[([a-z0-9-]+)\\]') AS key, count(*) FROM episodes e "
        f"JOIN namespaces n ON n.id = e.namespace_id WHERE n.slug LIKE '{PREFIX}/%' GROUP BY 1"
    )
    counts = {key: int(n) for key, n in rows}
    lost = sum(1 for key in tally.acked if key not in counts)
    duplicated = sum(1 for n in counts.values() if n > 1)
    return lost, duplicated, sum(counts.values())


def windows(tally: Tally) -> list[tuple[str, float, float]]:
    """The run cut at the faults: a fault's window lasts FAULT_WINDOW_S, or until the next fault."""
    kill, restart = tally.faults["replica killed"], tally.faults["PostgreSQL restarted"]
    kill_end = min(kill + FAULT_WINDOW_S, restart)
    return [
        ("before the faults", 0, kill),
        ("during the replica kill", kill, kill_end),
        ("after the replica kill", kill_end, restart),
        ("during the PostgreSQL restart", restart, restart + FAULT_WINDOW_S),
        ("after the PostgreSQL restart", restart + FAULT_WINDOW_S, DURATION_S + 30),
    ]


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) >= 2 else (values[0] if values else 0.0)


def window_table(tally: Tally) -> list[dict[str, Any]]:
    """Per window and tool: requests sent by how they ended, the p95 of the answered ones, and of
    the calls begun in the window the ones never answered and the p95 time to an answer (retries included)."""
    table = []
    for name, start, end in windows(tally):
        row: dict[str, Any] = {"window": name, "from_s": round(start), "to_s": round(min(end, DURATION_S))}
        for tool in ("remember", "recall"):
            attempts = [a for a in tally.attempts if a.tool == tool and start <= a.at < end]
            calls = [c for c in tally.calls if c.tool == tool and start <= c.at < end]
            row[tool] = {
                "sent": len(attempts),
                **{outcome: sum(1 for a in attempts if a.outcome == outcome)
                   for outcome in (ANSWERED, BUSY, TIMEOUT, ERROR)},
                "p95_ms": round(p95([a.seconds for a in attempts if a.outcome == ANSWERED]) * 1000),
                "calls": len(calls),
                "calls_unanswered": sum(1 for c in calls if not c.answered),
                "p95_to_answer_ms": round(p95([c.seconds for c in calls if c.answered]) * 1000),
            }
        failures = Counter(f"{a.tool} {a.outcome} {a.detail}" for a in tally.attempts
                           if start <= a.at < end and a.outcome in (TIMEOUT, ERROR))
        row["failures"] = dict(failures.most_common(5))
        lag = [seconds for at, seconds in tally.loop_lag if start <= at < end]
        row["client_loop_lag_ms"] = {"p95": round(p95(lag) * 1000), "max": round(max(lag, default=0) * 1000)}
        table.append(row)
    return table


def log_table(table: list[dict[str, Any]]) -> None:
    """The windows, one line each: sent / answered / busy / timeouts / errors and p95 per tool."""
    for row in table:
        parts = []
        for tool in ("remember", "recall"):
            f = row[tool]
            parts.append(f"{tool} {f['sent']}/{f['answered']}/{f['busy']}/{f['timeout']}/{f['error']} "
                         f"p95 {f['p95_ms']} ms")
        log(f"{row['window']} ({row['from_s']}-{row['to_s']} s): {'; '.join(parts)}; "
            f"recall to answer p95 {row['recall']['p95_to_answer_ms']} ms; failures {row['failures']}; "
            f"client loop lag max {row['client_loop_lag_ms']['max']} ms")


RUNS_QUERY = ('{ runsOrError(filter: {tags: [{key: "stash/trigger", value: "watermark"}]}, limit: 5000) '
              "{ ... on Runs { results { runId status startTime endTime tags { key value } } } } }")


RUN_ERRORS_QUERY = ("query($runId: ID!) { runOrError(runId: $runId) { ... on Run { eventConnection(limit: 2000) "
                    "{ events { __typename ... on ErrorEvent { error { className message } } } } } } }")
#: a run that failed this close after the PostgreSQL restart (or during it) was caught by it
RESTART_GRACE_S = 10


#: the Dagster UI wants a token with the admin right on / (set once the stack is up)
UI_TOKEN: dict[str, str] = {}


def watermark_runs() -> list[dict[str, Any]]:
    response = httpx.post(f"http://127.0.0.1:{DAGSTER_PORT}/graphql", json={"query": RUNS_QUERY}, timeout=60,
                          headers={"Authorization": f"Bearer {UI_TOKEN['token']}"})
    runs = response.json()["data"]["runsOrError"]["results"]
    for run in runs:
        run["tags"] = {t["key"]: t["value"] for t in run["tags"]}
    return [r for r in runs if r["tags"].get("dagster/partition", "").startswith(PREFIX)]


def run_error(run_id: str) -> str:
    """The first error a run's events carry ("Class: message"), or "" when none can be read."""
    try:
        response = httpx.post(f"http://127.0.0.1:{DAGSTER_PORT}/graphql", timeout=60,
                              json={"query": RUN_ERRORS_QUERY, "variables": {"runId": run_id}},
                              headers={"Authorization": f"Bearer {UI_TOKEN['token']}"})
        events = response.json()["data"]["runOrError"]["eventConnection"]["events"]
    except (httpx.HTTPError, KeyError, TypeError, ValueError):
        return ""
    for event in events:
        if event.get("error"):
            return f"{event['error'].get('className')}: {event['error'].get('message', '').strip()[:300]}"
    return ""


def failed_runs(runs: list[dict[str, Any]], restart: tuple[float, float]) -> list[dict[str, Any]]:
    """Each failed or cancelled run: its namespace, times, error, and whether the PostgreSQL
    restart caught it (it ran at some moment from the restart to RESTART_GRACE_S after):
    such a run fails by design, and the sensor launches the namespace's next one."""
    out = []
    for run in runs:
        if run["status"] not in ("FAILURE", "CANCELED"):
            continue
        start, end = run["startTime"] or 0.0, run["endTime"] or time.time()
        out.append({"run_id": run["runId"], "namespace": run["tags"].get("dagster/partition"),
                    "status": run["status"], "start": start, "end": end,
                    "during_restart": start <= restart[1] + RESTART_GRACE_S and end >= restart[0],
                    "error": run_error(run["runId"])})
    return out


def consolidation(namespaces: list[str], restart: tuple[float, float]) -> dict[str, Any]:
    """Wait until no run is in flight and every namespace has consolidated its facts; the figures."""
    deadline = time.monotonic() + CONSOLIDATION_TIMEOUT_S
    in_flight = ("QUEUED", "NOT_STARTED", "STARTING", "STARTED", "CANCELING")
    while True:
        runs = watermark_runs()
        busy = [r for r in runs if r["status"] in in_flight]
        behind = psql(
            "SELECT n.slug FROM namespaces n LEFT JOIN stage_checkpoints c ON c.namespace_id = n.id "
            "AND c.stage = 'facts' WHERE n.slug LIKE '/load/%' AND coalesce(c.cursor, 0) < "
            "(SELECT coalesce(max(e.id), 0) FROM episodes e WHERE e.namespace_id = n.id)"
        )
        if not busy and not behind:
            break
        if time.monotonic() > deadline:
            log(f"consolidation timed out: {len(busy)} runs in flight, {len(behind)} namespaces behind")
            break
        log(f"consolidation: {len(runs)} runs, {len(busy)} in flight, {len(behind)} namespaces behind on facts")
        time.sleep(15)
    overlaps = 0
    by_namespace: dict[str, list[tuple[float, float]]] = {}
    for run in runs:
        if run["startTime"]:
            span = (run["startTime"], run["endTime"] or time.time())
            by_namespace.setdefault(run["tags"]["dagster/partition"], []).append(span)
    for spans in by_namespace.values():
        spans.sort()
        overlaps += sum(1 for a, b in itertools.pairwise(spans) if b[0] < a[1])
    durations = [r["endTime"] - r["startTime"] for r in runs if r["status"] == "SUCCESS" and r["startTime"]]
    out = subprocess.run(["docker", "ps", "-a", "-q", "--filter", "label=stash/role=run"],
                         capture_output=True, text=True, check=True).stdout.split()
    return {
        "runs_launched": len(runs),
        "runs_succeeded": sum(1 for r in runs if r["status"] == "SUCCESS"),
        "runs_failed": sum(1 for r in runs if r["status"] in ("FAILURE", "CANCELED")),
        "failed_runs": (failed := failed_runs(runs, restart)),
        "runs_failed_outside_the_restart": sum(1 for f in failed if not f["during_restart"]),
        "run_containers": len(out),
        "namespaces_consolidated": len(namespaces) - len(behind),
        "namespaces_with_runs": len(by_namespace),
        "overlapping_runs_in_a_namespace": overlaps,
        "run_seconds_median": round(statistics.median(durations), 1) if durations else None,
        "most_runs_at_once": most_at_once([s for spans in by_namespace.values() for s in spans]),
    }


def most_at_once(spans: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    peak = now = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def take_down() -> None:
    """Remove the run containers, then the stack: they hold its network and storage volume, which
    ``down`` would otherwise leave behind."""
    subprocess.run("docker rm -f $(docker ps -aq --filter label=stash/role=run) 2>/dev/null", shell=True)
    compose("down", "-v", "--remove-orphans", check=False)


def main() -> int:
    log(f"project {PROJECT}: {AGENTS} agents, {NAMESPACES} namespaces, {DURATION_S:.0f} s, MCP on :{MCP_PORT}")
    take_down()
    compose("up", "-d", "--build")
    wait_healthy()
    log("every service healthy")
    token = json.loads(compose("exec", "-T", "mcp", "stash", "token", "create", "--namespace", PREFIX,
                               "--rights", "read,write", "--name", "load", "--json"))["token"]
    UI_TOKEN["token"] = json.loads(compose("exec", "-T", "mcp", "stash", "token", "create", "--namespace", "/",
                                           "--rights", "admin", "--name", "load-ui", "--json"))["token"]
    namespaces = [f"{PREFIX}/ns{i:02d}" for i in range(NAMESPACES)]

    async def create() -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{MCP_PORT}", timeout=60) as client:
            for namespace in namespaces:
                await call(client, token, "create_namespace", {"namespace": namespace})

    asyncio.run(create())
    log(f"{NAMESPACES} namespaces created; load starts")
    tally, samples = asyncio.run(load(token))
    log(f"load done: {len(tally.acked)} writes acknowledged, {len(tally.attempts)} requests sent")
    table = window_table(tally)
    log_table(table)
    lost, duplicated, stored = stored_writes(tally)
    runs = consolidation(namespaces, tally.restart_epoch)
    limits = psql("SELECT current_setting('max_connections')")[0][0]
    recalls_answered = sum(1 for c in tally.calls if c.tool == "recall" and c.answered)
    timeouts_before = table[0]["remember"][TIMEOUT] + table[0]["recall"][TIMEOUT]
    remembers_sent = sum(1 for a in tally.attempts if a.tool == "remember")
    report = {
        "agents": AGENTS, "namespaces": NAMESPACES, "duration_s": DURATION_S, "faults_at_s": tally.faults,
        "writes_acknowledged": len(tally.acked), "writes_not_acknowledged": len(tally.unacked),
        "write_retries": remembers_sent - len(tally.acked) - len(tally.unacked),
        "rows_stored": stored, "acknowledged_lost": lost, "duplicated": duplicated,
        "recalls_answered": recalls_answered,
        "recalls_not_answered": sum(1 for c in tally.calls if c.tool == "recall" and not c.answered),
        "timeouts_before_the_faults": timeouts_before,
        "throughput_ops_s": round((len(tally.acked) + recalls_answered) / DURATION_S, 1),
        "windows": table, "consolidation": runs,
        "connections_peak": max(samples, default=0), "max_connections": int(limits),
    }
    print(json.dumps(report, indent=2))
    if os.environ.get("REPORT"):
        Path(os.environ["REPORT"]).write_text(json.dumps(report, indent=2))
    failures = [name for name, bad in [
        ("acknowledged writes lost", lost), ("duplicated writes", duplicated),
        ("timeouts before the faults", timeouts_before),
        ("failed runs outside the PostgreSQL restart", runs["runs_failed_outside_the_restart"]),
        ("namespaces run twice at once", runs["overlapping_runs_in_a_namespace"]),
        ("namespaces not consolidated", NAMESPACES - runs["namespaces_consolidated"]),
    ] if bad]
    if not KEEP:
        take_down()
    log("FAIL: " + ", ".join(failures) if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
