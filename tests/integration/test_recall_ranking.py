"""Recall's text ranking (BM25 over live term statistics), relevance, context and stale demotion.

The term statistics are checked against a recount from the live rows after every kind of
write: remember, remember_batch, import, assert, withdraw, forget, purge (episode and
fact) and namespace deletion.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from stash_pipeline import errors, recall
from stash_pipeline.interchange import episode_files as interchange
from stash_pipeline.memory import episodes, facts, namespaces
from stash_pipeline.models import RecallHit
from stash_pipeline.operations.recall import RECALL
from stash_pipeline.recall.config import DEFAULT, VARIANTS

NS = "/chat/one"
OTHER = "/chat/two"

RECOUNT_TEXT = """
SELECT namespace_id, count(*) AS documents, sum(recall_text_length(search)) AS total_length
FROM (SELECT namespace_id, search FROM episodes WHERE deleted_at IS NULL
      UNION ALL SELECT namespace_id, search FROM facts WHERE withdrawn_at IS NULL) live
GROUP BY namespace_id ORDER BY namespace_id
"""
RECOUNT_TERMS = """
SELECT live.namespace_id, u.lexeme, count(*) AS documents
FROM (SELECT namespace_id, search FROM episodes WHERE deleted_at IS NULL
      UNION ALL SELECT namespace_id, search FROM facts WHERE withdrawn_at IS NULL) live,
     unnest(live.search) AS u
GROUP BY live.namespace_id, u.lexeme ORDER BY 1, 2
"""


def assert_statistics_current(store) -> None:
    with store.db.connection() as conn:
        kept_text = conn.execute(
            "SELECT namespace_id, documents, total_length FROM recall_text_stats WHERE documents > 0 ORDER BY 1"
        ).fetchall()
        kept_terms = conn.execute(
            "SELECT namespace_id, lexeme, documents FROM recall_term_stats WHERE documents > 0 ORDER BY 1, 2"
        ).fetchall()
        text, terms = conn.execute(RECOUNT_TEXT).fetchall(), conn.execute(RECOUNT_TERMS).fetchall()
        conn.commit()
    assert kept_text == text
    assert kept_terms == terms


def document_frequency(store, slug: str, lexeme: str) -> int:
    with store.db.connection() as conn:
        row = conn.execute(
            "SELECT COALESCE(sum(t.documents), 0) AS n FROM recall_term_stats t JOIN namespaces n "
            "ON n.id = t.namespace_id WHERE n.slug = %(slug)s AND t.lexeme = %(lexeme)s",
            {"slug": slug, "lexeme": lexeme},
        ).fetchone()
        conn.commit()
    return int(row["n"])


def test_term_statistics_follow_every_write(store, tmp_path: Path):
    namespaces.create(store, NS)
    namespaces.create(store, OTHER)
    first = episodes.remember(store, NS, "Caroline adopted a beagle from the rescue").id
    assert document_frequency(store, NS, "beagl") == 1
    assert_statistics_current(store)

    batch = episodes.remember_batch(store, NS, [{"content": "The beagle chewed my shoes again"},
                                                {"content": "Pottery class on Thursdays"}])
    episodes.remember_batch(store, OTHER, [{"content": "A beagle lives next door"}])
    assert document_frequency(store, NS, "beagl") == 2
    assert_statistics_current(store)

    source = tmp_path / "turns.jsonl"
    source.write_text("\n".join(json.dumps({"content": c}) for c in
                                ["Melanie: what's the beagle called?", "Caroline: Biscuit, of course"]))
    interchange.import_episodes(store, NS, source)
    assert document_frequency(store, NS, "beagl") == 3
    assert_statistics_current(store)

    fact = facts.assert_fact(store, NS, "Caroline owns a beagle named Biscuit", source_episode_ids=[first])
    assert document_frequency(store, NS, "beagl") == 4
    assert_statistics_current(store)
    facts.withdraw(store, fact.fact.id, "wrong dog")
    assert document_frequency(store, NS, "beagl") == 3
    assert_statistics_current(store)
    other_fact = facts.assert_fact(store, NS, "Biscuit is a beagle")
    facts.purge(store, other_fact.fact.id)
    assert_statistics_current(store)

    forgotten = episodes.forget(store, "The beagle chewed my shoes again", NS)
    assert forgotten.applied and forgotten.episode_id == batch[0].id
    assert document_frequency(store, NS, "shoe") == 0
    assert_statistics_current(store)
    episodes.purge(store, batch[0].id)  # purging a forgotten episode changes nothing live
    assert_statistics_current(store)
    episodes.purge(store, first)
    assert document_frequency(store, NS, "beagl") == 1
    assert_statistics_current(store)

    namespaces.delete(store, NS, confirm=True)
    assert document_frequency(store, NS, "beagl") == 0
    assert document_frequency(store, OTHER, "beagl") == 1
    assert_statistics_current(store)


def test_the_rare_word_outranks_common_ones(store):
    namespaces.create(store, NS)
    episodes.remember_batch(store, NS, [{"content": f"Caroline: honestly the weekend was fun, day {i}"}
                                        for i in range(30)])
    rare = episodes.remember(store, NS, "Caroline: I finally booked the trip to Zanzibar").id
    episodes.remember_batch(store, NS, [{"content": f"Caroline: the weekend was fun again, take {i}"}
                                        for i in range(30)])
    hits = recall.recall(store, "Caroline weekend Zanzibar fun", [NS], mode="text")
    assert hits[0].id == rare  # one rare word beats three common ones
    assert hits[0].score_parts["text"] > hits[1].score_parts["text"]


def test_old_evidence_is_found_when_common_words_fill_the_scan(store):
    config = DEFAULT.replace(text_scan_limit=20, neighbour_weight=0.0)
    namespaces.create(store, NS)
    old = episodes.remember(store, NS, "Melanie: the pottery market is on the last Friday").id
    episodes.remember_batch(store, NS, [{"content": f"Melanie: the market was busy, stall {i}"}
                                        for i in range(200)])
    hits = recall.recall(store, "When is the pottery market?", [NS], mode="text", config=config)
    assert hits[0].id == old  # the newest-first cap would have dropped it


def pottery_and_market(store) -> int:
    """An old turn holding "pottery" and "market", then 40 newer turns holding "pottery"
    alone and 80 holding "market" alone: both words in more rows than a scan limit of 20."""
    namespaces.create(store, NS)
    old = episodes.remember(store, NS, "Melanie: the pottery market is on the last Friday").id
    episodes.remember_batch(store, NS, [{"content": f"Melanie: my pottery class went well, week {i}"}
                                        for i in range(40)])
    episodes.remember_batch(store, NS, [{"content": f"Melanie: the market was busy, stall {i}"}
                                        for i in range(80)])
    return old


def test_the_two_rarest_words_together_find_old_evidence_when_both_are_common(store):
    old = pottery_and_market(store)
    config = DEFAULT.replace(text_scan_limit=20, neighbour_weight=0.0)
    hits = recall.recall(store, "When is the pottery market?", [NS], mode="text", config=config)
    # the rarest word's newest 20 matches alone (the fallback before) hold only newer turns
    assert hits[0].id == old
    # the pair found one row (fewer than text_pair_min): the rarest's newest matches fill the rest
    assert len(hits) == 10 and all("pottery" in h.content for h in hits)


def test_enough_rows_holding_both_rarest_words_leave_the_rarest_alone_unfetched(store):
    pottery_and_market(store)
    episodes.remember_batch(store, NS, [{"content": f"Melanie: the pottery market moved, notice {i}"}
                                        for i in range(12)])
    config = DEFAULT.replace(text_scan_limit=20, text_pair_min=10, neighbour_weight=0.0)
    hits = recall.recall(store, "When is the pottery market?", [NS], mode="text", limit=20, config=config)
    # 13 rows hold both words (at least text_pair_min): the text leg matched those alone,
    # not the 40 turns holding "pottery" without "market"
    assert len(hits) == 13
    assert all("pottery" in h.content and "market" in h.content for h in hits)


def test_relevance_floor_for_a_query_about_nothing(make_store):
    store = make_store(embedder="minilm", vector_dim=384)
    namespaces.create(store, NS)
    episodes.remember_batch(store, NS, [
        {"content": "Caroline: we brought home a beagle from the rescue on Saturday"},
        {"content": "Melanie: I signed up for a pottery class at the community center"},
        {"content": "Caroline: my sister's wedding is in June, I'm the maid of honor"},
        {"content": "Melanie: the half marathon was brutal but I finished in under two hours"},
    ])
    real = recall.recall(store, "What dog did Caroline adopt from the shelter?", [NS])
    nothing = recall.recall(store, "quantum banana telescope", [NS])
    assert real[0].relevance >= DEFAULT.relevance_floor
    assert nothing and all(h.relevance < DEFAULT.relevance_floor for h in nothing)
    assert real[0].relevance > 2 * nothing[0].relevance


def test_neighbour_turns_of_a_hit_share_its_score(store):
    namespaces.create(store, NS)
    day_one, day_two = "2023-05-08T13:56:00+00:00", "2023-05-20T10:00:00+00:00"
    ids = [r.id for r in episodes.remember_batch(store, NS, [
        {"content": "Caroline: we adopted a beagle from the rescue", "occurred_at": day_one},
        {"content": "Melanie: stop it, what's he called?", "occurred_at": day_one},
        {"content": "Caroline: Biscuit, he already stole my spot", "occurred_at": day_one},
        {"content": "Melanie: anyway, how was work?", "occurred_at": day_two},
        {"content": "Melanie: the office moved to the fifth floor", "occurred_at": day_two},
    ])]
    hits = {h.id: h for h in recall.recall(store, "beagle rescue", [NS])}
    for neighbour in ids[1:3]:  # the question and the answer after the hit
        assert hits[neighbour].score_parts["context"] > 0
        assert hits[ids[0]].score > hits[neighbour].score
    assert not hits[ids[3]].score_parts["context"]  # within reach by id, but another session
    assert recall.recall(store, "beagle rescue", [NS], mode="text")[0].score_parts["context"] is None


def test_neighbours_follow_metadata_session_when_dates_differ(store):
    namespaces.create(store, NS)
    ids = [r.id for r in episodes.remember_batch(store, NS, [
        {"content": "ticket 88: the nightly export times out", "occurred_at": "2024-01-01T10:00:00+00:00",
         "metadata": {"thread": "t-88"}},
        {"content": "fixed by raising the statement timeout", "occurred_at": "2024-01-03T10:00:00+00:00",
         "metadata": {"thread": "t-88"}},
        {"content": "lunch order for friday", "occurred_at": "2024-01-04T10:00:00+00:00"},
    ])]
    hits = {h.id: h for h in recall.recall(store, "nightly export", [NS])}
    assert hits[ids[1]].score_parts["context"] > 0
    assert not hits[ids[2]].score_parts["context"]


def test_an_episode_whose_facts_were_all_superseded_loses_to_its_correction(store):
    config = VARIANTS["no_neighbours"]  # adjacent episodes would lift each other
    namespaces.create(store, NS)
    old = episodes.remember(store, NS, "Tom's favourite editor is vim").id
    twin = episodes.remember(store, NS, "Tom's favourite editor is vim, he said").id  # no facts: control
    facts.assert_fact(store, NS, "Tom's favourite editor is vim", entity="Tom", property="editor",
                      value="vim", source_episode_ids=[old])
    new = episodes.remember(store, NS, "Tom switched editors, his favourite is emacs now").id

    def scores(**options):
        # each hit's own score: grouping off (with it the old episode is its fact's source)
        hits = recall.recall(store, "Tom favourite editor", [NS], mode="text",
                             config=config.replace(grouping=False), **options)
        return {h.id: h.score for h in hits if h.kind == "episode"}

    before = scores()
    assert before[old] > before[new]
    facts.assert_fact(store, NS, "Tom's favourite editor is emacs", entity="Tom", property="editor",
                      value="emacs", source_episode_ids=[new], supersede=True)
    after = scores()
    assert after[old] / after[twin] == pytest.approx(config.stale_factor * before[old] / before[twin], rel=0.05)
    assert after[new] > after[old]  # the correction now wins
    history = scores(include_history=True)
    assert history[old] / history[twin] == pytest.approx(before[old] / before[twin], rel=0.05)


def test_lean_results_have_no_nulls_and_parts_only_on_request(store):
    namespaces.create(store, NS)
    episodes.remember(store, NS, "The deploy uses blue-green on Fridays")
    facts.assert_fact(store, NS, "Deploys happen on Fridays")
    lean = recall.recall_results(store, "when do we deploy", [NS])["results"]
    assert {item["kind"] for item in lean} == {"fact", "episode"}
    for item in lean:
        assert "score_parts" not in item and "embedding" not in item
        assert all(value is not None and value != {} for value in item.values())
        assert 0 <= item["relevance"] <= 1
    episode = next(item for item in lean if item["kind"] == "episode")
    assert "confidence" not in episode and "valid_from" not in episode and "occurred_at" in episode
    detailed = recall.recall_results(store, "when do we deploy", [NS], include_score_parts=True)["results"]
    # the ranking's parts, and the grouping's (recall/grouping.py): a fact's weight
    parts = {"vector", "text", "coverage", "context", "entity", "weight", "own", "diversity"}
    assert all(set(item["score_parts"]) <= parts for item in detailed)
    assert all(None not in item["score_parts"].values() for item in detailed)


def test_max_tokens_counts_the_serialised_result(store):
    namespaces.create(store, NS)
    episodes.remember_batch(store, NS, [{"content": f"deploy note {i}: blue-green on Fridays",
                                         "metadata": {"source": "runbook", "page": i}} for i in range(8)])
    everything = recall.recall_results(store, "deploy", [NS])["results"]
    one = recall.serialised_tokens(everything[0])
    content_only = recall.estimate_tokens(everything[0]["content"])
    assert one > 2 * content_only  # ids, dates, metadata and scores are part of the bill
    budget = recall.serialised_tokens({"results": everything[:3]}) + 1
    fitted = recall.recall_results(store, "deploy", [NS], max_tokens=budget)
    assert fitted["results"] == everything[:3]
    assert recall.serialised_tokens(fitted) <= budget
    assert recall.recall_results(store, "deploy", [NS], max_tokens=1)["results"] == []


def test_context_option_returns_the_turns_around_an_episode_hit(store):
    namespaces.create(store, NS)
    day = "2023-05-08T13:56:00+00:00"
    turns = ["Caroline: we adopted a beagle from the rescue", "Melanie: what's he called?",
             "Caroline: Biscuit, he stole my spot", "Melanie: so cute", "Caroline: anyway, work is busy"]
    ids = [r.id for r in episodes.remember_batch(store, NS, [{"content": t, "occurred_at": day} for t in turns])]
    elsewhere = episodes.remember(store, NS, "Melanie: a beagle barked all night", occurred_at=datetime(2023, 6, 1, tzinfo=UTC)).id

    def by_id(**options):
        return {item["id"]: item for item in recall.recall_results(store, "Biscuit", [NS], limit=1, **options)["results"]}

    assert by_id()[ids[2]]["context"] == [{"id": ids[1], "content": turns[1]}, {"id": ids[3], "content": turns[3]}]
    wide = by_id(context=2)[ids[2]]["context"]
    assert [c["id"] for c in wide] == [ids[0], ids[1], ids[3], ids[4]]
    assert "context" not in by_id(context=0)[ids[2]]
    near = {item["id"]: item for item in recall.recall_results(store, "beagle", [NS], context=5)["results"]}
    assert elsewhere in near and "context" not in near[elsewhere]  # alone in its session
    assert all(c["id"] not in near for item in near.values() for c in item.get("context", []))
    with pytest.raises(errors.InvalidInput, match="context: Input should be less than or equal to 5"):
        RECALL.parse({"query": "beagle", "context": 99})  # the operation checks the bound, once


def test_an_older_episode_loses_to_its_newer_near_duplicate(make_store):
    config = VARIANTS["no_neighbours"]  # isolate the supersession rule
    store = make_store(embedder="minilm", vector_dim=384)
    namespaces.create(store, NS)
    # written newest first, so neither id order nor creation time can explain the ranking
    new = episodes.remember(store, NS, "The staging database now runs PostgreSQL 16 after the upgrade.",
                            occurred_at=datetime(2026, 5, 4, 17, 28, tzinfo=UTC)).id
    old = episodes.remember(store, NS, "The staging database runs PostgreSQL 14.",
                            occurred_at=datetime(2026, 1, 6, 7, 18, tzinfo=UTC)).id
    unrelated = episodes.remember(store, NS, "Melanie signed up for a pottery class on Thursdays.",
                                  occurred_at=datetime(2026, 2, 1, 9, tzinfo=UTC)).id

    def ranked(query: str, **options) -> dict[int, RecallHit]:
        return {h.id: h for h in recall.recall(store, query, [NS], config=config, **options)}

    current = ranked("Which PostgreSQL version does the staging database run?")
    assert next(iter(current)) == new  # best first
    plain = ranked("Which PostgreSQL version does the staging database run?", include_history=True)
    assert next(iter(plain)) == old  # without the rule the older, shorter statement wins
    # just below its correction, never under superseded_factor times its own score
    expected = max(config.superseded_factor * plain[old].score, config.supersede_margin * plain[new].score)
    assert current[old].score == pytest.approx(expected, rel=0.01)
    assert current[old].score < current[new].score
    assert current[new].score == pytest.approx(plain[new].score, rel=0.01)  # the newest is kept
    assert current[unrelated].score == pytest.approx(plain[unrelated].score, rel=0.01)  # not a near-duplicate

    # a question about the old time still finds the old value
    then = ranked("Which PostgreSQL version did the staging database run in January?")
    assert next(iter(then)) == old
    assert recall.asks_about_time("What did we plan in March?")
    assert recall.asks_about_time("which version did staging use to run")
    assert not recall.asks_about_time("Who may approve the release?")
    with_date = ranked("Which PostgreSQL version does the staging database run?", as_of=datetime(2026, 12, 1, tzinfo=UTC))
    assert with_date[old].score > with_date[new].score  # as_of: no demotion either
