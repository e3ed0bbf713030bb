"""Property: whatever order statements about one single-valued property arrive in —
late, early, equal times, withdrawals, rejections (``keep_old``, which restores what a
supersession closed) — ``as_of`` agrees with a brute-force reading of the statements,
with at most one value at any event time; and ``known_at`` agrees with the same reading
of the statements that had arrived by then.

The brute-force reading: the live statements (not withdrawn, not rejected, not corrected
by a later one with the same start and another value), each from its ``valid_from`` to
the earliest of its stated end and the start of the next live statement with another
value. Statements made without ``supersede`` leave the value holding at their start in an
open contradiction with them: such a pair neither ends nor corrects each other (both hold
at once, the only way two values do).

``known_at`` is checked exactly at every system time after each operation: every earlier
end and replacement of a fact is kept with the time it changed (``fact_ends``, migration
0016), so a read between two changes of one fact sees the end and ``superseded_by`` of
that moment: ``get`` known at that time returns what a current read returned then.

One database for the test, a fresh namespace per example; the example count stays modest
(TIMELINE_PROPERTY_EXAMPLES raises it for a long local search) so the run fits well
within a minute on a loaded two-core machine.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stash_pipeline.memory import contradictions, facts, namespaces
from stash_pipeline.store import Store

VALUES = ("Acme", "Globex", "Initech")
YEARS = range(2010, 2016)
PROBES = [datetime(y, 7, 1, tzinfo=UTC) for y in range(2009, 2017)] + [datetime(y, 1, 1, tzinfo=UTC) for y in YEARS]
_namespaces = itertools.count()
#: generated sequences per run; raise it locally (TIMELINE_PROPERTY_EXAMPLES=2000) for a long search
EXAMPLES = int(os.environ.get("TIMELINE_PROPERTY_EXAMPLES", "30"))


def year(n: int) -> datetime:
    return datetime(n, 1, 1, tzinfo=UTC)


@dataclass
class Statement:
    id: int
    value: str
    start: datetime
    stated_end: datetime | None
    gone: bool = False  # withdrawn or rejected


def brute_force(statements: list[Statement], at: datetime, together: frozenset[frozenset[int]] = frozenset()) -> set[str]:
    live = [s for s in statements if not s.gone]

    def apart(a: Statement, b: Statement) -> bool:  # another value, not held together (an open pair)
        return a.value != b.value and frozenset((a.id, b.id)) not in together

    # a statement corrected at its own start (a later one, same start, another value) is no value
    live = [s for n, s in enumerate(live) if not any(o.start == s.start and apart(s, o) for o in live[n + 1:])]
    out = set()
    for order, s in enumerate(live):
        nexts = [o.start for later, o in enumerate(live) if apart(s, o)
                 and (o.start > s.start or (o.start == s.start and later > order))]
        ends = [e for e in (s.stated_end, min(nexts, default=None)) if e is not None]
        if s.start <= at < min(ends, default=datetime.max.replace(tzinfo=UTC)):
            out.add(s.value)
    return out


operations = st.lists(
    st.one_of(
        st.tuples(st.just("assert"), st.sampled_from(VALUES), st.sampled_from(YEARS),
                  st.sampled_from([None, None, None, 1, 2])),
        st.tuples(st.just("withdraw"), st.integers(0, 20)),
        st.tuples(st.just("reject"), st.integers(0, 20)),
        # stated without supersede: a value holding at its start stays, the pair open
        st.tuples(st.just("state"), st.sampled_from(VALUES), st.sampled_from(YEARS), st.sampled_from([None, 1])),
    ),
    min_size=1,
    max_size=7,
)


def _clock(store: Store) -> datetime:
    with store.db.transaction() as tx:
        return tx.conn.execute("SELECT clock_timestamp() AS t").fetchone()["t"]


def _run(store: Store, ops: list[tuple[Any, ...]]) -> str:
    """Apply ``ops`` in a fresh namespace, check every reading, return the namespace."""
    ns = f"/prop/n{next(_namespaces)}"
    namespaces.create(store, ns)
    statements: list[Statement] = []
    auto: dict[int, list[tuple[int, int]]] = {}  # new fact id -> its auto-resolved (contradiction, old fact)
    together: set[frozenset[int]] = set()  # pairs in an open contradiction: both may hold
    # after each op: the time, the statements, the open pairs, each fact's (end, replacement) as read then
    history: list[tuple[datetime, list[Statement], frozenset[frozenset[int]], dict[int, tuple[Any, Any]]]] = []
    for op in ops:
        if op[0] in ("assert", "state"):
            _, value, start, length = op
            end = None if length is None else year(start + length)
            made = facts.assert_fact(store, ns, f"Alice works at {value}", entity="Alice", property="works_at",
                                     value=value, valid_from=year(start), valid_until=end,
                                     supersede=op[0] == "assert")
            statements.append(Statement(made.fact.id, value, year(start), end))
            auto[made.fact.id] = [(c.id, c.old_fact_id) for c in made.contradictions
                                     if c.resolution == "superseded"]
            together.update(frozenset((c.old_fact_id, c.new_fact_id)) for c in made.contradictions
                            if not c.resolved)
        else:
            live = [s for s in statements if not s.gone]
            kept = {s.id for s in live}
            if op[0] == "reject":  # keep_old on a supersession whose old fact is still live
                live = [s for s in live if any(old in kept for _, old in auto.get(s.id, []))]
            if not live:
                continue
            target = live[op[1] % len(live)]
            if op[0] == "withdraw":
                facts.withdraw(store, target.id, "wrong")
            else:
                contradictions.resolve(store, next(c for c, old in auto[target.id] if old in kept), "keep_old")
            target.gone = True
        held = {f.id: (f.valid_until, f.superseded_by) for f in facts.query(store, ns, include_history=True)}
        history.append((_clock(store), [Statement(s.id, s.value, s.start, s.stated_end, s.gone) for s in statements],
                        frozenset(together), held))

    # as_of, known now: exactly the brute-force reading, one value at a time (unless a pair is open)
    for at in PROBES:
        got = facts.query(store, ns, as_of=at)
        assert {f.value for f in got} == brute_force(statements, at, frozenset(together)), (ops, at, got)
        assert len({f.value for f in got}) <= 1 or together

    # known_at: the reading of the statements that had arrived by then
    for known, then, pairs, held in history:
        for at in PROBES:
            got = facts.query(store, ns, as_of=at, known_at=known)
            assert {f.id for f in got} <= {s.id for s in then if not s.gone}
            assert {f.value for f in got} == brute_force(then, at, pairs), (ops, known, at, got)
        # each fact's end and replacement as known then: what a current read said then
        for fact_id, state in held.items():
            fact = facts.get(store, fact_id, known_at=known)
            assert (fact.valid_until, fact.superseded_by) == state, (ops, known, fact_id, fact)
    return ns


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                         HealthCheck.too_slow])
@given(ops=operations)
def test_one_value_at_a_time_whatever_the_order(store, ops):
    _run(store, ops)


def test_the_initech_order(store):
    """The named regression case as one sequence of the property."""
    _run(store, [("assert", "Acme", 2011, None), ("assert", "Globex", 2014, None), ("assert", "Initech", 2010, None)])


def test_a_withdrawn_correction_gives_back_only_what_it_took(store):
    """Found by the property: Acme, corrected to Globex at the same start, corrected back to
    Acme, and that last statement withdrawn: Globex holds again, the first Acme stays
    corrected away."""
    _run(store, [("assert", "Acme", 2010, None), ("assert", "Globex", 2010, None),
                 ("assert", "Acme", 2010, None), ("withdraw", 20)])


def test_a_withdrawn_correction_after_a_later_start(store):
    """Found by the property: Acme from 2010, Globex from 2011 closes it, Acme again from 2011
    corrects Globex; withdrawing that last Acme gives Globex back its time, and the first
    Acme ends where Globex begins again (it ran on while the restatement held)."""
    _run(store, [("assert", "Acme", 2010, None), ("assert", "Globex", 2011, None),
                 ("assert", "Acme", 2011, None), ("withdraw", 20)])


# The same 25 sequences of asserts and withdrawals every run (derandomize): repeatable, so
# it fails on any regression among them whatever the random run above happens to draw.
@settings(max_examples=25, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=st.lists(
    st.one_of(
        st.tuples(st.just("assert"), st.sampled_from(VALUES), st.sampled_from(YEARS),
                  st.sampled_from([None, None, None, 1, 2])),
        st.tuples(st.just("withdraw"), st.integers(0, 20)),
    ),
    min_size=1,
    max_size=7,
))
def test_one_value_at_a_time_with_asserts_and_withdrawals(store, ops):
    _run(store, ops)


def test_a_rejected_restatement_stays_rejected_when_the_value_it_cut_is_withdrawn(store):
    """Found by the property: Globex from 2010, Acme from 2012 supersedes it, Acme from 2012
    stated again; the first Acme rejected (keep_old: Globex holds again, until the second
    Acme), then Globex withdrawn: only the second Acme holds, from 2012, and nothing before."""
    _run(store, [("assert", "Globex", 2010, None), ("assert", "Acme", 2012, None),
                 ("assert", "Acme", 2012, None), ("reject", 0), ("withdraw", 0)])


def test_a_correction_of_the_value_that_ended_another_keeps_it_ended(store):
    """Found by the property against a first version of the recomputed timeline (which
    retired a fact whose replacement changed but whose end did not): Initech from 2010,
    Acme from 2011 supersedes it, Globex from 2011 corrects Acme: Initech still ends in 2011
    (now where Globex begins), and as known before the correction it ended there too."""
    _run(store, [("assert", "Initech", 2010, None), ("assert", "Acme", 2011, None),
                 ("assert", "Globex", 2011, None)])



def test_rejecting_a_value_already_corrected_away_keeps_what_was_known(store):
    """Found by the property against the recomputed timeline (a rejection re-stamped the
    retirement of a fact a correction had already emptied): Acme from 2010, Globex from 2012
    supersedes it, Acme again from 2012 corrects Globex away; rejecting Globex (keep_old) then changes nothing Stash
    believed, so a read known between the correction and the rejection still sees Acme only."""
    _run(store, [("assert", "Acme", 2010, None), ("assert", "Globex", 2012, None),
                 ("assert", "Acme", 2012, None), ("reject", 0)])



def test_a_replacement_held_between_a_restore_and_the_next_supersession(store):
    """Acme from 2010; Globex from 2012 supersedes it; Globex withdrawn restores it; Initech
    from 2014 supersedes it: known before the withdrawal, Acme was superseded by Globex
    (0013's rule said none: it was retired again later)."""
    _run(store, [("assert", "Acme", 2010, None), ("assert", "Globex", 2012, None), ("withdraw", 1),
                 ("assert", "Initech", 2014, None)])


def test_an_end_changed_three_times_reads_as_known_between_the_second_and_third(store):
    """Acme from 2010, open; Globex from 2014 ends it there (1st change); Initech learnt late
    from 2012 ends it at 2012 (2nd); Initech withdrawn gives 2012-2014 back (3rd). Known
    between the 2nd and 3rd change, Acme ended in 2012 and Initech held in 2013; with one
    earlier end per fact (as first recorded) Acme read open-ended there, beside Initech."""
    ns = _run(store, [("assert", "Acme", 2010, None), ("assert", "Globex", 2014, None),
                      ("assert", "Initech", 2012, None), ("withdraw", 2)])
    [acme] = [f for f in facts.query(store, ns, include_history=True) if f.value == "Acme"]
    with store.db.transaction() as tx:
        changes = [(r["replaced_at"], r["valid_until"]) for r in tx.conn.execute(
            "SELECT replaced_at, valid_until FROM fact_ends WHERE fact_id = %s ORDER BY replaced_at",
            (acme.id,)).fetchall()]
    assert [end for _, end in changes] == [None, year(2014), year(2012)]  # each end until its change
    second, third = changes[1][0], changes[2][0]
    between = second + (third - second) / 2
    assert facts.get(store, acme.id, known_at=between).valid_until == year(2012)
    assert facts.get(store, acme.id).valid_until == year(2014)
    mid_2013 = datetime(2013, 7, 1, tzinfo=UTC)
    assert {f.value for f in facts.query(store, ns, as_of=mid_2013, known_at=between)} == {"Initech"}
    assert {f.value for f in facts.query(store, ns, as_of=mid_2013)} == {"Acme"}
