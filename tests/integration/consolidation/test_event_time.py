"""Every derived fact takes its event time from its sources, never from the moment the
stage ran: failure-pattern facts and facts confirmed from hypotheses included."""

from __future__ import annotations

from datetime import UTC, datetime

from stash_pipeline import consolidation
from stash_pipeline.memory import failures, hypotheses
from tests.integration.consolidation.conftest import rows, seed

LAST_YEAR = datetime(2025, 3, 1, 9, tzinfo=UTC)


def test_a_failure_pattern_fact_holds_from_its_evidence(cstore, server, model):
    seed(cstore, "/f", ["Deploy script failed on Friday with Postgres timeout"], occurred_at=LAST_YEAR)
    failures.create(cstore, "/f", "Deploy script failed with Postgres timeout",
                    "connection pool too small", "raise the pool size")
    consolidation.run_stage(cstore, "/f", "failure_patterns")
    seed(cstore, "/f", ["Deploy script failed again with Postgres timeout at noon",
                        "Nightly deploy script failed with Postgres timeout"], occurred_at=LAST_YEAR)
    report = consolidation.run_stage(cstore, "/f", "failure_patterns")
    assert report.details["pattern_facts"] == 1
    [fact] = rows(cstore, "SELECT valid_from, recorded_at FROM facts WHERE origin = 'failure_pattern'")
    assert fact["valid_from"] == LAST_YEAR and fact["recorded_at"] > LAST_YEAR


def test_a_confirmed_hypothesis_holds_from_its_evidence(cstore, server, model):
    seed(cstore, "/h", [])
    hyp = hypotheses.create(cstore, "/h", "Friday deploys of Kubernetes clusters cause outages",
                            "Check deploy logs for Friday Kubernetes outages", confidence=0.5)
    seed(cstore, "/h", ["Bob deploys Kubernetes clusters every Friday",
                        "Bob deploys Kubernetes clusters every Friday morning"], occurred_at=LAST_YEAR)
    consolidation.run_stage(cstore, "/h", "facts")
    consolidation.run_stage(cstore, "/h", "hypothesis_evidence")
    seed(cstore, "/h", ["Kubernetes clusters deploys on Friday caused outages for Bob",
                        "Kubernetes clusters deploys on Friday caused outages for Bob again"], occurred_at=LAST_YEAR)
    consolidation.run_stage(cstore, "/h", "facts")
    report = consolidation.run_stage(cstore, "/h", "hypothesis_evidence")
    assert report.details["hypotheses_confirmed"] == 1
    [fact] = rows(cstore, "SELECT f.valid_from FROM facts f JOIN hypotheses h ON h.confirmed_fact_id = f.id "
                          "WHERE h.id = %(id)s", id=hyp.id)
    assert fact["valid_from"] == LAST_YEAR
