"""Facts stage on conversations: windows with context and participants, several facts per
window with exact lineage, grounding against the window, idempotency and crash resume."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from stash_pipeline.consolidation import runner
from stash_pipeline.memory import episodes, lineage, namespaces
from stash_pipeline.stages import facts as facts_stage
from stash_pipeline.stages.prompts import FactDraft
from testkit.scripted_model import facts_blocks
from tests.integration.consolidation.conftest import rows

#: one session of a two-person chat; Caroline's turns call Jolene "you"
SESSION_1 = [
    "Jolene: Hey Caroline! Guess what, I got the job at the aquarium.",
    "Caroline: No way, congrats! You worked so hard for that.",
    "Jolene: Thanks! I start on Monday as a marine biologist.",
    "Caroline: I'm so proud of you.",
]
SESSION_1_MORE = [
    "Caroline: Oh, and I finally adopted a beagle from the rescue.",
    "Jolene: Stop it! What's he called?",
    "Caroline: Biscuit. He already stole my spot on the couch.",
]
SESSION_2 = ["Caroline: Biscuit had surgery on his back leg, rough week.", "Jolene: Oh no, is he okay?"]


@pytest.fixture
def small(make_store, server):
    """Batches of four episodes: a session spans two batches, so later windows need earlier turns."""
    return make_store(openai_base_url=server.base_url, reasoner_model="scripted", reasoner_backoff_s=0.01,
                      reasoner_timeout_s=1.0, reasoner_max_retries=1, reasoner_max_attempts=2,
                      consolidation_batch_size=4)


def _chat(store, namespace, turns, session):
    namespaces.create(store, namespace)
    return [episodes.remember(store, namespace, text, metadata={"dia_id": f"D{session}:{n}"},
                              occurred_at=datetime(2023, 3, session + 10, 12, tzinfo=UTC)).id
            for n, text in enumerate(turns, start=1)]


def _facts(store):
    return rows(store, "SELECT id, entity, content, valid_from FROM facts ORDER BY id")


def _parents(store, fact_id):
    return [r["parent_id"] for r in rows(
        store, "SELECT parent_id FROM lineage WHERE child_kind = 'fact' AND child_id = %(id)s ORDER BY parent_id",
        id=fact_id)]


def _ids_by_text(block):
    return {text: i for i, text in block.context + block.new}


def _script(plan):
    """Answers per window: ``plan(block) -> [(summary, [turn texts cited]), ...]``."""

    def answer(user):
        out = []
        for block in facts_blocks(user):
            ids = _ids_by_text(block)
            for summary, cited in plan(block):
                sources = [ids.get(t, t) for t in cited]  # an int stands for itself (an id not shown)
                entity = re.match(r"[A-Z]\w+", summary).group(0)
                out.append({"cluster": block.number, "sources": sources, "entity": entity, "summary": summary})
        return {"facts": out}

    return answer


def test_a_turn_reaches_the_model_with_its_session_and_participants(small, server, model):
    first = _chat(small, "/c", SESSION_1, 1)
    more = _chat(small, "/c", SESSION_1_MORE, 1)
    later = _chat(small, "/c", SESSION_2, 2)
    report = runner.run_stage(small, "/c", "facts")
    assert report.status == "ok" and report.items_failed == 0
    calls = [r for r in server.chat_requests() if "STAGE: facts" in r["messages"][0]["content"]]
    prompts = [r["messages"][1]["content"] for r in calls]
    # batches of four: [session 1 x4], [session 1 x3, session 2 x1], [session 2 x1]; each
    # window is shown after the turns of its session before it, whichever batch they were in
    assert report.details["windows"] == 4 and report.details.get("clusters", 0) == 0
    # the two short windows of the second batch share one call
    assert [len(facts_blocks(p)) for p in prompts] == [1, 2, 1] and report.model_calls == 3
    blocks = [b for p in prompts for b in facts_blocks(p)]
    assert [[i for i, _ in b.new] for b in blocks] == [first, more, later[:1], later[1:]]
    assert [[i for i, _ in b.context] for b in blocks] == [[], first, [], later[:1]]  # other sessions stay out
    assert blocks[1].participants == ["Jolene", "Caroline"]
    assert "2023-03-11" in blocks[1].header and "2023-03-12" in blocks[2].header
    assert blocks[1].context[1] == (first[1], SESSION_1[1])


def test_a_fact_naming_the_other_participant_is_grounded_with_exact_lineage(small, server, model):
    first = _chat(small, "/c", SESSION_1, 1)
    more = _chat(small, "/c", SESSION_1_MORE, 1)

    def plan(block):
        if block.new[0][1] == SESSION_1[0]:
            # "you" in Caroline's turn is Jolene: the fact names her and cites that turn only
            return [("Caroline is proud of Jolene for the work that got her hired", [SESSION_1[3]])]
        return [
            ("Caroline adopted a beagle from the rescue", [SESSION_1_MORE[0]]),
            ("Caroline's beagle is called Biscuit and took her spot on the couch",
             [SESSION_1_MORE[0], SESSION_1_MORE[2]]),
            # rests on an earlier turn (context) and a new one: both are its sources
            ("Jolene asked Caroline what the beagle is called after hearing about the aquarium job",
             [SESSION_1[0], SESSION_1_MORE[1]]),
        ]

    model.facts_script = _script(plan)
    report = runner.run_stage(small, "/c", "facts")
    assert (report.items_failed, report.details["facts_created"]) == (0, 4)
    got = _facts(small)
    assert [(f["entity"], _parents(small, f["id"])) for f in got] == [
        ("Caroline", [first[3]]),
        ("Caroline", [more[0]]),
        ("Caroline", [more[0], more[2]]),
        ("Jolene", [first[0], more[1]]),
    ]
    # read alone, the turn never names Jolene: the old check refused this fact
    alone = facts_stage.validate(FactDraft(cluster=1, summary=got[0]["content"]), [SESSION_1[3]])
    assert any("'Jolene'" in p for p in alone)
    assert rows(small, "SELECT * FROM dead_letters") == []
    # a second run: nothing new, nothing written
    again = runner.run_stage(small, "/c", "facts")
    assert again.status == "idle" and again.model_calls == 0 and _facts(small) == got


def test_a_participant_named_only_in_metadata_grounds_too(cstore, server, model):
    namespaces.create(cstore, "/m")
    turns = [("Jolene", "I got the job at the aquarium!"), ("Caroline", "Congrats, you earned it.")]
    ids = [episodes.remember(cstore, "/m", text, metadata={"session_id": "s1", "speaker": who}).id
           for who, text in turns]
    model.facts_script = _script(lambda block: [("Caroline congratulated Jolene on the aquarium job",
                                                 ["Caroline: Congrats, you earned it."])])
    report = runner.run_stage(cstore, "/m", "facts")
    assert report.items_failed == 0
    (block,) = facts_blocks(server.chat_requests()[0]["messages"][1]["content"])
    assert block.participants == ["Jolene", "Caroline"]
    assert [t for _, t in block.new] == ["Jolene: I got the job at the aquarium!", "Caroline: Congrats, you earned it."]
    (fact,) = _facts(cstore)
    assert _parents(cstore, fact["id"]) == [ids[1]]


def test_a_name_the_conversation_never_mentions_is_still_refused(cstore, server, model):
    ids = _chat(cstore, "/c", SESSION_1, 1)
    model.facts_script = _script(lambda block: [
        ("Jolene starts at the aquarium on Monday as a marine biologist", [SESSION_1[2]]),
        ("Priscilla hired Jolene at the aquarium", [SESSION_1[0]]),
    ])
    report = runner.run_stage(cstore, "/c", "facts")
    assert (report.rows_written, report.items_failed, report.details["facts_refused"]) == (1, 1, 1)
    (kept,) = _facts(cstore)
    assert kept["entity"] == "Jolene" and _parents(cstore, kept["id"]) == [ids[2]]
    letters = rows(cstore, "SELECT item_id, status, last_error FROM dead_letters")
    assert [(d["item_id"], d["status"]) for d in letters] == [(ids[0], "pending")]  # only the turn it cites
    assert "'Priscilla', which no source mentions" in letters[0]["last_error"]


def test_a_refused_fact_dead_letters_only_the_turns_nothing_kept_rests_on(cstore, server, model):
    ids = _chat(cstore, "/c", SESSION_1, 1)
    model.facts_script = _script(lambda block: [
        ("Jolene starts at the aquarium on Monday as a marine biologist", [SESSION_1[2]]),
        # refused; turn 3 is also the kept fact's source, turn 1 is nobody else's
        ("Priscilla hired Jolene at the aquarium as a marine biologist", [SESSION_1[0], SESSION_1[2]]),
    ])
    report = runner.run_stage(cstore, "/c", "facts")
    assert (report.rows_written, report.items_failed, report.details["facts_refused"]) == (1, 1, 1)
    (kept,) = _facts(cstore)
    assert _parents(cstore, kept["id"]) == [ids[2]]
    letters = rows(cstore, "SELECT item_id, status, last_error FROM dead_letters")
    assert [(d["item_id"], d["status"]) for d in letters] == [(ids[0], "pending")]
    assert "'Priscilla', which no source mentions" in letters[0]["last_error"]


def test_citations_are_checked_against_the_window(cstore, server, model):
    ids = _chat(cstore, "/c", SESSION_1, 1)
    model.facts_script = _script(lambda block: [
        # one id outside the window is dropped; the fact keeps the one it rests on
        ("Jolene got a job at the aquarium", [SESSION_1[0], 987654]),
    ])
    report = runner.run_stage(cstore, "/c", "facts")
    assert (report.items_failed, report.details["citations_dropped"]) == (0, 1)
    (fact,) = _facts(cstore)
    assert _parents(cstore, fact["id"]) == [ids[0]]

    more = _chat(cstore, "/c", SESSION_2, 2)
    model.facts_script = _script(lambda block: [
        ("Biscuit had surgery on his back leg", [SESSION_2[0]]),
        ("Jolene worries about Biscuit", [987654]),  # rests on nothing shown
    ])
    report = runner.run_stage(cstore, "/c", "facts")
    assert (report.rows_written, report.items_failed) == (0, 2)  # the whole window waits for a retry
    letters = rows(cstore, "SELECT item_id, last_error FROM dead_letters ORDER BY item_id")
    assert [d["item_id"] for d in letters] == more
    assert "fact 2 of the window ('Jolene worries about Biscuit') cites none of its items" in letters[0]["last_error"]


def test_several_facts_from_one_embedding_cluster_each_cite_their_observations(cstore, server, model):
    namespaces.create(cstore, "/o")
    texts = ["Alice lives in Paris near the river Seine", "Alice lives in Paris near the river"]
    ids = [episodes.remember(cstore, "/o", t).id for t in texts]

    def answer(user):
        (block,) = facts_blocks(user)
        assert block.header == "related observations" and not block.context
        return {"facts": [
            {"cluster": 1, "sources": [ids[0]], "entity": "Alice", "summary": "Alice lives near the Seine"},
            {"cluster": 1, "sources": ids, "entity": "Alice", "property": "lives", "value": "Paris",
             "summary": "Alice has her home in Paris"},
        ]}

    model.facts_script = answer
    report = runner.run_stage(cstore, "/o", "facts")
    assert (report.rows_written, report.items_failed, report.details["clusters"]) == (2, 0, 1)
    assert [_parents(cstore, f["id"]) for f in _facts(cstore)] == [[ids[0]], ids]


def _signature(store, slug):
    ns = rows(store, "SELECT id FROM namespaces WHERE slug = %(s)s", s=slug)[0]["id"]
    facts = rows(store, "SELECT id, content FROM facts WHERE namespace_id = %(ns)s ORDER BY id", ns=ns)
    turns = {r["id"]: r["content"] for r in rows(store, "SELECT id, content FROM episodes WHERE namespace_id = %(ns)s",
                                                 ns=ns)}
    return sorted((f["content"], tuple(sorted(turns[p] for p in _parents(store, f["id"])))) for f in facts)


def test_crash_mid_batch_then_resume_equals_a_clean_run(small, server, model, monkeypatch):
    def plan(block):
        return [(f"{t.split(':')[0]} said something about " + " ".join(t.split()[-3:]).rstrip(".!?"), [t])
                for _, t in block.new if len(t) > 40]

    model.facts_script = _script(plan)
    for slug in ("/clean", "/crash"):
        _chat(small, slug, SESSION_1 + SESSION_1_MORE, 1)
        _chat(small, slug, SESSION_2, 2)
    runner.run_stage(small, "/clean", "facts")
    clean = _signature(small, "/clean")
    assert len(clean) >= 4

    real_add = lineage.add
    state = {"calls": 0}

    def crash(*args, **kwargs):
        state["calls"] += 1
        if state["calls"] == 2:  # the second fact of the first batch
            raise RuntimeError("injected crash")
        return real_add(*args, **kwargs)

    monkeypatch.setattr(lineage, "add", crash)
    with pytest.raises(RuntimeError, match="injected crash"):
        runner.run_stage(small, "/crash", "facts")
    monkeypatch.setattr(lineage, "add", real_add)
    assert _signature(small, "/crash") == []
    assert rows(small, "SELECT count(*) AS n FROM stage_checkpoints c JOIN namespaces n ON n.id = c.namespace_id"
                       " WHERE n.slug = '/crash' AND c.cursor > 0")[0]["n"] == 0
    resumed = runner.run_stage(small, "/crash", "facts")
    assert resumed.rows_written == len(clean)
    assert _signature(small, "/crash") == clean
    third = runner.run_stage(small, "/crash", "facts")
    assert third.rows_written == 0 and _signature(small, "/crash") == clean


def test_a_window_cut_off_at_max_tokens_is_asked_again_as_two_halves(cstore, server, model):
    ids = _chat(cstore, "/c", SESSION_1, 1)
    model.inject("facts", "ramble")  # the whole window's answer never ends
    report = runner.run_stage(cstore, "/c", "facts")
    assert (report.status, report.items_failed) == ("ok", 0)
    prompts = [r["messages"][1]["content"] for r in server.chat_requests()
               if "STAGE: facts" in r["messages"][0]["content"]]
    blocks = [facts_blocks(p)[0] for p in prompts]
    assert [[i for i, _ in b.new] for b in blocks] == [ids, ids[:2], ids[2:]]
    assert [i for i, _ in blocks[2].context] == ids[:2]  # the second half reads the first as context
    assert sorted(p for f in _facts(cstore) for p in _parents(cstore, f["id"])) == ids


def test_a_dead_lettered_turn_is_retried_with_its_conversation(cstore, server, model):
    ids = _chat(cstore, "/c", SESSION_1, 1)
    answers = iter([
        [("Priscilla hired Jolene as a marine biologist", [SESSION_1[2]])],  # refused: turn 3 waits
        [("Jolene starts at the aquarium on Monday as a marine biologist", [SESSION_1[2]])],
    ])
    model.facts_script = _script(lambda block: next(answers))
    first = runner.run_stage(cstore, "/c", "facts")
    assert (first.items_failed, first.rows_written) == (1, 0)
    second = runner.run_stage(cstore, "/c", "facts")
    assert (second.items_failed, second.rows_written, second.model_calls) == (0, 1, 1)
    retry = facts_blocks(server.chat_requests()[-1]["messages"][1]["content"])[0]
    assert [i for i, _ in retry.new] == [ids[2]] and [i for i, _ in retry.context] == ids[:2]
    assert retry.participants == ["Jolene", "Caroline"]
    assert [r["status"] for r in rows(cstore, "SELECT status FROM dead_letters")] == ["retried"]
    (fact,) = _facts(cstore)
    assert _parents(cstore, fact["id"]) == [ids[2]]


def test_a_window_knows_what_earlier_sessions_established(cstore, server, model):
    plan = _chat(cstore, "/c", ["Jolene: I'm planning a trip to Lisbon this summer.", "Caroline: Jealous!"], 1)
    model.facts_script = _script(lambda block: [("Jolene plans a summer trip to Lisbon", [block.new[0][1]])])
    runner.run_stage(cstore, "/c", "facts")
    change = _chat(cstore, "/c", ["Jolene: Change of plans, we're going to Kyoto instead.", "Caroline: Even better!"], 2)
    model.facts_script = _script(lambda block: [
        ("Jolene switched her summer trip from Lisbon to Kyoto", [block.new[0][1]]),  # Lisbon: session 1 only
        ("Jolene switched her trip from Porto to Kyoto", [block.new[0][1]]),  # Porto: nowhere
    ])
    report = runner.run_stage(cstore, "/c", "facts")
    assert (report.rows_written, report.details["facts_refused"]) == (1, 1)
    user = server.chat_requests()[-1]["messages"][1]["content"]
    assert "Known from earlier sessions (for reference, not citable):\n- Jolene plans a summer trip to Lisbon" in user
    first, second = _facts(cstore)
    assert second["content"] == "Jolene switched her summer trip from Lisbon to Kyoto"
    assert _parents(cstore, first["id"]) == [plan[0]] and _parents(cstore, second["id"]) == [change[0]]
    # the refused fact rests on the turn the kept one rests on: nothing waits for a retry
    assert (report.items_failed, rows(cstore, "SELECT item_id FROM dead_letters")) == (0, [])


def test_turns_without_session_metadata_are_threaded_by_time(small, server, model):
    namespaces.create(small, "/t")
    turns = SESSION_1 + SESSION_1_MORE[:1] + SESSION_2  # a minute apart; session 2 three hours later
    times = [datetime(2023, 3, 11, 12, m, tzinfo=UTC) for m in range(5)] + [datetime(2023, 3, 11, 15, tzinfo=UTC),
                                                                          datetime(2023, 3, 11, 15, 1, tzinfo=UTC)]
    # a log line reads like a turn, but nobody answers it: clustered, not a conversation
    turns.append("Build: the nightly deploy finished in 4 minutes")
    times.append(datetime(2023, 3, 11, 20, tzinfo=UTC))
    ids = [episodes.remember(small, "/t", t, occurred_at=when).id for t, when in zip(turns, times, strict=True)]
    report = runner.run_stage(small, "/t", "facts")
    assert report.items_failed == 0
    assert (report.details["windows"], report.details["clusters"]) == (3, 1)
    blocks = [b for r in server.chat_requests() if "STAGE: facts" in r["messages"][0]["content"]
              for b in facts_blocks(r["messages"][1]["content"])]
    # batches of four: the fifth turn, alone in the second batch, still continues the chat
    assert [[i for i, _ in b.new] for b in blocks] == [ids[:4], ids[4:5], ids[5:7], ids[7:]]
    assert [[i for i, _ in b.context] for b in blocks] == [[], ids[:4], [], []]  # the gap ends the thread
    assert blocks[2].participants == ["Caroline", "Jolene"] and blocks[3].header == "related observations"
