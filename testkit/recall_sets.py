"""Small recall fixtures written into a store: a labelled set and a short chat.

* ``load_labelled`` writes ``data/recall_small.jsonl`` (episodes, facts, some superseded,
  and questions naming their relevant keys); ``ranks`` and ``summarise`` score a search on it.
* ``chat`` writes five turns of a two-person chat and a fact that cites two of them.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from stash_pipeline.memory import episodes, facts, namespaces

DATA = Path(__file__).parent / "data" / "recall_small.jsonl"
#: the namespace ``load_labelled`` writes into by default
LABELLED_NS = "/projects/x"
#: the namespace and the day of ``chat``
CHAT_NS = "/chat/c1"
CHAT_DAY = "2023-03-15T12:00:00+00:00"


def load_labelled(store, namespace=LABELLED_NS):
    """Write the labelled set; returns ({key: (kind, id)}, questions)."""
    namespaces.create(store, namespace)
    keys: dict[str, tuple[str, int]] = {}
    questions = []
    records = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    episode_records = [r for r in records if r["type"] == "episode"]
    out = episodes.remember_batch(store, namespace, [{"content": r["content"]} for r in episode_records])
    for record, result in zip(episode_records, out, strict=True):
        keys[record["key"]] = ("episode", result.id)
    for record in records:
        if record["type"] == "fact":
            made = facts.assert_fact(
                store, namespace, record["content"], entity=record["entity"], property=record["property"],
                value=record["value"], supersede=record.get("supersede", False),
            )
            keys[record["key"]] = ("fact", made.fact.id)
        elif record["type"] == "question":
            questions.append(record)
    return keys, questions


def ranks(store, keys, questions, search):
    """Rank (0-based) of the first relevant hit per question, None when not in the top 10."""
    out = []
    for q in questions:
        hits = [(h.kind, h.id) for h in search(q["query"])]
        found = [i for i, hit in enumerate(hits) if hit in {keys[r] for r in q["relevant"]}]
        out.append(found[0] if found else None)
    return out


def summarise(rank_list):
    n = len(rank_list)
    return {
        "recall@1": sum(r is not None and r < 1 for r in rank_list) / n,
        "recall@3": sum(r is not None and r < 3 for r in rank_list) / n,
        "recall@10": sum(r is not None for r in rank_list) / n,
        "mrr": sum(1 / (r + 1) for r in rank_list if r is not None) / n,
    }


def chat(store) -> dict[str, int]:
    """Five turns in ``CHAT_NS`` and a fact citing the second and the fourth; returns their ids."""
    namespaces.create(store, CHAT_NS)
    turns = [
        "Caroline: How was your week?",
        "Melanie: Busy! I started a pottery class on Thursday nights at the community center.",
        "Caroline: That sounds so relaxing. Made anything yet?",
        "Melanie: Oh yeah, bowls that came out lopsided. I love them anyway.",
        "Caroline: Haha, that's so you.",
    ]
    made = episodes.remember_batch(store, CHAT_NS, [{"content": t, "occurred_at": CHAT_DAY} for t in turns])
    ids = [int(r.id) for r in made]
    fact = facts.assert_fact(store, CHAT_NS, "Melanie attends a weekly pottery class at the community centre",
                             entity="Melanie", property="craft", value="pottery",
                             valid_from=datetime.fromisoformat(CHAT_DAY), source_episode_ids=[ids[1], ids[3]]).fact
    return {"class": ids[1], "bowls": ids[3], "fact": fact.id, "first": ids[0], "last": ids[4]}
