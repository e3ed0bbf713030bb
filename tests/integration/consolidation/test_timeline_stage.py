"""The stages' contradiction check sees every value holding at a new fact's start, however
many facts its key has and in whatever order they arrived (it once read the 20 oldest
facts of the key by arrival, so a key told newest-first hid its oldest value)."""

from __future__ import annotations

from datetime import UTC, datetime

from stash_pipeline.consolidation import runner
from stash_pipeline.memory import facts
from tests.integration.consolidation.conftest import rows, seed


def test_a_key_with_many_facts_still_finds_the_value_holding(cstore, server, model):
    seed(cstore, "/t", [])
    # 25 homes, told newest first: each later statement is history before the one told earlier
    for year in range(2024, 1999, -1):
        facts.assert_fact(cstore, "/t", f"Alice lives in Town{year}", entity="Alice", property="lives",
                          value=f"Town{year}", valid_from=datetime(year, 1, 1, tzinfo=UTC))
    seed(cstore, "/t", ["Alice lives in Berlin since the spring"], occurred_at=datetime(2000, 6, 1, tzinfo=UTC))
    report = runner.run_stage(cstore, "/t", "facts")
    assert report.details["superseded"] == 1
    [berlin] = rows(cstore, "SELECT id, valid_from, valid_until FROM facts WHERE value = 'Berlin'")
    [town] = rows(cstore, "SELECT id, valid_until, superseded_by FROM facts WHERE value = 'Town2000'")
    pairs = rows(cstore, "SELECT old_fact_id, new_fact_id, resolution FROM contradictions")
    assert pairs == [{"old_fact_id": town["id"], "new_fact_id": berlin["id"], "resolution": "superseded"}]
    assert (town["valid_until"], town["superseded_by"]) == (berlin["valid_from"], berlin["id"])
    assert berlin["valid_until"] == datetime(2001, 1, 1, tzinfo=UTC)  # history before Town2001
    for at, value in ((datetime(2000, 3, 1, tzinfo=UTC), "Town2000"), (datetime(2000, 9, 1, tzinfo=UTC), "Berlin")):
        assert [f.value for f in facts.query(cstore, "/t", entity="Alice", as_of=at)] == [value]


def test_an_expiry_by_decay_stays_when_the_key_is_recomputed(cstore):
    """The decay stage's expiry is a given end: recomputing the key (a later value stated,
    then withdrawn) does not reopen the expired value."""
    seed(cstore, "/d", [])
    acme = facts.assert_fact(cstore, "/d", "Alice works at Acme", entity="Alice", property="works_at",
                             value="Acme", confidence=0.05, valid_from=datetime(2010, 1, 1, tzinfo=UTC)).fact
    assert runner.run_stage(cstore, "/d", "decay").details["facts_expired"] == 1
    expired = facts.get(cstore, acme.id).valid_until
    assert expired is not None
    globex = facts.assert_fact(cstore, "/d", "Alice works at Globex", entity="Alice", property="works_at",
                               value="Globex", valid_from=datetime(2030, 1, 1, tzinfo=UTC), supersede=True).fact
    facts.withdraw(cstore, globex.id, "wrong")
    assert facts.get(cstore, acme.id).valid_until == expired
    assert facts.query(cstore, "/d", entity="Alice") == []
