"""Recall groups a fact with its source episodes on a real database: one result per piece of
evidence, its sources read compactly by the recall statement itself, the lean answer's shape, max_tokens
counting the sources it sends, context turns not repeating them, forgotten sources
left out, and as_of / known_at still honoured."""

from __future__ import annotations

from datetime import UTC, datetime

from stash_pipeline import recall
from stash_pipeline.memory import episodes, facts, namespaces
from stash_pipeline.recall.config import DEFAULT, VARIANTS
from testkit.recall_sets import CHAT_NS
from testkit.recall_sets import chat as _chat

NS = CHAT_NS


def test_a_fact_and_its_source_turns_are_one_result(store):
    ids = _chat(store)
    query = "What does Melanie do on Thursday evenings? pottery class"
    plain = recall.recall(store, query, [NS], config=VARIANTS["no_grouping"])
    assert {("fact", ids["fact"]), ("episode", ids["class"])} <= {(h.kind, h.id) for h in plain}
    hits = recall.recall(store, query, [NS])
    keys = [(h.kind, h.id) for h in hits]
    assert ("fact", ids["fact"]) in keys
    assert ("episode", ids["class"]) not in keys and ("episode", ids["bowls"]) not in keys
    head = next(h for h in hits if h.kind == "fact")
    assert [s.id for s in head.sources] == [ids["class"], ids["bowls"]]
    assert head.sources[0].excerpt.startswith("Melanie: Busy! I started a pottery class")
    assert head.sources[0].occurred_at == datetime(2023, 3, 15, 12, tzinfo=UTC)
    # nothing found is lost: every candidate the plain ranking showed is shown, in a result or a fact's sources
    shown = set(keys) | {("episode", s.id) for h in hits for s in h.sources or ()}
    assert {(h.kind, h.id) for h in plain} <= shown
    assert len(hits) == len(shown - {("episode", s.id) for h in hits for s in h.sources or ()})


def test_the_lean_answer_carries_sources_once_and_explains_the_grouping_on_request(store):
    ids = _chat(store)
    query = "pottery class Melanie"
    lean = recall.recall_results(store, query, [NS], context=1)["results"]
    item = next(r for r in lean if r["kind"] == "fact")
    assert "source_episode_ids" not in item and "grouped" not in item  # the ids are in sources
    assert [s["id"] for s in item["sources"]] == [ids["class"], ids["bowls"]]
    assert all(set(s) == {"id", "occurred_at", "excerpt"} for s in item["sources"])
    # a context turn is never one of the sources already sent
    sent = {s["id"] for s in item["sources"]}
    assert not [c for r in lean for c in r.get("context", ()) if c["id"] in sent]
    detailed = recall.recall_results(store, query, [NS], include_score_parts=True)["results"]
    item = next(r for r in detailed if r["kind"] == "fact")
    assert {g["id"] for g in item["grouped"]} <= sent and item["grouped"]
    assert "own" in item["score_parts"]
    assert any("score" in s for s in item["sources"])  # folded sources show their own score


def test_max_tokens_counts_the_sources_sent(store):
    _chat(store)
    everything = recall.recall_results(store, "pottery class Melanie", [NS])["results"]
    first = everything[0]
    assert first["kind"] == "fact"
    assert recall.serialised_tokens(first) > recall.serialised_tokens({**first, "sources": []}) + 20
    budget = recall.serialised_tokens({"results": everything[:1]})
    fitted = recall.recall_results(store, "pottery class Melanie", [NS], max_tokens=budget)["results"]
    assert fitted == everything[:1]
    assert recall.serialised_tokens({"results": fitted}) <= budget
    # a budget that would fit the fact's text but not its sources sends nothing rather than cut them
    small = recall.serialised_tokens({"results": [{**first, "sources": []}]})
    assert recall.recall_results(store, "pottery class Melanie", [NS], max_tokens=small)["results"] == []
    # the library call's budget counts the excerpts too
    assert recall.recall(store, "pottery class Melanie", [NS], max_tokens=recall.estimate_tokens(first["content"])) == []


def test_a_forgotten_source_is_left_out_and_known_at_sees_it(store):
    ids = _chat(store)
    before = datetime.now(UTC)
    forgotten = episodes.forget(store, "Melanie: Oh yeah, bowls that came out lopsided. I love them anyway.", NS)
    assert forgotten.applied and forgotten.episode_id == ids["bowls"]
    assert ids["fact"] not in forgotten.withdrawn_fact_ids  # the class turn still supports it
    head = next(h for h in recall.recall(store, "pottery class Melanie", [NS]) if h.kind == "fact")
    assert [s.id for s in head.sources] == [ids["class"]]
    # as known before the forget, the fact rested on both turns
    then = recall.recall(store, "pottery class Melanie", [NS], known_at=before)
    head = next(h for h in then if h.kind == "fact")
    assert [s.id for s in head.sources] == [ids["class"], ids["bowls"]]


def _service(store) -> dict[str, int]:
    """Notes about one service, each fact asserted with the note it copies as its source."""
    namespaces.create(store, "/ops")
    notes = [
        "session-store keeps its state in S3 and is owned by Tom Sato.",
        "The session-store dashboard lives in Grafana under the growth folder.",
        "Lunch on Friday is at the Thai place.",
    ]
    made = episodes.remember_batch(store, "/ops", [{"content": n, "occurred_at": f"2024-05-0{i + 1}T09:00:00+00:00"}
                                                   for i, n in enumerate(notes)])
    ids = [int(r.id) for r in made]
    copy = facts.assert_fact(store, "/ops", notes[1], entity="session-store", property="dashboard",
                             value="Grafana growth folder", source_episode_ids=[ids[1]]).fact
    return {"answer": ids[0], "dashboard": ids[1], "copy": copy.id}


def test_a_fact_that_copies_its_source_does_not_outrank_an_episode_that_matches_better(store):
    """Weighted like any fact, the copy of one note outranked the note that answers (the
    agent-memory set's paraphrase questions); it has no evidence of its own to show for it."""
    ids = _service(store)
    query = "Which storage does session-store use?"
    # the name stays in the query's vector: in three notes it is in most rows, and masked
    # the hash embedder's answer shares nothing with the query but it
    named = DEFAULT.replace(mask_names=False)
    plain = recall.recall(store, query, ["/ops"], config=named.replace(grouping=False))
    score = {(h.kind, h.id): h.score for h in plain}
    assert score[("episode", ids["answer"])] > score[("fact", ids["copy"])]
    hits = recall.recall(store, query, ["/ops"], config=named)
    assert (hits[0].kind, hits[0].id) == ("episode", ids["answer"])
    copy = next(h for h in hits if h.kind == "fact")
    assert "weight" not in copy.score_parts  # ranked by its own score: it restates its source word for word
    # with the lift it had before (a copy weighted like any fact) it took the first place
    lifted = recall.recall(store, query, ["/ops"], config=named.replace(copy_similarity=2.0))
    assert (lifted[0].kind, lifted[0].id) == ("fact", ids["copy"])


def test_a_fact_in_its_own_words_keeps_its_weight(store):
    """The weight is for facts that say in plain words what turns say: not taken from them."""
    ids = _chat(store)
    hits = recall.recall(store, "pottery class Melanie", [NS])
    fact = next(h for h in hits if h.id == ids["fact"] and h.kind == "fact")
    assert fact.score_parts["weight"] in (DEFAULT.fact_weight, DEFAULT.fact_weight * DEFAULT.subject_weight)


def test_a_fact_matched_on_a_stray_word_does_not_outrank_an_episode_that_matches_better(store):
    """A fact sharing only "May" with the query, little meaning (cosine below
    weight_min_cosine), and which the entity leg did not reach, ranks by its own score:
    weighted, such facts pushed the answer out of agent-memory questions."""
    namespaces.create(store, "/team")
    made = episodes.remember_batch(store, "/team", [
        {"content": "Retrospective for May: the team agreed to add a load test before each major launch.",
         "occurred_at": "2024-06-01T09:00:00+00:00"},
        {"content": "Standup notes: the build is green again.", "occurred_at": "2024-06-02T09:00:00+00:00"}])
    answer = int(made[0].id)
    stray = facts.assert_fact(store, "/team", "The wedding is set for May").fact
    query = "May retro outcome"
    plain = {(h.kind, h.id): h for h in recall.recall(store, query, ["/team"], config=VARIANTS["no_grouping"])}
    fact, episode = plain[("fact", stray.id)], plain[("episode", answer)]
    assert fact.score < episode.score < fact.score * DEFAULT.fact_weight
    assert fact.score_parts["vector"] < DEFAULT.weight_min_cosine
    hits = recall.recall(store, query, ["/team"])
    assert [(h.kind, h.id) for h in hits[:2]] == [("episode", answer), ("fact", stray.id)]
    assert "weight" not in hits[1].score_parts
    # weighted as before, the fact took the first place
    lifted = recall.recall(store, query, ["/team"], config=DEFAULT.replace(weight_min_cosine=0.0))
    assert (lifted[0].kind, lifted[0].id) == ("fact", stray.id)


def test_a_fact_told_again_in_another_session_takes_no_second_slot(store):
    """Two sessions' accounts of one event become two facts in other words; recall shows the
    better-ranked one, with the other's turn in ``repeated_in`` (its lineage untouched), and
    the slot it would have taken goes to the next candidate."""
    ns = "/chat/again"
    namespaces.create(store, ns)
    told = [episodes.remember(store, ns, text, occurred_at=datetime(2023, 5, day, 12, tzinfo=UTC)).id
            for day, text in ((3, "Caroline: I went to the pride parade last week, I felt I belonged"),
                              (20, "Caroline: that pride parade, I really felt like I belonged there"),
                              (21, "Caroline: my cat knocked a plant over again"))]
    first = facts.assert_fact(store, ns, "Caroline went to the pride parade and felt she belonged",
                              source_episode_ids=[told[0]]).fact.id
    again = facts.assert_fact(store, ns, "Caroline went to a pride parade and felt that she belonged there",
                              source_episode_ids=[told[1]]).fact.id
    query = "Did Caroline go to a pride parade?"
    apart = recall.recall(store, query, [ns], limit=3, config=DEFAULT.replace(repeat_similarity=2.0))
    assert {("fact", first), ("fact", again)} <= {(h.kind, h.id) for h in apart}
    hits = recall.recall(store, query, [ns], limit=3)
    keys = [(h.kind, h.id) for h in hits]
    head = next(h for h in hits if h.kind == "fact")
    assert ("fact", first if head.id == again else again) not in keys  # one account, one slot
    other = told[1] if head.id == first else told[0]
    assert [s.id for s in head.repeated_in] == [other] and other not in head.source_episode_ids
    assert ("episode", told[2]) in keys  # the freed slot went to the next candidate
    lean = recall.recall_results(store, query, [ns], limit=3)["results"]
    assert [s["id"] for s in next(r for r in lean if r["kind"] == "fact")["repeated_in"]] == [other]


def test_an_account_in_another_namespace_is_not_folded(store):
    """The same words in two namespaces (two agents, two projects) stay two results: a
    result's ``repeated_in`` turns are always of its own namespace."""
    ids = {}
    for ns, text in (("/chat/one", "Caroline went to the pride parade and felt she belonged"),
                     ("/chat/two", "Caroline went to a pride parade and felt that she belonged there")):
        namespaces.create(store, ns)
        turn = episodes.remember(store, ns, f"Caroline: {text}").id
        ids[ns] = facts.assert_fact(store, ns, text, source_episode_ids=[turn]).fact.id
    hits = recall.recall(store, "Did Caroline go to a pride parade?", ["/chat/one", "/chat/two"], limit=4)
    assert {("fact", i) for i in ids.values()} <= {(h.kind, h.id) for h in hits}
    assert not [h for h in hits if h.repeated_in]
