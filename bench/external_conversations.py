"""Recall on a conversational benchmark in the LoCoMo file format that you supply:
``python -m bench.external_conversations PATH`` (the file is not part of this repository:
LoCoMo is published by Snap Research, github.com/snap-research/locomo, under CC BY-NC 4.0).

PATH is the release as published: ``locomo10.json``, ``data/locomo10.zip`` (one JSON file
per conversation, named by its number), or a directory of those files. The list file is
a JSON list of conversations, each with ``sample_id``; ``conversation``:
``speaker_a``, ``speaker_b``, ``session_N_date_time`` ("1:56 pm on 8 May, 2023") and
``session_N``, the turns (``speaker``, ``dia_id`` "D1:3", ``text``, an optional
``blip_caption`` for a shared photo); ``qa``: ``question``, ``evidence`` (the turns'
``dia_id``s), ``category``; and ``observation``: per ``session_N_observation``, per
speaker, the facts a model derived as ``[text, dia_id or ids]``. A per-conversation file
holds the same keys at its top level (its name stands for ``sample_id``).

It becomes the conversational set's shape and is measured by the same tables
(bench/conversation_tables.py, no sweeps): every turn an episode ("Speaker: text", at its
session's time) in one namespace per conversation; episodes only; then the observations
asserted as facts citing their turns, at the session's time, with the speaker as entity
and a property of their own (none supersedes or contradicts another);
then the profiles stage. A fact hit counts its source turns as found; limit 10. With
``--facts-stage``, also the facts stage in a fresh store against a scripted capable model
that answers with the observations (bench/facts_conversations.py), then the profiles stage.

Categories 1 multi-hop, 2 temporal, 3 inferential (open-domain), 4 single-hop;
5 (adversarial: the answer is in no turn) and questions citing no existing turn are
left out. ``list`` = questions whose evidence spans two sessions or more. Even-numbered
conversations are the dev split, odd ones test; the last table is every question.
"""

from __future__ import annotations

import argparse
import json
import re
import zipfile
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import common, conversation_quality, conversation_tables

KIND_OF_CATEGORY = {1: "multi_hop", 2: "temporal", 3: "inferential", 4: "single_hop"}
_TURN_ID = re.compile(r"D(\d+):(\d+)")
_SESSION = re.compile(r"session_(\d+)")


def session_time(text: str) -> datetime:
    """ "1:56 pm on 8 May, 2023" as a UTC timestamp."""
    try:
        return datetime.strptime(" ".join(text.split()), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError as exc:
        raise SystemExit(f"a session time this bench cannot read: {text!r} (expected '1:56 pm on 8 May, 2023')") from exc


def turn_ids(value: Any) -> list[str]:
    """The ``dia_id``s in an evidence value: a string, a list of them, or ids run together
    ("D8:6; D9:17"), normalised ("D1:03" -> "D1:3")."""
    parts = value if isinstance(value, list) else [value]
    return [f"D{int(s)}:{int(t)}" for part in parts for s, t in _TURN_ID.findall(str(part))]


def read_conversations(path: Path) -> list[dict[str, Any]]:
    """The conversations at ``path`` as the list file holds them: the list file itself, or
    a zip or directory of per-conversation files (in the order of their numbers)."""

    def numbered(names: list[str]) -> list[str]:
        return sorted((n for n in names if n.endswith(".json")),
                      key=lambda n: (int(m[0]) if (m := re.search(r"\d+", Path(n).stem)) else 0, n))

    try:
        if path.is_dir():
            files = [(Path(n).stem, (path / n).read_text(encoding="utf-8"))
                     for n in numbered([p.name for p in path.iterdir()])]
        elif zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                files = [(Path(n).stem, archive.read(n).decode("utf-8")) for n in numbered(archive.namelist())]
        else:
            return json.loads(path.read_text(encoding="utf-8"))
        return [_as_listed(stem, json.loads(text)) for stem, text in files]
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise SystemExit(f"{path}: {exc}") from exc


def _as_listed(stem: str, flat: dict[str, Any]) -> dict[str, Any]:
    """A per-conversation file (every key at the top) in the list file's shape."""
    if "conversation" in flat:
        return flat
    chat = {k: v for k, v in flat.items()
            if k in ("speaker_a", "speaker_b") or re.fullmatch(r"session_\d+(_date_time)?", k)}
    observed = {k: v for k, v in flat.items() if re.fullmatch(r"session_\d+_observation", k)}
    return {"sample_id": f"conv-{stem}", "conversation": chat, "qa": flat.get("qa", []), "observation": observed}


def convert(conversations: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The conversational set's turns, questions and facts from LoCoMo-format conversations."""
    data: dict[str, list[dict[str, Any]]] = {"turns": [], "questions": [], "facts": []}
    for index, sample in enumerate(conversations):
        try:
            _convert_one(index, sample, data)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise SystemExit(f"conversation {index} is not in the LoCoMo format: {exc!r}") from exc
    return data


def _convert_one(index: int, sample: dict[str, Any], data: dict[str, list[dict[str, Any]]]) -> None:
    """One conversation's turns, questions and facts appended to ``data``."""
    namespace = f"/external/{sample.get('sample_id', index)}"
    split = "dev" if index % 2 == 0 else "test"
    chat = sample["conversation"]
    when: dict[int, datetime] = {}
    known: set[str] = set()
    for key, turns in chat.items():
        match = _SESSION.fullmatch(key)
        if not match or not isinstance(turns, list):
            continue
        when[int(match[1])] = session_time(chat[f"{key}_date_time"])
        for turn in turns:
            [dia_id] = turn_ids(turn["dia_id"])
            text = turn["text"] + (f" [shares a photo: {turn['blip_caption']}]" if turn.get("blip_caption") else "")
            data["turns"].append({"content": f"{turn['speaker']}: {text}", "dia_id": dia_id, "namespace": namespace,
                                  "occurred_at": when[int(match[1])].isoformat(), "speaker": turn["speaker"]})
            known.add(dia_id)
    for number, qa in enumerate(sample.get("qa", [])):
        evidence = [d for d in dict.fromkeys(turn_ids(qa.get("evidence", []))) if d in known]
        kind = KIND_OF_CATEGORY.get(int(qa.get("category", 0)))
        if kind is None or not evidence:
            continue
        sessions = {_TURN_ID.match(d)[1] for d in evidence}  # type: ignore[index]
        data["questions"].append({"id": f"{namespace}/q{number:04d}", "kind": kind, "namespace": namespace,
                                  "query": qa["question"], "evidence": evidence, "split": split,
                                  "shape": "list" if len(sessions) > 1 else "single",
                                  "answer": str(qa.get("answer", ""))})
    for key, by_speaker in sample.get("observation", {}).items():
        session = int(_SESSION.match(key)[1])  # type: ignore[index]
        for speaker, observed in by_speaker.items():
            for number, (text, cited) in enumerate(observed):
                evidence = [d for d in dict.fromkeys(turn_ids(cited)) if d in known]
                if evidence and text.strip():
                    data["facts"].append({"content": text, "entity": speaker, "value": None,
                                          "property": f"session {session} observation {number}",
                                          "evidence": evidence, "key": f"{namespace}/s{session}/{speaker}/{number}",
                                          "namespace": namespace, "session": session, "split": split,
                                          "subject": speaker, "valid_from": when[session].isoformat()})


@common.writes_results
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="the benchmark: locomo10.json, locomo10.zip or a directory of "
                                                "per-conversation JSON files")
    parser.add_argument("--facts-stage", action="store_true",
                        help="also the facts stage, a scripted model answering with the observations")
    args = parser.parse_args(argv)
    conversations = read_conversations(args.path)
    data = convert(conversations)
    common.log(f"{len(conversations)} conversations: {len(data['turns']):,} turns, {len(data['questions']):,} "
               f"questions, {len(data['facts']):,} facts")
    with common.fresh_store("minilm") as store:
        results = conversation_tables.conversation_tables(store, data, sweep=False)
    rows = []
    for (condition, system), per in results.items():
        joined: dict[str, list[dict[str, float]]] = defaultdict(list)
        for split in per.values():
            for kind, scores in split.items():
                joined[kind] += scores
        m = conversation_quality.overall(joined)
        rows.append([condition, system, int(m["n"]), m["r@5"], m["r@10"], m["mrr"],
                     *(conversation_quality.aggregate(joined[k]).get("r@10", "") for k in conversation_tables.KINDS)])
    common.print_table(f"Every question ({args.path.name}), recall@k of evidence turns, limit 10",
                       ["condition", "system", "n", "r@5", "r@10", "MRR", *conversation_tables.KINDS], rows)
    if args.facts_stage:
        from bench import facts_conversations

        staged = facts_conversations.run(data=data)
        facts_conversations.report(staged)
        rows = []
        for name in ("episodes only", "episodes + stage facts", "+ profiles"):
            parts = [staged["recall"][name][f"{split}/all"] for split in ("dev", "test")]
            n = sum(p["n"] for p in parts)
            rows.append([name, n, *(sum(p[m] * p["n"] for p in parts) / n for m in ("r@5", "r@10", "mrr"))])
        common.print_table("Every question, the facts stage's own facts", ["condition", "n", "r@5", "r@10", "MRR"],
                           rows)


if __name__ == "__main__":
    main()
