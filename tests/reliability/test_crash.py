"""Crash: kill -9 a `stash consolidate run` worker at a random point, restart, compare with a clean run.

Each trial seeds two identical namespaces, consolidates ``/clean`` in-process, then
starts a real worker process (the CLI) on ``/crash`` against the same scripted model
server and SIGKILLs it after a seeded random number of model requests plus a random
delay (so kills land inside model calls, between batches and inside batch commits,
across every stage). The restart resumes the interrupted run at the stage it was in
(as re-executing a failed Dagster run does; ``wait=True``: the dead worker's advisory
lock is released when PostgreSQL notices the closed socket) and then runs until caught
up. It must leave ``/crash`` with exactly
the rows of ``/clean`` — facts, relationships, causal links, patterns, contradictions,
goal notes, evidence, hypotheses, dead letters, and lineage by content — with no
duplicates, no orphan lineage, no cursor beyond its head and no episode before the
facts cursor left without a fact. A further run changes nothing.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from stash_pipeline.consolidation import runner
from stash_pipeline.stages import STAGE_NAMES
from testkit.openai_server import Reply, system_prompt
from testkit.scripted_model import ScriptedModel
from tests.reliability.conftest import (
    FIGURES,
    REPO,
    STASH,
    canonical,
    cursor_problems,
    duplicate_rows,
    orphan_lineage,
    prepare,
    trials,
    uncovered_before_cursor,
    until_caught_up,
    worker_env,
)

pytestmark = pytest.mark.reliability

#: stage of the last model request before each kill (printed in the session summary)
KILLED_IN = FIGURES["crash: killed during"]


class SlowModel(ScriptedModel):
    """The scripted model, each answer a little late, so a worker spends time inside calls too."""

    def __call__(self, request: dict[str, Any]) -> Reply | str:
        answer = super().__call__(request)
        time.sleep(0.02)
        return answer


@pytest.fixture
def model() -> ScriptedModel:
    return SlowModel(timeout_s=1.5)


def _stage_of(requests: list[dict[str, Any]]) -> str:
    """The stage of the latest model request that names one (``STAGE: <name>``).

    A request may carry no ``STAGE:`` line — its body cut off when the worker died
    mid-upload, or not a stage prompt at all — so look further back; with no stage
    request at all the run had not left its first stage.
    """
    marker = "STAGE:"
    for request in reversed(requests):
        text = system_prompt(request) if isinstance(request, dict) else ""
        if marker in text:
            words = text.split(marker, 1)[1].split()
            if words and words[0] in STAGE_NAMES:
                return words[0]
    return STAGE_NAMES[0]


@pytest.mark.parametrize("trial", trials(4, 20))
def test_kill9_worker_then_restart_equals_clean_run(
    wstore: Any, server: Any, settings: Any, tmp_path: Path, trial: int
) -> None:
    rng = random.Random(1000 + trial)
    for slug in ("/clean", "/crash"):
        prepare(wstore, slug)
    before = len(server.chat_requests())
    runner.run_all(wstore, "/clean")
    clean_calls = len(server.chat_requests()) - before
    until_caught_up(wstore, "/clean")
    assert clean_calls >= 10, "the corpus should keep a worker busy for many model calls"

    # kill after the k-th model request of the worker (+ up to 80 ms): anywhere in its run
    kill_after = rng.randint(1, clean_calls)
    delay = rng.uniform(0.0, 0.08)
    env = worker_env(settings.database_url, tmp_path / "home", server.base_url)
    start = len(server.chat_requests())
    worker = subprocess.Popen(
        [STASH, "consolidate", "run", "-n", "/crash", "--json"],
        env=env, cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while len(server.chat_requests()) - start < kill_after and worker.poll() is None:
        assert time.monotonic() < deadline, "worker made no progress"
        time.sleep(0.002)
    time.sleep(delay)
    finished_first = worker.poll() is not None
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=30)
    seen = server.chat_requests()[start:]
    killed_in = _stage_of(seen)
    KILLED_IN[killed_in] += 1
    if finished_first:  # it completed before the kill landed: still a valid trial of "re-run is a no-op"
        KILLED_IN["(completed)"] += 1

    # restart: resume the interrupted run at the stage it was in (what re-executing a failed
    # Dagster run does), waiting for the dead worker's locks, then run until caught up.
    # Resuming keeps the stage order of the clean run: a full restart from `facts` would let
    # the repeat-failure episodes of run 1 reach the facts stage before hypothesis_evidence
    # confirms its hypothesis fact, so later batches (causal-link pairs, patterns) are cut
    # differently — equivalent knowledge, not the same rows (see docs/reliability.md).
    resume = list(STAGE_NAMES[STAGE_NAMES.index(killed_in):])
    runner.run_all(wstore, "/crash", stages=resume, wait=True)
    until_caught_up(wstore, "/crash", wait=True)
    clean, crashed = canonical(wstore, "/clean"), canonical(wstore, "/crash")
    for kind in clean:
        assert crashed[kind] == clean[kind], f"{kind} differs after kill at request {kill_after}+{delay:.3f}s"
    assert orphan_lineage(wstore) == []
    assert duplicate_rows(wstore, "/crash") == duplicate_rows(wstore, "/clean")
    assert cursor_problems(wstore, "/crash") == []
    assert uncovered_before_cursor(wstore, "/crash") == uncovered_before_cursor(wstore, "/clean")
    # the same backlog as the clean run (episodes written by failure_patterns wait for the next run)

    FIGURES["crash"]["trials held"] += 1

    # and one more run is a no-op
    again = runner.run_all(wstore, "/crash", wait=True)
    assert sum(r.rows_written for r in again) == 0
    assert canonical(wstore, "/crash") == crashed
