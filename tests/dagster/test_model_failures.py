"""A model endpoint failing in each way seen in the field, through a real Dagster instance.

The stage assets carry the deployed ``RetryPolicy`` and the reasoner its default retries
and backoff (only the timeout is shortened), so the wall times are those of a deployment.
For each failure mode of the scripted server the test checks the run's status, the
headline of its failure (the step's ``Failure`` description: the cause, with the server's
message, never "Exceeded max_retries" nor a traceback), the facts cursor, the dead letters
and the ``model_calls`` rows (one per request made), and what the watermark sensor's
next tick does: nothing more for a consumed batch, the same run again for a setup the
endpoint refused (its cause is in the headline; fixing it is the operator's move), and
no model-stage run while the endpoint is marked down, saying so.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import dagster as dg
import pytest

from stash_pipeline.consolidation.reasoner import reset_mode_cache
from stash_pipeline.defs.assets import build_stage_assets, episodes
from stash_pipeline.defs.resources import StashResource
from stash_pipeline.defs.sensors import watermark_sensor
from stash_pipeline.memory import namespaces as ns
from stash_pipeline.memory.episodes import remember
from stash_pipeline.store import Store
from testkit.openai_server import Reply, ScriptedOpenAI
from testkit.scripted_model import ScriptedModel
from tests.dagster.conftest import resource_for
from tests.dagster.test_sensors import requested, tick

#: the deployed assets: RetryPolicy of 3 retries, 10 s / 20 s / 40 s apart
ASSETS = build_stage_assets()

TEXTS = [
    "Alice lives in Paris near the river Seine",
    "Zebulon pasted the whole nightly Quartz backup log into the chat",
    "Bob deploys Kubernetes clusters every Friday",
]
POISON = TEXTS[1]
TOO_LONG = "prompt is too long for the context window (8412 tokens > 4096)"
#: a dead endpoint must fail a run within this many seconds
FAIL_FAST_S = 30.0


@dataclass
class Mode:
    """One way the endpoint fails, and what the run must show for it."""

    #: the chat responder (None: the endpoint's port is closed)
    responder: Callable[[dict[str, Any]], Reply | str] | None
    success: bool
    #: phrases of the failure's headline
    headline: tuple[str, ...] = ()
    #: (ok, start of error) of each model_calls row, in order
    calls: list[tuple[bool, str]] = field(default_factory=list)
    model: str = "scripted"
    #: the base URL lacks /v1 (a wrong route)
    no_v1: bool = False
    #: the endpoint is dead: the run must fail fast, and the next one too, with the same headline
    dead: bool = False


class PoisonModel(ScriptedModel):
    """Good answers, except a 400 for any request that lists the poison episode."""

    def __call__(self, request: dict[str, Any]) -> Reply | str:
        if POISON in json.dumps(request.get("messages", [])[:2]):
            return Reply(status=400, error_message=TOO_LONG)
        return super().__call__(request)


def _always(reply: Reply) -> Callable[[dict[str, Any]], Reply]:
    return lambda request: reply


MODES = {
    "400 model not found": Mode(
        _always(Reply(status=400, error_message="model 'nope' does not exist")),
        success=False,
        headline=("does not serve model 'nope'", "400: model 'nope' does not exist", "STASH_REASONER_MODEL"),
        calls=[(False, "400: model 'nope' does not exist")],
        model="nope",
    ),
    "401": Mode(
        _always(Reply(status=401, error_message="Incorrect API key provided: sk-wrong")),
        success=False,
        headline=("refuses the API key", "401: Incorrect API key provided", "STASH_OPENAI_API_KEY"),
        calls=[(False, "401: Incorrect API key provided")],
    ),
    "404 route": Mode(
        PoisonModel(),  # never reached: the route is wrong
        success=False,
        headline=("no chat route", "404: no route /chat/completions", "STASH_OPENAI_BASE_URL"),
        calls=[(False, "404: no route /chat/completions")],
        no_v1=True,
    ),
    "500": Mode(
        _always(Reply(status=500, error_message="scripted outage")),
        success=False,
        headline=("is down since", "(500): scripted outage"),
        calls=[(False, "500: scripted outage")] * 3,
        dead=True,
    ),
    "timeout": Mode(
        _always(Reply(content="{}", delay_s=3.0)),
        success=False,
        headline=("is down since", "(timeout): no answer within 1 s"),
        calls=[(False, "timeout: no answer within 1 s")] * 3,
        dead=True,
    ),
    "connection refused": Mode(
        None,
        success=False,
        headline=("is down since", "(connection error):", "Connection refused"),
        calls=[(False, "connection error")] * 3,
        dead=True,
    ),
    "one poison item among good ones": Mode(
        PoisonModel(),
        success=True,
        calls=[(True, ""), (False, f"400: {TOO_LONG}"), (True, "")],
    ),
}


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def endpoint(
    request: pytest.FixtureRequest, closed_port: int
) -> Iterator[tuple[Mode, str, ScriptedOpenAI | None]]:
    """The mode under test, the base URL of its endpoint and its server (None: a closed port)."""
    mode = MODES[request.param]
    reset_mode_cache()
    if mode.responder is None:
        yield mode, f"http://127.0.0.1:{closed_port}/v1", None
        return
    with ScriptedOpenAI(mode.responder, route_prefix="/v1") as server:
        yield mode, server.base_url.removesuffix("/v1") if mode.no_v1 else server.base_url, server
    reset_mode_cache()


def materialize(instance: dg.DagsterInstance, stash: StashResource, slug: str) -> tuple[Any, float]:
    started = time.monotonic()
    result = dg.materialize(
        [episodes, *ASSETS], selection=["facts"], partition_key=slug, instance=instance,
        resources={"stash": stash}, raise_on_error=False,
    )
    return result, time.monotonic() - started


def step_failure(result: Any) -> Any:
    (event,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    return event.step_failure_data


def retries(result: Any) -> int:
    return [e.event_type for e in result.all_events].count(dg.DagsterEventType.STEP_UP_FOR_RETRY)


def read(store: Store, sql: str) -> list[dict[str, Any]]:
    with store.db.connection() as conn:
        out = conn.execute(sql).fetchall()
        conn.commit()
    return out


def facts_cursor(store: Store) -> int:
    found = read(store, "SELECT cursor FROM stage_checkpoints WHERE stage = 'facts'")
    return int(found[0]["cursor"]) if found else 0


def calls(store: Store) -> list[dict[str, Any]]:
    return read(store, "SELECT ok, error FROM model_calls ORDER BY id")


@pytest.mark.parametrize("endpoint", list(MODES), indirect=True)
def test_each_failure_mode_of_the_model_endpoint(
    store: Store, instance: dg.DagsterInstance, settings: Any, endpoint: tuple[Mode, str, ScriptedOpenAI | None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mode, base_url, server = endpoint
    monkeypatch.setenv("STASH_FACTS_CLUSTERS_PER_CALL", "1")  # one request per episode
    stash = resource_for(settings, openai_base_url=base_url, reasoner_model=mode.model, reasoner_timeout_s=1.0)
    ns.create(store, "/x")
    ids = [remember(store, "/x", text).id for text in TEXTS]
    instance.add_dynamic_partitions("namespaces", ["/x"])

    result, took = materialize(instance, stash, "/x")

    assert result.success is mode.success
    made = calls(store)
    assert [(c["ok"], (c["error"] or "")[: len(want)]) for c, (_, want) in zip(made, mode.calls, strict=False)] == [
        (ok, want) for ok, want in mode.calls
    ]
    assert len(made) == len(mode.calls)
    letters = read(store, "SELECT item_id, status, last_error FROM dead_letters ORDER BY id")
    if mode.success:
        (meta,) = [
            {k: v.value for k, v in e.metadata.items()} for e in result.asset_materializations_for_node("facts")
        ]
        assert (meta["status"], meta["items_failed"], meta["model_calls"]) == ("ok", 1, len(mode.calls))
        assert facts_cursor(store) == ids[-1]
        assert [(d["item_id"], d["status"]) for d in letters] == [(ids[1], "pending")]
        assert f"400: {TOO_LONG}" in letters[0]["last_error"]
        assert ("facts", "/x") not in requested(tick(watermark_sensor, instance, stash, None))  # retried after backoff
        return

    # a failed run: the cause is the headline, nothing consumed, nothing dead-lettered
    failure = step_failure(result)
    headline = failure.user_failure_data.description
    assert headline.startswith("facts failed for /x: ")
    for phrase in mode.headline:
        assert phrase in headline
    assert "Exceeded max_retries" not in failure.error.message
    assert failure.error.cause is None and failure.error.context is None  # no traceback of the HTTP client
    metadata = {k: v.value for k, v in failure.user_failure_data.metadata.items()}
    assert metadata["model_calls"] == len(made) and metadata["cursor_to"] == 0
    assert retries(result) == 0
    assert facts_cursor(store) == 0
    assert letters == []
    assert result.asset_materializations_for_node("facts") == []
    following = tick(watermark_sensor, instance, stash, None)
    if not mode.dead:
        assert ("facts", "/x") in requested(following)  # the input still waits
        return
    # the endpoint is marked down: no run that would fail the same way, and the tick says why
    assert requested(following) == set()
    assert following.skip_reason is not None
    reason = following.skip_reason.skip_message or ""
    assert reason.startswith("blocked: facts (1 namespace(s): /x) have new input but model endpoint")
    assert "is down since" in reason and mode.calls[-1][1] in reason

    assert took < FAIL_FAST_S, f"a dead endpoint took {took:.1f} s to fail a run"
    # the next run knows the endpoint is down: one request, then the same headline
    again, took_again = materialize(instance, stash, "/x")
    assert not again.success and retries(again) == 0
    assert step_failure(again).user_failure_data.description.split(": ", 2)[:2] == headline.split(": ", 2)[:2]
    assert len(calls(store)) == len(made) + 1
    assert took_again < min(took, 10.0)  # one request instead of a round of retries
    assert facts_cursor(store) == 0 and read(store, "SELECT id FROM dead_letters") == []
    if server is not None:
        # the endpoint answers again: the first request closes the breaker and the run goes on
        server.responder = ScriptedModel()
        healed, _ = materialize(instance, stash, "/x")
        assert healed.success and facts_cursor(store) == ids[-1]
