"""Never stall, never duplicate: faults, crashes, concurrency, budgets, dead letters, accounting."""

from __future__ import annotations

import threading

import pytest

from stash_pipeline import errors
from stash_pipeline.consolidation import dead_letters, runner
from stash_pipeline.db.locks import stage_lock_key
from stash_pipeline.memory import lineage
from testkit.openai_server import ScriptedOpenAI
from testkit.scripted_model import ScriptedModel
from tests.integration.consolidation.conftest import rows, seed

EPISODES = [
    "Alice works at Acme in the Lyon office",
    "Alice works at Acme in the Lyon office today",
    "Bob deploys Kubernetes clusters every Friday",
    "Carol writes Rust code for the Nimbus project",
]


def test_garbage_is_retried_then_dead_lettered_while_later_items_proceed(cstore, server, model):
    bad = seed(cstore, "/r", ["Alice works at Acme in the Lyon office"])
    model.inject("facts", "garbage", times=2)  # both attempts of the first call
    first = runner.run_stage(cstore, "/r", "facts")
    assert (first.items_failed, first.dead_lettered, first.cursor_to) == (1, 0, bad[0])
    assert first.model_calls == 2  # one call, two attempts (validation error fed back)
    retry_request = server.chat_requests()[1]
    assert retry_request["messages"][-1]["content"].startswith("Your previous answer was invalid")

    later = seed(cstore, "/r", ["Bob deploys Kubernetes clusters every Friday"])
    model.inject("facts", "schema", times=2)  # the retry of the pending item fails again
    second = runner.run_stage(cstore, "/r", "facts")
    assert second.items_failed == 1 and second.rows_written == 1  # the new episode still became a fact
    assert second.cursor_to == later[0]
    model.inject("facts", "garbage", times=2)
    third = runner.run_stage(cstore, "/r", "facts")
    assert (third.items_failed, third.dead_lettered) == (1, 1)
    letters = dead_letters.list_(cstore, "/r")
    assert [(d["item_id"], d["attempts"], d["status"]) for d in letters] == [(bad[0], 3, "dead")]
    assert "invalid model answer after 2 attempts" in letters[0]["last_error"]
    # dead items are not retried automatically
    fourth = runner.run_stage(cstore, "/r", "facts")
    assert fourth.status == "idle" and fourth.model_calls == 0
    status = {r["stage"]: r for r in runner.status(cstore, "/r")}
    assert (status["facts"]["dead_letters_dead"], status["facts"]["dead_letters_pending"]) == (1, 0)
    # an operator retries it: it is processed on the next run and marked retried
    assert dead_letters.retry(cstore, [letters[0]["id"]], namespaces="/r") == [letters[0]["id"]]
    fifth = runner.run_stage(cstore, "/r", "facts")
    assert fifth.rows_written == 1
    assert dead_letters.list_(cstore, "/r")[0]["status"] == "retried"
    seed(cstore, "/other", [])
    assert dead_letters.drop(cstore, [letters[0]["id"]], namespaces="/other") == []  # out of scope: untouched
    assert dead_letters.drop(cstore, [letters[0]["id"]], namespaces="/r") == [letters[0]["id"]]
    assert dead_letters.list_(cstore, "/r", status="dropped")[0]["item_id"] == bad[0]


def test_wrong_ids_are_fed_back_and_retried(cstore, server, model):
    seed(cstore, "/r", EPISODES)
    runner.run_stage(cstore, "/r", "facts")
    model.inject("relationships", "wrong_ids", times=1)
    report = runner.run_stage(cstore, "/r", "relationships")
    assert report.items_failed == 0 and report.model_calls == 2
    first, second = [r for r in server.chat_requests() if "STAGE: relationships" in r["messages"][0]["content"]]
    assert len(first["messages"]) == 2
    assert "[999999] are not in the listing" in second["messages"][-1]["content"]
    assert len(rows(cstore, "SELECT id FROM relationships")) == 3


@pytest.mark.parametrize("fault", ["status500", "status429", "timeout"])
def test_outage_fails_the_run_and_keeps_the_cursor(cstore, server, model, fault):
    seed(cstore, "/r", EPISODES)
    model.inject("facts", fault, times=2)  # first try + one retry (reasoner_max_retries=1)
    with pytest.raises(errors.ModelUnavailable):
        runner.run_stage(cstore, "/r", "facts")
    assert rows(cstore, "SELECT cursor, last_status FROM stage_checkpoints WHERE stage = 'facts'") == [
        {"cursor": 0, "last_status": "failed"}
    ]
    assert rows(cstore, "SELECT id FROM facts") == []
    failed = rows(cstore, "SELECT ok, attempt, error FROM model_calls ORDER BY id")
    assert [(c["ok"], c["attempt"]) for c in failed] == [(False, 1), (False, 2)]
    assert failed[0]["error"].startswith({"status500": "500", "status429": "429", "timeout": "timeout"}[fault])
    ok = runner.run_stage(cstore, "/r", "facts")
    assert ok.status == "ok" and ok.rows_written == 3 and ok.cursor_to > 0
    # run_all reports the outage instead of raising, and still runs decay
    seed(cstore, "/r", ["Dave tests Python scripts on Monday"])
    model.inject("*", "status500", times=2)
    reports = {r.stage: r.status for r in runner.run_all(cstore, "/r")}
    assert reports["facts"] == "failed" and reports["relationships"] == "skipped" and reports["decay"] == "idle"


def test_crash_mid_batch_then_rerun_equals_clean_run(cstore, server, model, make_store, monkeypatch):
    clean = make_store(openai_base_url=server.base_url, reasoner_model="scripted")
    seed(cstore, "/crash", EPISODES)
    seed(clean, "/clean", [])
    # the "clean" namespace gets the same episodes, consolidated without incident
    seed(clean, "/clean", EPISODES)
    runner.run_all(clean, "/clean", stages=["facts", "relationships"])
    clean_facts = rows(cstore, "SELECT entity, value, content FROM facts f JOIN namespaces n ON n.id = f.namespace_id"
                               " WHERE n.slug = '/clean' ORDER BY content")

    real_add = lineage.add
    calls = {"n": 0}

    def crash_once(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:  # after the first fact's lineage, before the second's
            raise RuntimeError("injected crash")
        return real_add(*args, **kwargs)

    monkeypatch.setattr(lineage, "add", crash_once)
    with pytest.raises(RuntimeError, match="injected crash"):
        runner.run_stage(cstore, "/crash", "facts")
    assert rows(cstore, "SELECT count(*) AS n FROM facts f JOIN namespaces n ON n.id = f.namespace_id WHERE n.slug = '/crash'")[0]["n"] == 0
    monkeypatch.setattr(lineage, "add", real_add)
    runner.run_all(cstore, "/crash", stages=["facts", "relationships"])
    crash_facts = rows(cstore, "SELECT entity, value, content FROM facts f JOIN namespaces n ON n.id = f.namespace_id"
                               " WHERE n.slug = '/crash' ORDER BY content")
    assert crash_facts == clean_facts and len(crash_facts) == 3
    per_ns = rows(cstore, "SELECT n.slug, count(*) AS n FROM relationships r JOIN namespaces n ON n.id = r.namespace_id GROUP BY 1 ORDER BY 1")
    assert [(r["slug"], r["n"]) for r in per_ns] == [("/clean", 3), ("/crash", 3)]


def test_two_runners_never_duplicate(cstore, server, model):
    seed(cstore, "/c", EPISODES)
    results: list[object] = []

    def run_one(wait: bool) -> None:
        results.append(runner.run_stage(cstore, "/c", "facts", wait=wait))

    threads = [threading.Thread(target=run_one, args=(True,)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.rows_written for r in results) == [0, 0, 3]
    assert len(rows(cstore, "SELECT id FROM facts")) == 3
    assert len([r for r in server.chat_requests() if "STAGE: facts" in r["messages"][0]["content"]]) == 1


def test_busy_when_lock_is_held(cstore, server, model):
    seed(cstore, "/c", EPISODES)
    with cstore.db.transaction() as tx:
        ns_id = tx.scalar("get_namespace_by_slug", slug="/c")
    with cstore.db.connection() as conn:
        conn.execute("SELECT pg_advisory_lock(%s, %s)", (stage_lock_key("facts"), ns_id))
        conn.commit()
        report = runner.run_stage(cstore, "/c", "facts")
        conn.execute("SELECT pg_advisory_unlock(%s, %s)", (stage_lock_key("facts"), ns_id))
        conn.commit()
    assert report.status == "busy" and report.model_calls == 0
    assert runner.run_stage(cstore, "/c", "relationships").status == "idle"  # other stages are not blocked


def test_auto_mode_falls_back_to_json_object_and_remembers(make_store):
    model = ScriptedModel()
    with ScriptedOpenAI(model, reject_formats=("json_schema",)) as srv:
        store = make_store(openai_base_url=srv.base_url, reasoner_model="llamacpp", reasoner_backoff_s=0.01)
        seed(store, "/m", EPISODES)
        runner.run_all(store, "/m", stages=["facts", "relationships"])
        formats = [(r["body"].get("response_format") or {}).get("type") for r in srv.requests]
        assert formats[:2] == ["json_schema", "json_object"]
        assert set(formats[2:]) == {"json_object"}
        assert "schema" in srv.requests[1]["body"]["response_format"]
        calls = rows(store, "SELECT ok, error FROM model_calls ORDER BY id")
        assert calls[0]["ok"] is False and calls[0]["error"].startswith("400")
        assert all(c["ok"] for c in calls[1:])
        assert len(rows(store, "SELECT id FROM relationships")) == 3


def test_none_mode_sends_no_response_format(make_store):
    with ScriptedOpenAI(ScriptedModel(), reject_formats=("json_schema", "json_object")) as srv:
        store = make_store(openai_base_url=srv.base_url, reasoner_model="plain", reasoner_structured="none")
        seed(store, "/m", EPISODES[:1])
        assert runner.run_stage(store, "/m", "facts").rows_written == 1
        assert all("response_format" not in r["body"] for r in srv.requests)


def test_token_budget_stops_cleanly_at_a_committed_batch(make_store, server, model):
    store = make_store(openai_base_url=server.base_url, reasoner_model="scripted",
                       consolidation_batch_size=1, reasoner_token_budget=1)
    ids = seed(store, "/b", EPISODES[2:])
    report = runner.run_stage(store, "/b", "facts")
    assert report.status == "budget_exceeded" and "token budget" in report.message
    assert report.model_calls == 1 and report.cursor_to == ids[0]
    assert rows(store, "SELECT cursor FROM stage_checkpoints WHERE stage = 'facts'")[0]["cursor"] == ids[0]


def test_every_call_is_accounted(cstore, server, model):
    seed(cstore, "/a", EPISODES)
    reports = runner.run_all(cstore, "/a")
    logged = rows(cstore, "SELECT stage, count(*) AS n, sum(prompt_tokens) AS tin, sum(completion_tokens) AS tout,"
                          " count(DISTINCT run_id) AS runs FROM model_calls GROUP BY stage")
    by_stage = {r["stage"]: r for r in logged}
    assert sum(r["n"] for r in logged) == len(server.chat_requests())
    for report in reports:
        if report.model_calls:
            row = by_stage[report.stage]
            assert (row["n"], row["tin"], row["tout"]) == (report.model_calls, report.tokens_in, report.tokens_out)
    assert len({r["runs"] for r in logged}) == 1


def test_a_400_after_the_format_is_confirmed_fails_the_item_not_the_format(cstore, server, model):
    seed(cstore, "/m", EPISODES[:1])
    runner.run_stage(cstore, "/m", "facts")  # json_schema works: confirmed for this endpoint
    later = seed(cstore, "/m", EPISODES[2:3])
    model.inject("facts", "status400", times=1)
    report = runner.run_stage(cstore, "/m", "facts")
    assert (report.items_failed, report.cursor_to) == (1, later[0])
    assert "rejected the request" in dead_letters.list_(cstore, "/m")[0]["last_error"]
    formats = [(r.get("response_format") or {}).get("type") for r in server.chat_requests()]
    assert set(formats) == {"json_schema"}


def test_fault_on_a_chosen_call_number(cstore, server, model):
    seed(cstore, "/k", EPISODES)
    model.inject_at(1, "think")
    model.inject_at(2, "garbage")  # the first stage call's answer is fine (think), then relationships' first try fails
    runner.run_all(cstore, "/k", stages=["facts", "relationships"])
    calls = rows(cstore, "SELECT stage, attempt, ok FROM model_calls ORDER BY id")
    assert [c["stage"] for c in calls][:3] == ["facts", "relationships", "relationships"]
    assert len(rows(cstore, "SELECT id FROM relationships")) == 3
