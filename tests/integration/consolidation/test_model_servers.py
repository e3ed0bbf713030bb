"""Real model-server behaviours: format refusals on any status, rambling models, single-slot servers.

Each test runs the facts stage against the scripted OpenAI-compatible server behaving like
a server seen in the field, and reads the story back from ``model_calls`` (every HTTP
request), ``dead_letters`` and ``reasoner_modes``.
"""

from __future__ import annotations

import threading
import time

import pytest

from stash_pipeline import errors
from stash_pipeline.consolidation import dead_letters, model_server, runner
from stash_pipeline.consolidation.reasoner import Reasoner, RunLedger, reset_mode_cache
from stash_pipeline.stages import prompts
from testkit.openai_server import Reply, ScriptedOpenAI
from testkit.scripted_model import ScriptedModel
from tests.integration.consolidation.conftest import rows, seed

EPISODES = [
    "Alice works at Acme in the Lyon office",
    "Alice works at Acme in the Lyon office today",
    "Bob deploys Kubernetes clusters every Friday",
    "Carol writes Rust code for the Nimbus project",
]


def _formats(server: ScriptedOpenAI) -> list[str | None]:
    return [(r.get("response_format") or {}).get("type") for r in server.chat_requests()]


def _store(make_store, server: ScriptedOpenAI, **overrides):
    values = {"openai_base_url": server.base_url, "reasoner_model": "small", "reasoner_backoff_s": 0.01,
              "reasoner_timeout_s": 1.0, "reasoner_max_retries": 1}
    values.update(overrides)
    return make_store(**values)


def test_a_500_refusing_json_schema_steps_down_and_is_remembered_in_the_database(make_store):
    reset_mode_cache()
    with ScriptedOpenAI(ScriptedModel(), reject_formats=("json_schema",), reject_status=500) as srv:
        store = _store(make_store, srv)
        seed(store, "/m", EPISODES)
        report = runner.run_stage(store, "/m", "facts")
        assert report.status == "ok" and report.rows_written == 3
        assert _formats(srv) == ["json_schema", "json_object"]  # one refusal, no outage retries
        calls = rows(store, "SELECT ok, error FROM model_calls ORDER BY id")
        assert calls[0]["ok"] is False
        assert calls[0]["error"].startswith("500: response_format json_schema refused")
        assert '"response_format" must be one of "text" or "json_object"' in calls[0]["error"]
        assert calls[1] == {"ok": True, "error": None}
        (memory,) = rows(store, "SELECT endpoint, model, mode, reason, verified_at FROM reasoner_modes")
        assert (memory["endpoint"], memory["model"], memory["mode"]) == (srv.base_url, "small", "json_object")
        assert "must be one of" in memory["reason"] and memory["verified_at"] is not None

        # Another process (empty cache) starts from the database: json_schema is not asked again.
        reset_mode_cache()
        seed(store, "/m", ["Dave tests Python scripts on Monday"])
        assert runner.run_stage(store, "/m", "facts").rows_written == 1
        assert _formats(srv)[2:] == ["json_object"]
    reset_mode_cache()


def test_refusals_step_down_to_no_response_format(make_store):
    reset_mode_cache()
    with ScriptedOpenAI(ScriptedModel(), reject_formats=("json_schema", "json_object"), reject_status=500) as srv:
        store = _store(make_store, srv)
        seed(store, "/m", EPISODES[:1])
        assert runner.run_stage(store, "/m", "facts").rows_written == 1
        assert _formats(srv) == ["json_schema", "json_object", None]
        assert rows(store, "SELECT mode FROM reasoner_modes") == [{"mode": "none"}]
    reset_mode_cache()


@pytest.mark.parametrize("status", [500, 502, 503])
def test_an_error_without_a_format_refusal_stays_an_outage(make_store, status):
    reset_mode_cache()

    def outage(request):
        return Reply(status=status, error_message="upstream connect error or disconnect/reset before headers")

    with ScriptedOpenAI(outage) as srv:
        store = _store(make_store, srv)
        seed(store, "/m", EPISODES[:1])
        with pytest.raises(errors.ModelUnavailable, match=f"after 2 tries \\({status}\\)"):
            runner.run_stage(store, "/m", "facts")
        assert _formats(srv) == ["json_schema", "json_schema"]  # retried as an outage, format kept
        assert rows(store, "SELECT mode FROM reasoner_modes") == []
    reset_mode_cache()


def test_connection_refused_is_an_outage(make_store):
    reset_mode_cache()
    with ScriptedOpenAI() as srv:
        url = srv.base_url
    store = make_store(openai_base_url=url, reasoner_model="small", reasoner_backoff_s=0.01, reasoner_max_retries=1)
    seed(store, "/m", EPISODES[:1])
    with pytest.raises(errors.ModelUnavailable, match="connection error"):
        runner.run_stage(store, "/m", "facts")
    assert [c["error"].split(":")[0] for c in rows(store, "SELECT error FROM model_calls")] == ["connection error"] * 2
    assert rows(store, "SELECT mode FROM reasoner_modes") == []


def test_every_call_sends_max_tokens_sized_from_schema_and_batch(cstore, server, model):
    seed(cstore, "/m", EPISODES)
    runner.run_all(cstore, "/m", stages=["facts", "relationships"])
    requests = server.chat_requests()
    assert requests and all(0 < r["max_tokens"] <= 1024 for r in requests)
    facts_call = next(r for r in requests if "STAGE: facts" in r["messages"][0]["content"])
    per_cluster = model_server.tokens_per_item(prompts.FactsAnswer)
    # three clusters of four observations in one call; a cluster may give several facts,
    # so the budget counts the listed observations
    assert facts_call["max_tokens"] == 48 + 4 * per_cluster
    capped = Reasoner(cstore.settings.model_copy(update={"reasoner_max_output_tokens": 200}), None)
    capped.call("facts", None, prompts.FACTS, "Cluster 1:\n[1] Alice works at Acme", prompts.FactsAnswer,
                run=RunLedger())
    assert server.chat_requests()[-1]["max_tokens"] == min(200, 48 + per_cluster)


def test_a_model_that_never_stops_is_cut_at_max_tokens_and_dead_lettered(make_store):
    reset_mode_cache()
    model = ScriptedModel()
    model.inject("facts", "ramble", times=100)
    with ScriptedOpenAI(model, tokens_per_s=4000) as srv:
        store = _store(make_store, srv, reasoner_max_output_tokens=256)
        ids = seed(store, "/m", EPISODES)
        started = time.monotonic()
        report = runner.run_stage(store, "/m", "facts")
        assert time.monotonic() - started < 10
        assert report.status == "ok" and report.rows_written == 0 and report.cursor_to == ids[-1]
        assert report.items_failed == 4  # every episode of the three clusters, dead-lettered
        # 1 call for the batch of 3 clusters, split into [1] + [2]; [2] split into [1] + [1];
        # each single cluster: one call + one retry
        calls = rows(store, "SELECT ok, error, completion_tokens FROM model_calls ORDER BY id")
        assert len(calls) == 1 + 1 + 3 * 2
        assert all(c["ok"] and c["error"].startswith("truncated: finish_reason=length") for c in calls)
        assert all(r["max_tokens"] <= 256 for r in srv.chat_requests())
        assert [c["completion_tokens"] for c in calls] == [r["max_tokens"] for r in srv.chat_requests()]
        letters = dead_letters.list_(store, "/m")
        assert sorted(d["item_id"] for d in letters) == ids
        assert all("cut off at max_tokens" in d["last_error"] for d in letters)
        # the retry prompt asks for brevity
        assert "was cut off" in srv.chat_requests()[-1]["messages"][-1]["content"]
    reset_mode_cache()


def test_a_model_that_rambles_once_still_yields_every_fact(cstore, server, model):
    seed(cstore, "/m", EPISODES)
    model.inject("facts", "ramble", times=1)
    report = runner.run_stage(cstore, "/m", "facts")
    assert report.status == "ok" and report.rows_written == 3 and report.items_failed == 0
    calls = rows(cstore, "SELECT error FROM model_calls ORDER BY id")
    assert calls[0]["error"].startswith("truncated") and [c["error"] for c in calls[1:]] == [None, None]
    listed = [r["messages"][1]["content"].count("Cluster ") for r in server.chat_requests()]
    assert listed == [3, 1, 2]  # the batch, then its two halves


def test_a_single_slot_server_still_busy_after_a_timeout_is_waited_for(make_store):
    """The client gives up after 1 s; the server keeps generating until 1.8 s; the retry must not queue."""
    reset_mode_cache()
    model = ScriptedModel(timeout_s=1.8)
    model.inject("facts", "timeout", times=1)
    with ScriptedOpenAI(model, single_slot=True) as srv:
        store = _store(make_store, srv)
        seed(store, "/m", EPISODES)
        report = runner.run_stage(store, "/m", "facts")
        assert report.status == "ok" and report.rows_written == 3
        calls = rows(store, "SELECT ok, attempt, error FROM model_calls ORDER BY id")
        assert [(c["ok"], c["attempt"]) for c in calls] == [(False, 1), (True, 2)]
        assert calls[0]["error"].startswith("timeout")
        assert srv.max_concurrent == 1  # the retry came after the abandoned generation ended
    reset_mode_cache()


@pytest.mark.parametrize("concurrency", [1, 2])
def test_requests_in_flight_per_endpoint_are_limited(make_store, concurrency):
    reset_mode_cache()

    def slow(request):
        return Reply(content='{"facts": []}', delay_s=0.3)

    with ScriptedOpenAI(slow) as srv:
        store = _store(make_store, srv, reasoner_concurrency=concurrency)
        reasoners = [Reasoner(store.settings, store.db) for _ in range(3)]
        threads = [
            threading.Thread(target=r.call, args=("facts", None, prompts.FACTS, "Cluster 1:\n[1] x", prompts.FactsAnswer),
                             kwargs={"run": RunLedger()})
            for r in reasoners
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(srv.chat_requests()) == 3 and srv.max_concurrent == concurrency
    reset_mode_cache()
