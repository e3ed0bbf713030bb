"""The consolidation-quality benchmark runs end to end against the scripted server (the harness).

Also the acceptance scenario of real local servers: with default settings, a server that
refuses json_schema with a 500 and a model that rambles still yields facts, in bounded
time, with every call in the ledger.
"""

from __future__ import annotations

import pytest

from bench import consolidation_quality as quality
from stash_pipeline.consolidation.reasoner import reset_mode_cache
from testkit.openai_server import ScriptedOpenAI
from testkit.scripted_model import ScriptedModel


@pytest.fixture(autouse=True)
def _bench_database(database_url, monkeypatch):
    # the benchmark creates (and drops) its own database on the test server
    monkeypatch.setenv("STASH_DATABASE_URL", database_url)
    reset_mode_cache()
    yield
    reset_mode_cache()


def test_the_benchmark_scores_the_scripted_model(capsys):
    with ScriptedOpenAI(ScriptedModel()) as srv:
        result = quality.main(["--base-url", srv.base_url, "--model", "scripted", "--embedder", "hash"])
        requests = len(srv.chat_requests())
    out = capsys.readouterr().out
    assert "| facts |" in out and "model calls per episode" in out
    totals = result["totals"]
    assert totals["episodes"] == 38 and totals["facts_labelled"] == 24
    # the scripted model copies its sources: grounded, never hallucinated, but it does derive
    # "facts" from chatter, which the benchmark must count
    assert totals["facts_hallucinated"] == 0 and totals["facts_from_empty"] > 0
    assert 0.5 <= result["facts_recall"] <= 1 and 0 < result["facts_precision"] < 1
    assert result["relationships_recall"] > 0.5
    assert result["calls_per_episode"] == requests / 38 and result["failed_stages"] == []
    assert result["mode"] == "json_schema"


def test_a_500_refusing_server_and_a_rambling_model_still_yield_facts():
    model = ScriptedModel()
    model.inject("facts", "ramble", times=2)  # the first batch is cut off, then one half of it
    with ScriptedOpenAI(model, reject_formats=("json_schema",), reject_status=500, tokens_per_s=5000) as srv:
        result = quality.evaluate(srv.base_url, "small", embedder="hash", timeout_s=5.0)
        requests = len(srv.chat_requests())
    assert result["mode"] == "json_object" and result["failed_stages"] == []
    assert result["truncated_calls"] == 2 and result["failed_calls"] == 1  # the one 500 refusal
    assert result["totals"]["facts_derived"] > 20 and result["facts_recall"] >= 0.5
    assert result["calls_per_episode"] * 38 == pytest.approx(requests)  # every request is in the ledger


def test_matching_is_normalised_and_hallucinations_are_caught():
    derived = {"entity": "the Billing service", "value": "Postgres 15", "content": "Billing runs Postgres 15.",
               "episodes": [7]}
    gold = {"entity": "Billing", "value": "postgres 15", "sources": ["o3"]}
    assert quality.fact_matches(gold, derived, {7: "o3"})
    assert not quality.fact_matches(gold, derived, {7: "o2"})  # right words, wrong source
    assert not quality.fact_matches({**gold, "value": "Postgres 14"}, derived, {7: "o3"})
    source = "We upgraded the Billing database to Postgres 15 on Monday night."
    assert quality.hallucinated(derived, source) == ["service"]  # no source says "service"
    assert quality.hallucinated({"entity": "Billing", "value": "Postgres 15", "content": "Billing uses Postgres 15."},
                                source) == []
    embellished = {"entity": "Nimbus", "value": "Billing", "content": "Nimbus routes payment traffic to the Billing "
                   "service. The product is a coffee-flavored beverage available at the Billing service."}
    assert quality.hallucinated(embellished, "The Nimbus gateway routes payment traffic to the Billing service. "
                                "brb, coffee") == ["available", "beverage", "flavor", "product"]
    paraphrase = {"entity": "Alice", "value": "Acme", "content": "Alice is employed by Acme as a site reliability engineer."}
    assert quality.hallucinated(paraphrase, "Alice joined Acme as a site reliability engineer in Lyon.") == []
    invented = {"entity": "Bob", "value": "42 elephants", "content": "Bob owns 42 elephants."}
    assert set(quality.hallucinated(invented, source)) >= {"bob", "42", "elephant"}


def test_the_facts_stage_on_one_conversation_against_the_planted_truth(capsys):
    """The default run, on the first conversation: windows only, every planted fact given,
    under 2% of the turns dead-lettered, and the stage's facts add to recall."""
    result = quality.main(["--conversations", "1", "--embedder", "hash"])
    out = capsys.readouterr().out
    assert "dead-lettered episodes" in out and "Recall with the stage's own facts" in out
    assert result["conversations"] == 1 and result["windows"] > 0 and result["clusters"] == 0
    assert result["planted_answered"] == result["planted_facts"] > 40
    assert result["facts_created"] + result["facts_reinforced"] + result["facts_refused"] == result["planted_facts"]
    assert result["dead_letter_rate"] < 0.02
    assert 0 < result["facts_calls_per_episode"] <= 0.1
    before, after = result["recall"]["episodes only"], result["recall"]["episodes + stage facts"]
    assert after["dev/all"]["r@10"] > before["dev/all"]["r@10"]
