"""Every derived fact takes its event time from its sources, never from the moment the
stage ran: failure-pattern facts and facts confirmed from hypotheses included; and the
stages place facts on their entity+property timeline by the same rule as assert_fact."""

from __future__ import annotations

from datetime import UTC, datetime

from stash_pipeline.consolidation import runner
from stash_pipeline.memory import failures, hypotheses
from tests.integration.consolidation.conftest import rows, seed

LAST_YEAR = datetime(2025, 3, 1, 9, tzinfo=UTC)


def test_a_failure_pattern_fact_holds_from_its_evidence(cstore, server, model):
    seed(cstore, "/f", ["Deploy script failed on Friday with Postgres timeout"], occurred_at=LAST_YEAR)
    failures.create(cstore, "/f", "Deploy script failed with Postgres timeout",
                    "connection pool too small", "raise the pool size")
    runner.run_stage(cstore, "/f", "failure_patterns")
    seed(cstore, "/f", ["Deploy script failed again with Postgres timeout at noon",
                        "Nightly deploy script failed with Postgres timeout"], occurred_at=LAST_YEAR)
    report = runner.run_stage(cstore, "/f", "failure_patterns")
    assert report.details["pattern_facts"] == 1
    [fact] = rows(cstore, "SELECT valid_from, recorded_at FROM facts WHERE origin = 'failure_pattern'")
    assert fact["valid_from"] == LAST_YEAR and fact["recorded_at"] > LAST_YEAR


def test_a_confirmed_hypothesis_holds_from_its_evidence(cstore, server, model):
    seed(cstore, "/h", [])
    hyp = hypotheses.create(cstore, "/h", "Friday deploys of Kubernetes clusters cause outages",
                            "Check deploy logs for Friday Kubernetes outages", confidence=0.5)
    seed(cstore, "/h", ["Bob deploys Kubernetes clusters every Friday",
                        "Bob deploys Kubernetes clusters every Friday morning"], occurred_at=LAST_YEAR)
    runner.run_stage(cstore, "/h", "facts")
    runner.run_stage(cstore, "/h", "hypothesis_evidence")
    seed(cstore, "/h", ["Kubernetes clusters deploys on Friday caused outages for Bob",
                        "Kubernetes clusters deploys on Friday caused outages for Bob again"], occurred_at=LAST_YEAR)
    runner.run_stage(cstore, "/h", "facts")
    report = runner.run_stage(cstore, "/h", "hypothesis_evidence")
    assert report.details["hypotheses_confirmed"] == 1
    [fact] = rows(cstore, "SELECT f.valid_from FROM facts f JOIN hypotheses h ON h.confirmed_fact_id = f.id "
                          "WHERE h.id = %(id)s", id=hyp.id)
    assert fact["valid_from"] == LAST_YEAR


def test_the_facts_stage_keeps_one_value_at_a_time(cstore, server, model):
    """The stage's contradiction check slots facts by the same rule as assert_fact: a late
    statement ends where the next known value begins (not where the current one does), and
    a value stated inside a closed interval supersedes the value holding there."""
    from stash_pipeline.memory import facts

    paris_at = datetime(2026, 3, 1, tzinfo=UTC)
    seed(cstore, "/t", ["Alice lives in Paris near the river Seine"], occurred_at=paris_at)
    runner.run_stage(cstore, "/t", "facts")
    seed(cstore, "/t", ["Alice lives in Berlin since 2026-06-15"], occurred_at=datetime(2026, 7, 1, tzinfo=UTC))
    assert runner.run_stage(cstore, "/t", "facts").details["superseded"] == 1
    seed(cstore, "/t", ["Alice lives in Lyon since the spring"], occurred_at=datetime(2025, 6, 1, tzinfo=UTC))
    runner.run_stage(cstore, "/t", "facts")
    [lyon] = rows(cstore, "SELECT valid_from, valid_until FROM facts WHERE value = 'Lyon'")
    assert lyon == {"valid_from": datetime(2025, 6, 1, tzinfo=UTC), "valid_until": paris_at}
    seed(cstore, "/t", ["Alice lives in Rome since 2026-05-01"], occurred_at=datetime(2026, 7, 2, tzinfo=UTC))
    assert runner.run_stage(cstore, "/t", "facts").details["superseded"] == 1
    for when, value in [(datetime(2025, 12, 1, tzinfo=UTC), "Lyon"), (datetime(2026, 4, 1, tzinfo=UTC), "Paris"),
                        (datetime(2026, 5, 15, tzinfo=UTC), "Rome"), (None, "Berlin")]:
        assert [f.value for f in facts.query(cstore, "/t", as_of=when)] == [value], when
