"""Terminate without the Docker socket: a run worker started through ``stash_serve.run_worker``
(the scale profile's run-container entrypoint) stops itself once its run is CANCELING.

The UI's Terminate marks the run CANCELING, then asks the run launcher to stop the worker;
in the scale profile the UI has no Docker socket, so only the first half happens there.
This test does exactly that first half to a real run worker process (``dagster api
execute_run``, the command the launcher gives a container) and checks that the worker
stops and the run ends CANCELED, long before its step would have finished.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.storage.dagster_run import DagsterRunStatus
from dagster._grpc.types import ExecuteRunArgs

from stash_serve.run_worker import dagster_arguments

ROOT = Path(__file__).resolve().parents[2]
#: how long the step would run if nothing stopped it
STEP_S = 120.0


@dg.op
def slow_step() -> None:
    marker = Path(os.environ["STASH_TEST_STEP_MARKER"])
    marker.write_text("started")
    deadline = time.monotonic() + STEP_S
    while time.monotonic() < deadline:
        time.sleep(0.2)


@dg.job
def slow_job() -> None:
    slow_step()


def _wait(what: str, check: object, timeout: float, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-3000:]}")


def test_the_entrypoint_finds_the_dagster_command() -> None:
    assert dagster_arguments(["dagster", "api", "execute_run", "{}"]) == ["api", "execute_run", "{}"]
    assert dagster_arguments(["/opt/venv/bin/python", "-m", "dagster", "api", "resume_run", "{}"]) == [
        "api", "resume_run", "{}"]
    assert dagster_arguments(["bash", "-c", "true"]) is None


def test_a_run_worker_stops_itself_when_its_run_is_canceling(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    marker = tmp_path / "started"
    # one-second polls keep the test short; the default (10 s) is what deployments get
    overrides = {"run_monitoring": {"cancellation_thread_poll_interval_seconds": 1}}
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home"), overrides=overrides) as instance:
        recon = dg.reconstructable(slow_job)
        run = instance.create_run_for_job(job_def=slow_job, job_code_origin=recon.get_python_origin())
        command = ExecuteRunArgs(
            job_origin=recon.get_python_origin(), run_id=run.run_id, instance_ref=instance.get_ref()
        ).get_command_args()
        env = {**os.environ, "STASH_TEST_STEP_MARKER": str(marker)}
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "stash_serve.run_worker", *command], cwd=ROOT, env=env,
                                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            _wait("the step to start", marker.exists, 120, proc, log)
            started = time.monotonic()
            # what Terminate does before it asks the launcher (which needs the socket)
            instance.report_run_canceling(instance.get_run_by_id(run.run_id))
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pytest.fail(f"the run worker kept running after its run was CANCELING:\n{log.read_text()[-3000:]}")
            assert time.monotonic() - started < STEP_S / 2
            final = instance.get_run_by_id(run.run_id)
            assert final is not None and final.status == DagsterRunStatus.CANCELED, log.read_text()[-3000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
