"""Recall's grouping and diversification (stash_pipeline/recall/grouping.py), as pure
functions over ranked hits: a fact and its source episodes take one slot, nothing found
is lost from the answer, the slots freed are filled from the extra candidates, and
maximal marginal relevance spreads the results over sessions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from stash_pipeline.models import RecallHit
from stash_pipeline.recall.config import DEFAULT
from stash_pipeline.recall.grouping import cited_episode_ids, fetch_limit, group, shape

DAY = datetime(2024, 5, 1, 18, 0, tzinfo=UTC)
NS = "/chat"
#: grouping alone, no diversity (facts' weights come with the statement's rows)
NEUTRAL = DEFAULT.replace(diversity=0.0)


def episode(id: int, score: float, session: int = 0) -> RecallHit:
    return RecallHit(kind="episode", id=id, namespace=NS, content=f"turn {id}", score=score,
                     score_parts={"vector": score}, occurred_at=DAY + timedelta(days=session), metadata={})


def fact(id: int, score: float, sources: list[int]) -> RecallHit:
    return RecallHit(kind="fact", id=id, namespace=NS, content=f"fact {id}", score=score, score_parts={"vector": score},
                     source_episode_ids=sources, valid_from=DAY, current=True)


def rows(*ids: int, session: dict[int, int] | None = None) -> dict[int, dict[str, Any]]:
    session = session or {}
    return {i: {"id": i, "occurred_at": DAY + timedelta(days=session.get(i, 0)), "metadata": {},
                "content": f"Caroline: turn {i} " + "x" * 300} for i in ids}


def keys(hits: list[RecallHit]) -> list[tuple[str, int]]:
    return [(h.kind, h.id) for h in hits]


def shown(hits: list[RecallHit]) -> set[tuple[str, int]]:
    return set(keys(hits)) | {("episode", s.id) for h in hits for s in h.sources or ()}


def test_a_fact_and_its_source_episode_take_one_slot_and_the_next_candidate_fills_the_other() -> None:
    hits = [fact(1, 0.9, [10]), episode(10, 0.8), episode(11, 0.7), episode(12, 0.6)]
    out = shape(hits, 3, rows(10), NEUTRAL)
    assert keys(out) == [("fact", 1), ("episode", 11), ("episode", 12)]
    head = out[0]
    assert [s.id for s in head.sources] == [10] and head.sources[0].score == 0.8  # folded, with its own score
    assert head.sources[0].excerpt.startswith("Caroline: turn 10") and len(head.sources[0].excerpt) == 160
    assert head.sources[0].excerpt.endswith("…") and head.sources[0].occurred_at == DAY
    assert head.grouped == [{"kind": "episode", "id": 10, "score": 0.8}]
    # without grouping the same candidates give the fact and its turn a slot each
    assert keys(shape(hits, 3, rows(10), DEFAULT.replace(grouping=False))) == keys(hits[:3])


def test_an_episode_ranked_above_its_fact_brings_the_fact_to_its_place() -> None:
    hits = [episode(10, 0.9), episode(11, 0.8), fact(1, 0.5, [10, 12]), episode(12, 0.4)]
    out = shape(hits, 3, rows(10, 12), NEUTRAL)
    assert keys(out) == [("fact", 1), ("episode", 11)]
    assert out[0].score == 0.9 and out[0].score_parts["own"] == 0.5  # the group ranks by its best member
    assert {g["id"] for g in out[0].grouped} == {10, 12}


def test_nothing_found_is_lost_from_the_answer() -> None:
    hits = [episode(20, 0.95), fact(1, 0.9, [10, 11]), episode(10, 0.85), fact(2, 0.8, [11]), episode(11, 0.75),
            episode(12, 0.7), fact(3, 0.6, [99]), episode(13, 0.5)]
    out = shape(hits, len(hits), rows(10, 11, 99), NEUTRAL)
    assert shown(out) >= set(keys(hits))
    # and every result is one piece of evidence: no episode shown twice
    episodes = [k for k in keys(out) if k[0] == "episode"] + [("episode", s.id) for h in out for s in h.sources or ()]
    assert len(episodes) - len(set(episodes)) == 1  # 11 rests under both facts, as their lineage says
    assert sorted(cited_episode_ids(hits)) == [10, 11, 99]


def test_a_fact_whose_sources_were_forgotten_carries_the_ones_left() -> None:
    out = shape([fact(1, 0.9, [10, 11])], 5, rows(11), NEUTRAL)
    assert [s.id for s in out[0].sources] == [11]


def test_diversity_spreads_results_over_sessions_and_zero_keeps_the_ranking() -> None:
    session = {10: 0, 11: 0, 12: 0, 13: 1, 14: 2}
    hits = [episode(i, 0.9 - 0.02 * n, session[i]) for n, i in enumerate((10, 11, 12, 13, 14))]
    assert keys(shape(hits, 3, {}, NEUTRAL)) == keys(hits[:3])
    out = shape(hits, 3, {}, NEUTRAL.replace(diversity=0.2))
    assert keys(out) == [("episode", 10), ("episode", 13), ("episode", 14)]
    assert out[1].score_parts.get("diversity") is None  # a new session: no penalty
    # a weak candidate from a new session does not jump a much better one
    hits[3] = episode(13, 0.3, 1)
    hits[4] = episode(14, 0.2, 2)
    assert keys(shape(hits, 3, {}, NEUTRAL.replace(diversity=0.2))) == keys(hits[:3])


def test_a_fact_counts_the_sessions_of_its_sources() -> None:
    hits = [episode(10, 0.9, 0), fact(1, 0.85, [11]), episode(12, 0.8, 1)]
    out = shape(hits, 2, rows(11, session={11: 0}), NEUTRAL.replace(diversity=0.2))
    assert keys(out) == [("episode", 10), ("episode", 12)]  # the fact's turn is from session 0 too
    assert out[1].score == 0.8


def test_fetch_limit_asks_for_the_extra_candidates_only_when_grouping() -> None:
    assert fetch_limit(10, DEFAULT.replace(overfetch=7)) == 17
    assert fetch_limit(10, DEFAULT.replace(grouping=False)) == 10


def test_facts_rank_by_the_weight_the_statement_gave_them_and_keep_their_own_score() -> None:
    weighted = fact(1, 0.5, [99]).model_copy(update={"score_parts": {"vector": 0.5, "weight": 1.44}})
    hits = [episode(10, 0.6), weighted, episode(11, 0.45)]
    out = shape(hits, 3, rows(99), NEUTRAL)
    assert keys(out) == [("fact", 1), ("episode", 10), ("episode", 11)]
    # ranked by the weighted score; its score (and relevance) stays its own
    assert out[0].score == 0.5 and out[0].score_parts["weight"] == 1.44
    # without a weight the same fact ranks by its score
    assert keys(shape([episode(10, 0.6), fact(1, 0.5, [99])], 2, rows(99), NEUTRAL)) == [("episode", 10), ("fact", 1)]


def test_context_turns_leave_out_the_results_and_the_sources_sent() -> None:
    ranked = [(fact(1, 0.9, [10]), []), (episode(10, 0.8), [{"id": 9, "content": "x"}]),
              (episode(12, 0.7), [{"id": 10, "content": "turn 10"}, {"id": 11, "content": "turn 11"},
                                  {"id": 13, "content": "turn 13"}]),
              (episode(13, 0.6), [])]
    out = group(ranked, 3, rows(10), NEUTRAL)
    assert [(h.kind, h.id) for h, _ in out] == [("fact", 1), ("episode", 12), ("episode", 13)]
    assert out[1][1] == [{"id": 11, "content": "turn 11"}]  # 10 is the fact's source, 13 a result


def test_a_hit_repeating_a_better_ones_words_folds_into_it_and_frees_its_slot() -> None:
    lol = [episode(i, 0.9 - i / 100, session=i).model_copy(update={"content": "Jon: Lol  yes, exactly!"})
           for i in (1, 2)]
    restated = fact(7, 0.6, [30]).model_copy(update={"content": "jon is tired"})
    hits = [*lol, fact(6, 0.7, [20]).model_copy(update={"content": "Jon is tired."}), restated, episode(3, 0.5)]
    out = shape(hits, 3, rows(20, 30), NEUTRAL)
    assert keys(out) == [("episode", 1), ("fact", 6), ("episode", 3)]
    assert out[0].grouped == [{"kind": "episode", "id": 2, "score": 0.88}]
    assert out[1].grouped == [{"kind": "fact", "id": 7, "score": 0.6}]
    assert [s.id for s in out[1].sources] == [20]  # a fact's sources stay its own lineage
    # the same words in a fact and an episode are different kinds of record: both stay
    said = [episode(1, 0.9).model_copy(update={"content": "Jon is tired"}), fact(6, 0.8, [20]).model_copy(
        update={"content": "Jon is tired"})]
    assert keys(shape(said, 2, rows(20), NEUTRAL)) == [("episode", 1), ("fact", 6)]
    # with history, a retired fact and the same words still current are two results
    retired = fact(8, 0.9, [20]).model_copy(update={"content": "Jon is tired", "current": False})
    current = fact(9, 0.8, [30]).model_copy(update={"content": "Jon is tired"})
    assert keys(shape([retired, current], 2, rows(20, 30), NEUTRAL)) == [("fact", 8), ("fact", 9)]


def test_a_profile_and_its_members_take_one_slot_unless_a_member_ranks_above() -> None:
    profile = fact(5, 0.9, [10, 20]).model_copy(update={"member_fact_ids": [1, 2]})
    hits = [profile, fact(1, 0.8, [10]), episode(10, 0.7), episode(3, 0.6), fact(2, 0.5, [20])]
    out = shape(hits, 2, rows(10, 20), NEUTRAL)
    assert keys(out) == [("fact", 5), ("episode", 3)]  # the members took no slot
    assert out[0].grouped == [{"kind": "episode", "id": 10, "score": 0.7}, {"kind": "fact", "id": 1, "score": 0.8},
                              {"kind": "fact", "id": 2, "score": 0.5}]
    # a member ranked above its profile is the better answer: both stay
    above = [fact(1, 0.95, [10]), profile, episode(3, 0.6)]
    assert keys(shape(above, 3, rows(10, 20), NEUTRAL)) == [("fact", 1), ("fact", 5), ("episode", 3)]
    # a profile whose members all rank above it says nothing new: it folds into the best one
    all_above = [fact(1, 0.95, [10]), episode(3, 0.9), fact(2, 0.92, [20]), profile, episode(4, 0.5)]
    out = shape(all_above, 3, rows(10, 20), NEUTRAL)
    assert keys(out) == [("fact", 1), ("fact", 2), ("episode", 3)]
    assert out[0].grouped == [{"kind": "fact", "id": 5, "score": 0.9}]
    # with history, a retired profile never hides a member still current
    retired = profile.model_copy(update={"current": False})
    assert keys(shape([retired, fact(1, 0.8, [10])], 2, rows(10, 20), NEUTRAL)) == [("fact", 5), ("fact", 1)]


def test_a_fact_saying_a_better_ones_thing_again_folds_into_it_with_its_turns_apart() -> None:
    """Two accounts of one event in two sessions ("went to a pride parade last week", "the
    parade was great") take one slot: the second folds into the first, whose lineage stays
    its own while the answer still shows where it was said again (``repeated_in``)."""
    first, again = fact(6, 0.8, [20]), fact(7, 0.7, [30, 20])
    hits = [first, episode(1, 0.75), again, episode(3, 0.5)]
    repeats = {7: [6]}
    out = shape(hits, 3, rows(20, 30), NEUTRAL, repeats=repeats)
    assert keys(out) == [("fact", 6), ("episode", 1), ("episode", 3)]  # the freed slot is filled
    assert [s.id for s in out[0].sources] == [20] and out[0].source_episode_ids == [20]
    assert [s.id for s in out[0].repeated_in] == [30]  # its turn 20 is already the head's own
    assert out[0].repeated_in[0].excerpt.startswith("Caroline: turn 30")
    assert out[0].grouped == [{"kind": "fact", "id": 7, "score": 0.7}]
    # without the statement's repeats each keeps its slot
    assert keys(shape(hits, 3, rows(20, 30), NEUTRAL)) == [("fact", 6), ("episode", 1), ("fact", 7)]
    # a retired account never folds into a current one, nor into a profile (which shows no turns)
    retired = again.model_copy(update={"current": False})
    assert keys(shape([first, retired], 2, rows(20, 30), NEUTRAL, repeats=repeats)) == [("fact", 6), ("fact", 7)]
    profile = first.model_copy(update={"member_fact_ids": [2, 3]})
    assert keys(shape([profile, again], 2, rows(20, 30), NEUTRAL, repeats=repeats)) == [("fact", 6), ("fact", 7)]


def test_the_turns_said_again_count_in_the_token_budget_and_reach_the_lean_answer() -> None:
    from stash_pipeline.recall.shape import compact, estimate_tokens, within_budget

    out = shape([fact(6, 0.8, [20]), fact(7, 0.7, [30])], 2, rows(20, 30), NEUTRAL, repeats={7: [6]})
    lean = compact(out[0])
    assert [s["id"] for s in lean["repeated_in"]] == [30] and "score" not in lean["repeated_in"][0]
    cost = estimate_tokens(out[0].content) + estimate_tokens(out[0].sources[0].excerpt) * 2  # both turns
    assert within_budget(out, cost) == out and within_budget(out, cost - 1) == []
