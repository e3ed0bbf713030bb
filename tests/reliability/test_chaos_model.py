"""Chaos model server: 500s, 429s, timeouts, truncated bodies, <think> preambles, wrong ids, huge outputs.

A seeded random responder wraps the scripted model: each chat request is, with some
probability, answered by one of the faults below instead of a good answer. Consolidation
is re-run (as a scheduler would) until every stage is caught up. What must hold:

* no stage stalls: every cursor reaches its head and no dead letter is left pending
  within ``MAX_RUNS`` runs;
* every item ends processed or dead-lettered: each episode at or before the facts
  cursor has a fact (via lineage) or a dead letter — no fewer than a fault-free run;
* the ``model_calls`` ledger accounts for every HTTP request the server received
  (one row per request, failed or not).
"""

from __future__ import annotations

import json
import random
import threading
from typing import Any

import pytest

from stash_pipeline import errors
from stash_pipeline.consolidation import runner
from stash_pipeline.stages import get_stage
from testkit.openai_server import Reply
from testkit.scripted_model import ScriptedModel
from tests.reliability.conftest import (
    FIGURES,
    duplicate_rows,
    namespace_id,
    orphan_lineage,
    prepare,
    rows,
    seed,
    trials,
    uncovered_before_cursor,
)

pytestmark = pytest.mark.reliability

MAX_RUNS = 25
#: an episode the model always chokes on (a poison item: it must be dead-lettered, not stall facts)
POISON = "Zebulon poisoned the nightly Quartz backup"
TIMEOUT_S = 0.4  # STASH_REASONER_TIMEOUT_S for this suite; "timeout" replies sleep longer

#: fault kind -> weight; the rest of the probability mass answers correctly
FAULTS = {
    "status500": 3,
    "status429": 3,
    "timeout": 2,
    "truncated": 3,
    "think": 3,
    "fence": 1,
    "wrong_ids": 3,
    "garbage": 2,
    "schema": 1,
    "huge": 2,
}


class ChaosModel(ScriptedModel):
    """The scripted model with a seeded random fault on a share of the requests."""

    def __init__(self, seed_value: int, fault_rate: float) -> None:
        super().__init__(timeout_s=TIMEOUT_S + 0.3)
        self.rng = random.Random(seed_value)
        self.fault_rate = fault_rate
        self.enabled = True
        self.injected: dict[str, int] = {}
        self._chaos_lock = threading.Lock()

    def _pick(self) -> str | None:
        with self._chaos_lock:
            if not self.enabled or self.rng.random() >= self.fault_rate:
                return None
            kind = self.rng.choices(list(FAULTS), weights=list(FAULTS.values()))[0]
            self.injected[kind] = self.injected.get(kind, 0) + 1
            return kind

    def _take_fault(self, stage: str) -> str | None:
        return self._fault

    def __call__(self, request: dict[str, Any]) -> Reply | str:
        if POISON in json.dumps(request.get("messages", [])[:2]):
            self.injected["poison"] = self.injected.get("poison", 0) + 1
            return "I refuse to answer about that {"  # never valid: the item must end dead-lettered
        kind = self._pick()
        if kind == "truncated":
            return Reply(raw_body=b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"ro')
        self._fault = None if kind == "huge" else kind
        answer = super().__call__(request)
        if kind == "huge" and isinstance(answer, str):
            # a valid answer drowned in 400 kB of rambling (and a second JSON value)
            answer = answer + "\n\nLet me elaborate. " + "blah " * 80_000 + json.dumps({"facts": []})
        return answer


def _ledger(store: Any) -> int:
    return int(rows(store, "SELECT count(*) AS n FROM model_calls")[0]["n"])


@pytest.mark.parametrize("trial", trials(1, 5))
def test_chaos_model_never_stalls_and_every_call_is_accounted(make_store: Any, trial: int) -> None:
    from stash_pipeline.consolidation.reasoner import reset_mode_cache
    from testkit.openai_server import ScriptedOpenAI
    from tests.reliability.conftest import WORKER_SETTINGS

    reset_mode_cache()
    model = ChaosModel(seed_value=4242 + trial, fault_rate=0.5 if trial == 0 else 0.3 + 0.1 * (trial % 4))
    with ScriptedOpenAI(model) as server:
        store = make_store(
            openai_base_url=server.base_url,
            **{**WORKER_SETTINGS, "reasoner_timeout_s": TIMEOUT_S, "reasoner_max_retries": 1},
        )
        model.enabled = False
        prepare(store, "/calm")
        runner.run_all(store, "/calm")
        for _ in range(5):
            runner.run_all(store, "/calm")
        model.enabled = True
        prepare(store, "/chaos")
        (poison_id,) = seed(store, "/chaos", [POISON])

        failed_runs = 0
        for run in range(1, MAX_RUNS + 1):  # noqa: B007 (its last value is reported)
            try:
                reports = runner.run_all(store, "/chaos")
            except errors.StashError as exc:  # a run may fail; the next one must carry on
                failed_runs += 1
                FIGURES["chaos: run errors"][type(exc).__name__] += 1
                continue
            failed_runs += any(r.status == "failed" for r in reports)
            status = runner.status(store, "/chaos")
            if not any(r["has_work"] or r["dead_letters_pending"] for r in status):
                break
        else:
            raise AssertionError(f"stalled after {MAX_RUNS} runs: {runner.status(store, '/chaos')}")

        # every HTTP request the endpoint received is one ledger row (failed attempts included)
        received = len(server.chat_requests())
        assert _ledger(store) == received

    assert orphan_lineage(store) == []
    assert all(n == 0 for n in duplicate_rows(store, "/chaos").values()) or duplicate_rows(
        store, "/chaos"
    ) == duplicate_rows(store, "/calm")
    # processed or dead-lettered: no episode before the cursor is unaccounted for (beyond a calm run's)
    assert set(uncovered_before_cursor(store, "/chaos")) <= set(uncovered_before_cursor(store, "/calm"))
    dead = rows(
        store,
        "SELECT stage, status, count(*) AS n FROM dead_letters WHERE namespace_id = %(ns)s GROUP BY 1, 2",
        ns=namespace_id(store, "/chaos"),
    )
    # nothing left pending: each item was processed on a retry ("retried") or given up ("dead")
    assert {r["status"] for r in dead} <= {"dead", "retried"}, dead
    poisoned = rows(store, "SELECT status FROM dead_letters WHERE stage = 'facts' AND item_id = %(i)s", i=poison_id)
    assert poisoned == [{"status": "dead"}]
    fig = FIGURES["chaos"]
    fig["trials held"] += 1
    fig["runs to catch up (sum)"] += run
    fig["runs that failed"] += failed_runs
    fig["requests"] += received
    fig["dead-lettered items (dead)"] += sum(int(r["n"]) for r in dead if r["status"] == "dead")
    fig["failed items processed on a retry"] += sum(int(r["n"]) for r in dead if r["status"] == "retried")
    for r in dead:
        FIGURES["chaos: dead letters by stage and final status"][f"{r['stage']}/{r['status']}"] += int(r["n"])
    for kind, n in model.injected.items():
        FIGURES["chaos: faults injected"][kind] += n


def test_truncated_body_is_a_recorded_transport_failure(cstore: Any, server: Any, model: ScriptedModel) -> None:
    """Regression: a 200 with a cut-off JSON body used to escape the reasoner as a raw
    JSONDecodeError (no ledger row, run_all crashed); now it is retried, recorded and
    ends as ModelUnavailable with the cursor unmoved."""
    seed(cstore, "/t", ["Alice works at Acme in the Lyon office"])
    truncated = Reply(raw_body=b'{"id": "x", "choices": [{"index": 0, "message": {"content": "{\\"fa')
    server.responder = lambda request: truncated
    with pytest.raises(errors.ModelUnavailable, match="invalid response body"):
        runner.run_stage(cstore, "/t", "facts")
    assert _ledger(cstore) == len(server.chat_requests()) == 2  # first try + one retry, both recorded
    assert rows(cstore, "SELECT cursor, last_status FROM stage_checkpoints WHERE stage = 'facts'") == [
        {"cursor": 0, "last_status": "failed"}
    ]
    reports = runner.run_all(cstore, "/t")  # run_all turns it into a failed report, never raises
    assert reports[0].status == "failed"
    assert {r.stage: r.status for r in reports[1:] if not get_stage(r.stage).needs_model} == {
        "profiles": "idle", "decay": "idle"}  # stages without a model still run
    assert all(r.status == "skipped" for r in reports[1:] if get_stage(r.stage).needs_model)
    server.responder = model
    assert runner.run_stage(cstore, "/t", "facts").rows_written == 1


class PoisonModel(ScriptedModel):
    """Good answers, except for any request whose prompt lists the poison episode."""

    def __call__(self, request: dict[str, Any]) -> Reply | str:
        if POISON in json.dumps(request.get("messages", [])[:2]):
            return "I refuse to answer about that {"
        return super().__call__(request)


def test_one_poison_episode_dead_letters_only_itself(cstore: Any, server: Any) -> None:
    """A poison item must end dead-lettered alone; its innocent call-mates must be processed.

    Regression: retries used to re-send pending items in their original grouping, so the
    episodes that once shared a model call with the poison were dead-lettered with it
    (facts: whole groups of clusters; failure_patterns: the whole evidence batch)."""
    server.responder = PoisonModel(timeout_s=1.5)
    seed(cstore, "/p", [])
    from stash_pipeline.memory import failures

    failures.create(cstore, "/p", "Deploy script failed with Postgres timeout", "pool too small", "raise the pool")
    innocent = seed(cstore, "/p", [f"Deploy script failed with Postgres timeout on run {i}" for i in range(6)])
    (poison,) = seed(cstore, "/p", [POISON])
    for _ in range(6):
        runner.run_all(cstore, "/p")
    dead = rows(cstore, "SELECT stage, item_id FROM dead_letters WHERE status = 'dead' ORDER BY stage, item_id")
    assert {(r["stage"], r["item_id"]) for r in dead if r["stage"] == "facts"} == {("facts", poison)}
    # the innocent episodes were judged as evidence (a repeat of the failure each), not dead-lettered
    assert [r["item_id"] for r in dead if r["stage"] == "failure_patterns"] == [poison], innocent
