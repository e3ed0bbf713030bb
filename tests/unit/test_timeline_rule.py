"""The timeline rule as a pure function (``timeline.intervals``) against a brute-force
reading, over thousands of generated keys: at every probe time the values holding are
exactly the brute force's, and without pairs held together at most one. No database: the
integration property (tests/integration/test_timeline_property.py) checks the same rule
through the library, with fewer examples."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from stash_pipeline.memory.timeline import Statement, intervals

VALUES = ("acme", "globex", "initech")
#: generated keys per run; raise it locally (TIMELINE_RULE_EXAMPLES=20000) for a long search
EXAMPLES = int(os.environ.get("TIMELINE_RULE_EXAMPLES", "400"))
PROBES = [datetime(y, m, 1, tzinfo=UTC) for y in range(2009, 2017) for m in (1, 7)]


def year(n: int) -> datetime:
    return datetime(n, 1, 1, tzinfo=UTC)


def brute_force(statements: list[Statement], together: set[frozenset[int]], at: datetime) -> set[str]:
    live = [s for s in statements if not s.rejected]

    def apart(a: Statement, b: Statement) -> bool:
        return a.value != b.value and frozenset((a.id, b.id)) not in together

    live = [s for s in live if not any(o.valid_from == s.valid_from and o.id > s.id and apart(s, o) for o in live)]
    out = set()
    for s in live:
        nexts = [o.valid_from for o in live if o.valid_from > s.valid_from and apart(s, o)]
        ends = [e for e in (s.stated_until, s.given_until, min(nexts, default=None)) if e is not None]
        if s.valid_from <= at < min(ends, default=datetime.max.replace(tzinfo=UTC)):
            out.add(s.value)
    return out


statement = st.tuples(st.sampled_from(VALUES), st.integers(2010, 2015), st.sampled_from([None, None, 1, 2]),
                      st.sampled_from([None, None, None, None, 0, 1]))


@settings(max_examples=EXAMPLES, deadline=None)
@given(rows=st.lists(statement, min_size=1, max_size=9), pairs=st.lists(st.tuples(st.integers(1, 9),
                                                                                   st.integers(1, 9)), max_size=3))
def test_intervals_agree_with_the_brute_force(rows, pairs):
    statements = [
        Statement(n, value, year(start), None if length is None else year(start + length),
                  None if given is None else year(start + given), None)
        for n, (value, start, length, given) in enumerate(rows, 1)
    ]
    together = {frozenset(p) for p in pairs if p[0] != p[1]}
    placed = intervals(statements, together)
    assert set(placed) == {s.id for s in statements}
    for at in PROBES:
        got = {s.value for s in statements if s.valid_from <= at < (placed[s.id][0] or datetime.max.replace(tzinfo=UTC))}
        assert got == brute_force(statements, together, at), (rows, pairs, at, placed)
        if not together:
            assert len(got) <= 1


def test_a_later_arrival_supersedes_an_earlier_one_is_history():
    """superseded_by names the value that ended a fact only when it arrived later."""
    acme, globex, initech = (Statement(1, "acme", year(2011), None, None, None),
                             Statement(2, "globex", year(2014), None, None, None),
                             Statement(3, "initech", year(2010), None, None, None))
    assert intervals([acme, globex, initech], set()) == {
        1: (year(2014), 2), 2: (None, None), 3: (year(2011), None)}
