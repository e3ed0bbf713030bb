"""One timeline per (entity, property): late, early and equal-time statements, withdrawals
and restores keep one value at a time, each ending where the next known one begins."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from stash_pipeline.memory import contradictions, facts, namespaces
from stash_pipeline.store import Store
from tests.integration.consolidation.conftest import rows

NS = "/people"


def year(n: int) -> datetime:
    return datetime(n, 1, 1, tzinfo=UTC)


def _works(store: Store, company: str, since: int, **kwargs: Any) -> dict[str, Any]:
    return facts.assert_fact(store, NS, f"Alice works at {company}", entity="Alice", property="works_at",
                             value=company, valid_from=year(since), **kwargs)


def _values(store: Store, **kwargs: Any) -> list[str]:
    return sorted(f.value for f in facts.query(store, NS, **kwargs))


def _relationship(store: Store, fact_id: int, to: str) -> int:
    with store.db.transaction() as tx:
        return int(tx.scalar("stage_relationship_insert", namespace_id=namespaces.resolve_id(tx, NS),
                             from_entity="alice", relation_type="works_at", to_entity=to, confidence=0.9,
                             fact_id=fact_id))


def test_initech_a_late_statement_ends_where_the_next_known_value_begins(store):
    """Acme from 2020, Globex from 2023 superseding, then Initech from 2019 learnt late."""
    namespaces.create(store, NS)
    acme = _works(store, "Acme", 2020).fact
    globex = _works(store, "Globex", 2023, supersede=True)
    assert globex.superseded_fact_ids == [acme.id]
    initech = _works(store, "Initech", 2019, supersede=True)
    assert initech.superseded_fact_ids == [] and initech.contradictions == []
    assert (initech.fact.valid_from, initech.fact.valid_until) == (year(2019), year(2020))
    assert _values(store, as_of=year(2021)) == ["Acme"]
    assert _values(store, as_of=datetime(2019, 6, 1, tzinfo=UTC)) == ["Initech"]
    assert _values(store, as_of=year(2024)) == ["Globex"]
    assert _values(store) == ["Globex"]


def test_a_new_value_inside_a_closed_interval_splits_it(store):
    namespaces.create(store, NS)
    acme = _works(store, "Acme", 2020).fact
    _works(store, "Globex", 2023, supersede=True)
    hooli = _works(store, "Hooli", 2021, supersede=True)
    assert hooli.superseded_fact_ids == [acme.id]
    assert (hooli.fact.valid_from, hooli.fact.valid_until) == (year(2021), year(2023))
    assert facts.get(store, acme.id).valid_until == year(2021)
    for when, value in [(2020, "Acme"), (2021, "Hooli"), (2022, "Hooli"), (2023, "Globex")]:
        assert _values(store, as_of=year(when)) == [value], when


def test_equal_valid_from_the_later_statement_is_the_correction(store):
    namespaces.create(store, NS)
    first = _works(store, "Acme", 2020).fact
    fixed = _works(store, "Initech", 2020, supersede=True)
    assert fixed.superseded_fact_ids == [first.id]
    old = facts.get(store, first.id)
    assert (old.valid_from, old.valid_until, old.superseded_by) == (year(2020), year(2020), fixed.fact.id)
    assert _values(store, as_of=year(2020)) == ["Initech"]
    # without supersede the same pair is an open contradiction, both stay
    other = _works(store, "Hooli", 2020)
    assert [c.old_fact_id for c in other.contradictions] == [fixed.fact.id]


def test_a_multi_valued_property_holds_several_values(store):
    namespaces.create(store, NS)
    pizza = facts.assert_fact(store, NS, "Alice likes pizza", entity="Alice", property="likes", value="pizza",
                              valid_from=year(2020))
    sushi = facts.assert_fact(store, NS, "Alice likes sushi", entity="Alice", property="Likes", value="sushi",
                              valid_from=year(2019), supersede=True)
    assert sushi.contradictions == [] and sushi.superseded_fact_ids == []
    assert sushi.fact.valid_until is None and pizza.fact.id != sushi.fact.id
    assert _values(store) == ["pizza", "sushi"]


def test_withdrawing_the_next_value_gives_its_time_back(store):
    namespaces.create(store, NS)
    acme = _works(store, "Acme", 2020).fact
    rel = _relationship(store, acme.id, "acme")
    globex = _works(store, "Globex", 2023, supersede=True).fact
    initech = _works(store, "Initech", 2019).fact
    assert rows(store, "SELECT valid_until FROM relationships WHERE id = %(id)s", id=rel) == [
        {"valid_until": year(2023)}]
    facts.withdraw(store, globex.id, "she never joined Globex")
    back = facts.get(store, acme.id)
    assert (back.valid_until, back.superseded_by, back.current) == (None, None, True)
    assert _values(store) == ["Acme"]
    # the relationship drawn from Acme is open again with it
    assert rows(store, "SELECT valid_until, retired_at FROM relationships WHERE id = %(id)s", id=rel) == [
        {"valid_until": None, "retired_at": None}]
    # withdrawing Acme hands its years to the value before it (Initech), up to nothing
    facts.withdraw(store, acme.id, "wrong person")
    assert facts.get(store, initech.id).valid_until is None
    assert _values(store, as_of=year(2022)) == ["Initech"]


def test_withdrawing_a_middle_value_extends_the_previous_one_to_the_next(store):
    namespaces.create(store, NS)
    acme = _works(store, "Acme", 2020).fact
    hooli = _works(store, "Hooli", 2021, supersede=True).fact
    globex = _works(store, "Globex", 2023, supersede=True).fact
    facts.withdraw(store, hooli.id, "a mix-up")
    back = facts.get(store, acme.id)
    assert (back.valid_until, back.superseded_by) == (year(2023), globex.id)
    assert _values(store, as_of=year(2022)) == ["Acme"]


def test_a_stated_end_survives_a_withdrawal(store):
    namespaces.create(store, NS)
    acme = _works(store, "Acme", 2020, valid_until=year(2022)).fact
    globex = _works(store, "Globex", 2021, supersede=True).fact
    assert facts.get(store, acme.id).valid_until == year(2021)
    facts.withdraw(store, globex.id, "no")
    assert facts.get(store, acme.id).valid_until == year(2022)


def test_withdrawing_a_fact_resolves_its_open_contradictions(store):
    namespaces.create(store, NS)
    _works(store, "Acme", 2020)
    [open_one] = _works(store, "Globex", 2021).contradictions
    assert not open_one.resolved
    facts.withdraw(store, open_one.new_fact_id, "typo")
    got = contradictions.get(store, open_one.id)
    assert (got.resolved, got.resolution) == (True, "withdrawn")
    assert contradictions.list_(store, [NS]) == []


def test_restoring_a_fact_reopens_the_relationships_its_supersession_closed(store):
    namespaces.create(store, NS)
    acme = _works(store, "Acme", 2020).fact
    rel = _relationship(store, acme.id, "acme")
    globex = _works(store, "Globex", 2023, supersede=True)
    [auto] = globex.contradictions
    assert rows(store, "SELECT valid_until FROM relationships WHERE id = %(id)s", id=rel) == [
        {"valid_until": year(2023)}]
    contradictions.resolve(store, auto.id, "keep_old")
    assert facts.get(store, acme.id).current is True
    assert rows(store, "SELECT valid_until, retired_at FROM relationships WHERE id = %(id)s", id=rel) == [
        {"valid_until": None, "retired_at": None}]


def test_purging_the_next_value_gives_its_time_back(store):
    """A purge recomputes the key before it deletes the row: the fact counts as gone."""
    namespaces.create(store, NS)
    acme = _works(store, "Acme", 2020).fact
    globex = _works(store, "Globex", 2023, supersede=True).fact
    facts.purge(store, globex.id)
    back = facts.get(store, acme.id)
    assert (back.valid_until, back.superseded_by, back.current) == (None, None, True)


def test_an_open_contradiction_and_keep_both_let_two_values_hold_until_the_next(store):
    """Without supersede the pair stays open and both values hold; keep_both keeps it so
    after any recomputation, and a later superseding value ends both."""
    namespaces.create(store, NS)
    acme = _works(store, "Acme", 2020).fact
    [pair] = _works(store, "Globex", 2021).contradictions
    assert _values(store, as_of=year(2022)) == ["Acme", "Globex"]
    contradictions.resolve(store, pair.id, "keep_both")
    initech = _works(store, "Initech", 2024, supersede=True).fact
    assert _values(store, as_of=year(2022)) == ["Acme", "Globex"]
    assert _values(store) == ["Initech"]
    facts.withdraw(store, initech.id, "no")
    assert _values(store) == ["Acme", "Globex"]
    assert facts.get(store, acme.id).valid_until is None
