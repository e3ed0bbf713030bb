#!/usr/bin/env python3
"""End-to-end check of docker/docker-compose.yml (run it as ``bash docker/smoke.sh``).

Plain python3 and the standard library, on the host; Docker with the compose plugin.
It builds and starts the stack under a project name and ports of its own (plus the
tests' scripted OpenAI-compatible model as one more service, docker/smoke/compose.smoke.yml),
then checks, with a bound on every wait:

1. every service healthy (the one-shot ``migrate`` and ``dagster-migrate`` exited 0);
2. ``stash token create`` in the mcp container: one for MCP, one with the admin right on /
   for the Dagster UI (which refuses a request without it, and one under a foreign Host);
3. MCP over streamable HTTP at /mcp with that bearer token: initialize, remember, recall
   (the remembered text comes back; every recall under RECALL_LIMIT_S);
4. the Dagster UI's GraphQL (with the admin token) lists the nine stage assets;
5. a sensor-launched run (watermark sensor) succeeds against the scripted model, which
   answered at least one chat request, and no run's event log holds an error;
6. stop + up: the token still works, the first recall after the restart finds the
   memory in time, the run history is kept;
7. no container's log holds a traceback (or a known start-up error).

Environment: KEEP=1 leaves the stack up at the end (default: ``down -v``);
SMOKE_PROJECT (stash-smoke), STASH_MCP_PORT (18080), STASH_DAGSTER_PORT (13000),
STASH_IMAGE (stash-smoke:latest) choose names and loopback ports. POSTGRES_PASSWORD, which
the compose file requires, is a fresh random one unless set (the stack's volumes are its own).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

DOCKER = Path(__file__).resolve().parents[1]
PROJECT = os.environ.get("SMOKE_PROJECT", "stash-smoke")
MCP_PORT = int(os.environ.setdefault("STASH_MCP_PORT", "18080"))
DAGSTER_PORT = int(os.environ.setdefault("STASH_DAGSTER_PORT", "13000"))
os.environ.setdefault("STASH_IMAGE", "stash-smoke:latest")
# the compose file has no default password; the smoke's stack (own project, own volumes) gets a fresh one
os.environ.setdefault("POSTGRES_PASSWORD", secrets.token_hex(24))
KEEP = os.environ.get("KEEP") == "1"
COMPOSE = ["docker", "compose", "-p", PROJECT,
           "-f", str(DOCKER / "docker-compose.yml"), "-f", str(DOCKER / "smoke" / "compose.smoke.yml")]

RECALL_LIMIT_S = 2.0
HEALTHY_TIMEOUT_S = 300
RUN_TIMEOUT_S = 420
NAMESPACE = "/smoke"
TEXTS = ["Alice lives in Paris near the river Seine", "Bob deploys Kubernetes clusters every Friday"]
STAGES = {"facts", "relationships", "causal_links", "patterns", "goal_progress",
          "failure_patterns", "hypothesis_evidence", "profiles", "decay"}
SERVICES = {"postgres", "migrate", "dagster-migrate", "mcp", "user-code", "dagster-webserver", "dagster-daemon",
            "model"}
ONE_SHOT = {"migrate", "dagster-migrate"}
#: log lines that fail the smoke wherever they appear
BAD_LOG_WORDS = ("Traceback", "DagsterUserCodeUnreachableError", "PermissionError")

timings: dict[str, float] = {}
#: the Dagster UI wants a token with the admin right on / (set once the stack is up)
ui_token = ""
recalls: list[tuple[str, float]] = []


class SmokeFailure(Exception):
    pass


def log(message: str) -> None:
    print(f"[smoke {time.strftime('%H:%M:%S')}] {message}", flush=True)


def compose(*args: str, check: bool = True, capture: bool = True, timeout: float = 900) -> str:
    result = subprocess.run([*COMPOSE, *args], capture_output=capture, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise SmokeFailure(f"docker compose {' '.join(args)} failed ({result.returncode}):\n"
                           f"{result.stdout or ''}{result.stderr or ''}")
    return result.stdout or ""


def timed(name: str):
    class Timer:
        def __enter__(self) -> None:
            self.start = time.monotonic()

        def __exit__(self, *exc: object) -> None:
            timings[name] = time.monotonic() - self.start
            if exc[0] is None:
                log(f"{name}: {timings[name]:.1f} s")

    return Timer()


# -- services -----------------------------------------------------------------------

def containers() -> list[dict[str, Any]]:
    out = compose("ps", "-a", "--format", "json").strip()
    if not out:
        return []
    if out.startswith("["):
        return json.loads(out)
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def wait_healthy(what: str) -> None:
    """Every service up: healthy (each has a healthcheck), the one-shot migrations exited 0."""
    deadline = time.monotonic() + HEALTHY_TIMEOUT_S
    state: dict[str, str] = {}
    while time.monotonic() < deadline:
        state = {}
        for c in containers():
            service, status, health = c["Service"], c.get("State", ""), c.get("Health", "")
            if service in ONE_SHOT:
                if status == "exited" and c.get("ExitCode") not in (0, None):
                    raise SmokeFailure(f"{service} exited {c.get('ExitCode')}:\n{compose('logs', service)}")
                state[service] = "done" if status == "exited" else status
            elif status in ("exited", "dead") or status == "restarting":
                raise SmokeFailure(f"{service} is {status}:\n{compose('logs', '--tail', '80', service)}")
            else:
                state[service] = health or status
        if set(state) >= SERVICES and all(v in ("healthy", "done") for v in state.values()):
            return
        time.sleep(2)
    raise SmokeFailure(f"{what}: not every service healthy within {HEALTHY_TIMEOUT_S} s: {state}")


# -- MCP over HTTP --------------------------------------------------------------------

def mcp_post(token: str, payload: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{MCP_PORT}/mcp",
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                 "Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-06-18"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            body = response.read().decode()
            kind = response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as err:
        raise SmokeFailure(f"MCP {payload.get('method')}: HTTP {err.code}: {err.read().decode()[:2000]}") from err
    if not kind.startswith("application/json"):  # one SSE event
        body = [line[6:] for line in body.splitlines() if line.startswith("data: ")][-1]
    answer = json.loads(body)
    if "error" in answer:
        raise SmokeFailure(f"MCP {payload.get('method')}: {answer['error']}")
    return answer["result"]


def mcp_initialize(token: str) -> None:
    result = mcp_post(token, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "stash-smoke", "version": "1"}}})
    if not result.get("serverInfo"):
        raise SmokeFailure(f"initialize answered no serverInfo: {result}")


def mcp_tool(token: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = mcp_post(token, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                              "params": {"name": name, "arguments": arguments}})
    if result.get("isError"):
        raise SmokeFailure(f"tool {name} failed: {json.dumps(result)[:2000]}")
    return result


def recall(token: str, label: str, query: str, expect: str) -> None:
    start = time.monotonic()
    result = mcp_tool(token, "recall", {"query": query, "namespaces": [NAMESPACE]})
    took = time.monotonic() - start
    recalls.append((label, took))
    found = expect in json.dumps(result)
    log(f"recall ({label}): {took * 1000:.0f} ms, {'found' if found else 'MISSING'} {expect!r}")
    if not found:
        raise SmokeFailure(f"recall ({label}) of {query!r} did not return {expect!r}: {json.dumps(result)[:2000]}")
    if took >= RECALL_LIMIT_S:
        raise SmokeFailure(f"recall ({label}) took {took:.2f} s (limit {RECALL_LIMIT_S} s)")


# -- Dagster GraphQL ------------------------------------------------------------------

def graphql(query: str) -> dict[str, Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{DAGSTER_PORT}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {ui_token}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.loads(response.read())
    if answer.get("errors"):
        raise SmokeFailure(f"GraphQL errors: {answer['errors']}")
    return answer["data"]


RUNS_QUERY = ('{ runsOrError(filter: {tags: [{key: "stash/trigger", value: "watermark"}]}) '
              "{ __typename ... on Runs { results { runId status tags { key value } } } } }")


def ui_refuses(headers: dict[str, str], expect: int) -> None:
    """The UI answers ``expect`` to a GraphQL mutation sent with ``headers`` (and runs nothing)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{DAGSTER_PORT}/graphql",
        data=json.dumps({"query": 'mutation { terminateRun(runId: "none") { __typename } }'}).encode(),
        headers={"Content-Type": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status = response.status
    except urllib.error.HTTPError as err:
        status = err.code
    if status != expect:
        raise SmokeFailure(f"the Dagster UI answered {status}, not {expect}, to a mutation with {sorted(headers)}")


def sensor_runs() -> list[dict[str, Any]]:
    runs = graphql(RUNS_QUERY)["runsOrError"]
    if runs["__typename"] != "Runs":
        raise SmokeFailure(f"runsOrError: {runs}")
    return [r for r in runs["results"] if {"key": "dagster/partition", "value": NAMESPACE} in r["tags"]]


def run_errors(run_id: str) -> list[str]:
    """ERROR-level events of a run (a failed compute-log capture lands here, not in stdout)."""
    data = graphql(
        f'{{ logsForRun(runId: "{run_id}") {{ __typename ... on EventConnection '
        "{ events { __typename ... on MessageEvent { message level } } } } }"
    )["logsForRun"]
    if data["__typename"] != "EventConnection":
        raise SmokeFailure(f"logsForRun {run_id}: {data}")
    return [f"{e['__typename']}: {e['message'][:500]}" for e in data["events"]
            if e.get("level") in ("ERROR", "CRITICAL")]


def wait_for_sensor_run() -> dict[str, Any]:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    seen: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            seen = sensor_runs()
        except (urllib.error.URLError, OSError) as err:
            log(f"GraphQL not answering yet: {err}")
            seen = []
        failed = [r for r in seen if r["status"] in ("FAILURE", "CANCELED")]
        if failed:
            raise SmokeFailure(f"a sensor-launched run failed: {failed[0]['runId']}: {run_errors(failed[0]['runId'])}")
        done = [r for r in seen if r["status"] == "SUCCESS"]
        if done:
            return done[0]
        time.sleep(3)
    raise SmokeFailure(f"no sensor-launched run of {NAMESPACE} succeeded within {RUN_TIMEOUT_S} s: {seen}")


# -- logs -----------------------------------------------------------------------------

def bad_log_lines() -> list[str]:
    text = compose("logs", "--no-color", "--timestamps")
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines):
        if any(word in line for word in BAD_LOG_WORDS):
            found.append("\n".join(lines[max(0, i - 2): i + 25]))
    return found


# -- the smoke ------------------------------------------------------------------------

def smoke() -> None:
    global ui_token
    log(f"project {PROJECT}: MCP on 127.0.0.1:{MCP_PORT}, Dagster on 127.0.0.1:{DAGSTER_PORT}")
    compose("down", "-v", "--remove-orphans", check=False)  # whatever a KEEP=1 run left
    with timed("build"):
        compose("build", capture=False)
    with timed("healthy (first start)"):
        compose("up", "-d")
        wait_healthy("first start")

    out = compose("exec", "-T", "mcp", "stash", "token", "create", "--namespace", NAMESPACE,
                  "--rights", "read,write", "--name", "smoke", "--json")
    token = json.loads(out)["token"]
    out = compose("exec", "-T", "mcp", "stash", "token", "create", "--namespace", "/",
                  "--rights", "admin", "--name", "smoke-ui", "--json")
    ui_token = json.loads(out)["token"]
    log("tokens created in the mcp container (MCP, and admin on / for the Dagster UI)")
    ui_refuses({}, 401)
    ui_refuses({"Authorization": f"Bearer {token}"}, 403)  # read,write: not admin
    ui_refuses({"Authorization": f"Bearer {ui_token}", "Host": "rebind.evil.example"}, 421)
    ui_refuses({"Authorization": f"Bearer {ui_token}", "Origin": "http://evil.example"}, 403)
    log("the Dagster UI refuses no token, a non-admin token, a foreign Host and a foreign Origin")

    mcp_initialize(token)
    mcp_tool(token, "create_namespace", {"namespace": NAMESPACE})
    for text in TEXTS:
        mcp_tool(token, "remember", {"content": text, "namespace": NAMESPACE})
    log(f"remembered {len(TEXTS)} episodes in {NAMESPACE}")
    recall(token, "first", "Where does Alice live?", "Paris")
    recall(token, "second", "Who deploys Kubernetes clusters?", "Kubernetes")
    time.sleep(2)  # by now the pending-vector worker has embedded the rows (async writes)
    recall(token, "third", "Alice's home city", "Paris")

    nodes = graphql("{ assetNodes { assetKey { path } } }")["assetNodes"]
    names = {"/".join(n["assetKey"]["path"]) for n in nodes}
    if not STAGES <= names:
        raise SmokeFailure(f"the Dagster UI lacks stage assets {sorted(STAGES - names)}; it lists {sorted(names)}")
    log(f"Dagster lists the {len(STAGES)} stage assets (+ {sorted(names - STAGES)})")

    with timed("sensor-launched run succeeded"):
        run = wait_for_sensor_run()
    errors = run_errors(run["runId"])
    if errors:
        raise SmokeFailure(f"run {run['runId']} succeeded but logged errors: {errors}")
    model_log = compose("logs", "--no-color", "model")
    calls = model_log.count("chat request answered")
    if not calls:
        raise SmokeFailure(f"run {run['runId']} succeeded without calling the scripted model:\n{model_log}")
    log(f"run {run['runId']} SUCCESS; the scripted model answered {calls} chat request(s)")
    # its compute logs were captured (written in user-code, readable by the webserver)
    files = compose("exec", "-T", "dagster-webserver", "find", f"/opt/stash/docker/storage/{run['runId']}",
                    "-type", "f", check=False).split()
    if not any("compute_logs" in f for f in files):
        raise SmokeFailure(f"no compute logs of run {run['runId']} in the webserver's storage: {files}")
    log(f"its compute logs are in the shared storage volume ({len(files)} files)")

    with timed("restart: stop"):
        compose("stop")
    with timed("restart: up to healthy"):
        compose("up", "-d")
        wait_healthy("after restart")
    mcp_initialize(token)
    recall(token, "first after restart", "Where does Alice live?", "Paris")
    recall(token, "second after restart", "Who deploys Kubernetes clusters?", "Kubernetes")
    kept = {r["runId"]: r["status"] for r in sensor_runs()}
    if kept.get(run["runId"]) != "SUCCESS":
        raise SmokeFailure(f"run history lost over the restart: {run['runId']} not among {kept}")
    log(f"after restart: token works, memory recalled, {len(kept)} sensor run(s) of {NAMESPACE} kept")

    bad = bad_log_lines()
    if bad:
        raise SmokeFailure(f"{len(bad)} bad line(s) ({', '.join(BAD_LOG_WORDS)}) in the containers' logs:\n\n"
                           + "\n-----\n".join(bad))
    log("no traceback in any container's log")
    # PostgreSQL's ERROR lines are reported, not failed on (a refused statement can be expected)
    errors = [line for line in compose("logs", "--no-color", "postgres").splitlines() if " ERROR: " in line]
    log(f"PostgreSQL logged {len(errors)} ERROR line(s)" + "".join(f"\n    {line}" for line in errors[:20]))


def main() -> int:
    started = time.monotonic()
    failure: str | None = None
    try:
        smoke()
    except SmokeFailure as err:
        failure = str(err)
    except KeyboardInterrupt:
        failure = "interrupted"
    except Exception as err:  # report anything as a failed smoke, with the stack
        import traceback

        failure = "".join(traceback.format_exception(err))
    if failure:
        try:
            print("\n==== container states ====", flush=True)
            subprocess.run([*COMPOSE, "ps", "-a"], timeout=60)
            for line in bad_log_lines():
                print(f"---- bad log line ----\n{line}")
        except Exception as err:
            print(f"(could not read the stack's state: {err})")
    print("\n==== compose smoke summary ====")
    for name, seconds in timings.items():
        print(f"  {name:32s} {seconds:7.1f} s")
    for label, seconds in recalls:
        print(f"  recall, {label:24s} {seconds * 1000:7.0f} ms  {'ok' if seconds < RECALL_LIMIT_S else 'TOO SLOW'}")
    print(f"  total                            {time.monotonic() - started:7.1f} s")
    print(f"RESULT: {'FAIL' if failure else 'PASS'}")
    if failure:
        print(failure)
    if KEEP:
        print(f"KEEP=1: the stack stays up; remove it with: {' '.join(COMPOSE)} down -v")
    else:
        subprocess.run([*COMPOSE, "down", "-v", "--remove-orphans"], capture_output=True, timeout=300)
    return 1 if failure else 0


if __name__ == "__main__":
    sys.exit(main())
