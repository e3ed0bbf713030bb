"""bench/recall_steps.py: its "after" path answers what ``recall_results`` answers.

The steps table once timed the round trip and shaping without grouping, so its "after"
answer held the statement's ``limit + overfetch`` ungrouped candidates, and a count that
compared answers compared those with ten: 0 of 325 whatever recall did. The table now
times the path recall runs, grouping included, and counts the answers grouping changed.
"""

from __future__ import annotations

import re

from bench import recall_steps
from stash_pipeline import recall
from testkit.recall_sets import CHAT_NS as NS
from testkit.recall_sets import chat as _chat

QUESTIONS = ["What class did Melanie start?", "What did Melanie make in her pottery class?", "How was the week?"]


def test_the_after_path_is_recall_results_with_grouping_timed_as_a_step(store, capsys):
    _chat(store)
    for q in QUESTIONS:
        recall.recall(store, q, [NS])  # the vectors are cached, as in the bench
    grouped = 0
    for q in QUESTIONS:
        ms, answer = recall_steps.after(store, q, NS)
        assert answer == recall.recall_results(store, q, [NS], limit=10, context=1)
        assert set(ms) == set(recall_steps.AFTER_STEPS)
        grouped += any(r.get("sources") for r in answer["results"])
    assert grouped  # the fact took its source turns with it
    recall_steps.steps_table(store, QUESTIONS, NS)
    title = capsys.readouterr().out.splitlines()[0]
    changed = re.search(rf"grouping changed the answer of (\d+) of {len(QUESTIONS)}", title)
    assert changed and int(changed[1]) >= 1  # the fact that took its turns
