"""The facts stage on the conversational set, against a scripted capable model.

The default run of ``python -m bench.consolidation_quality`` (no endpoint given):

    python -m bench.consolidation_quality                      # all 12 conversations
    python -m bench.consolidation_quality --conversations 4    # the first 4 (2 dev, 2 test)

Every turn of ``bench/data/conversations.py`` is imported as one episode (content
``"Name: text"``, ``occurred_at`` = session date, ``metadata.dia_id``), then the facts
stage runs per conversation through the real ``openai`` client against a local
OpenAI-compatible server (``testkit/openai_server.py``). The server answers as a
capable model would, from the planted truth (``conversations_facts.jsonl``, facts written
per session, each citing its evidence turns):

* for a conversation window, every planted fact whose LAST evidence turn is among the
  window's new turns, citing the evidence turns the window shows (earlier turns included);
* for an embedding cluster of the stage before windows ("Cluster N:", one fact per
  cluster), the first planted fact not yet given with an evidence turn in the cluster;
* the contradiction check: "compatible"; entity checks: the test model's name rule.

Reported: planted facts answered, facts created / reinforced / refused, the share of
episodes dead-lettered (and why), model calls per episode (facts prompts and all calls),
and recall@5/@10 and MRR on the questions (dev and test, by kind) with the stage's own
facts: a fact hit counts its source turns as found, so ten results can show more evidence
than ten turns. The same questions are asked before the stage runs (episodes only), in
the same run, as the baseline, and again after the profiles stage gathered the stage's
facts per speaker and aspect (as the pipeline runs it next).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from typing import Any

from bench import common, conversation_quality
from bench.data import conversations

LIMIT = 10
KINDS = conversation_quality.KINDS

Key = tuple[str, str]  # (namespace, dia_id)


class PlantedTruth:
    """Facts answers from the planted truth, for the window format and the older cluster format."""

    def __init__(self, facts: list[dict[str, Any]], ids: dict[Key, int]) -> None:
        self.by_last: dict[int, list[tuple[list[int], dict[str, Any]]]] = defaultdict(list)
        self.by_turn: dict[int, list[tuple[list[int], dict[str, Any]]]] = defaultdict(list)
        for fact in facts:
            evidence = [ids[(fact["namespace"], d)] for d in fact["evidence"]]
            self.by_last[max(evidence)].append((evidence, fact))
            for turn in evidence:
                self.by_turn[turn].append((evidence, fact))
        self.given: set[str] = set()

    @staticmethod
    def _draft(number: int, sources: list[int], fact: dict[str, Any]) -> dict[str, Any]:
        return {"cluster": number, "sources": sources, "entity": fact["entity"], "property": fact["property"],
                "value": fact["value"], "summary": fact["content"], "valid_from": None}

    def __call__(self, user: str) -> dict[str, Any]:
        from testkit.scripted_model import facts_blocks

        out = []
        for block in facts_blocks(user):
            shown = {i for i, _ in block.context + block.new}
            if not block.header:  # the stage before windows: one fact per cluster, no sources asked for
                fact = next((f for i, _ in block.new for _, f in self.by_turn.get(i, []) if f["key"] not in self.given),
                            None)
                if fact is None:
                    out.append({"cluster": block.number, "summary": ""})
                    continue
                self.given.add(fact["key"])
                out.append(self._draft(block.number, [i for i, _ in block.new], fact))
                continue
            for turn, _ in block.new:
                for evidence, fact in self.by_last.get(turn, []):
                    self.given.add(fact["key"])
                    out.append(self._draft(block.number, [i for i in evidence if i in shown], fact))
            if not any(d["cluster"] == block.number for d in out):
                out.append({"cluster": block.number, "summary": ""})
        return {"facts": out}


def ranked_evidence(store: Any, question: dict[str, Any], keys: dict[int, Key],
                    sources: dict[int, list[int]]) -> list[set[Key]]:
    """The evidence each of the top results shows: an episode its turn, a fact its source turns."""
    from stash_pipeline import recall

    hits = recall.recall(store, question["query"], [question["namespace"]], limit=LIMIT)
    out = []
    for hit in hits:
        ids = [hit.id] if hit.kind == "episode" else sources.get(hit.id, []) if hit.kind == "fact" else []
        out.append({keys[i] for i in ids if i in keys})
    return out


def score(results: list[set[Key]], evidence: set[Key]) -> dict[str, float]:
    found = {k: set().union(*results[:k]) & evidence for k in (5, 10)}
    first = next((n for n, shown in enumerate(results[:LIMIT]) if shown & evidence), None)
    return {"r@5": len(found[5]) / len(evidence), "r@10": len(found[10]) / len(evidence),
            "mrr": 0.0 if first is None else 1.0 / (first + 1)}


def evaluate(store: Any, questions: list[dict[str, Any]], keys: dict[int, Key]) -> dict[str, list[dict[str, float]]]:
    """Per (split, kind) the per-question scores, with each fact hit counting its sources."""
    with store.db.connection() as conn:
        rows = conn.execute(common.sql("bench_facts_sources")).fetchall()
        conn.commit()
    sources = {int(r["id"]): [int(i) for i in r["episodes"]] for r in rows}
    out: dict[str, list[dict[str, float]]] = defaultdict(list)
    for q in questions:
        scores = score(ranked_evidence(store, q, keys, sources), {(q["namespace"], d) for d in q["evidence"]})
        out[f"{q['split']}/{q['kind']}"].append(scores)
        out[f"{q['split']}/all"].append(scores)
    return out


def reason(error: str) -> str:
    """A dead letter's reason, without the fact it is about: 'grounding: names', 'cites none' ..."""
    if error.startswith("grounding"):
        kinds = [k for k, word in (("names", " names "), ("numbers", " the number "), ("wording", " absent from "),
                                   ("verbatim", "copies"), ("verbatim", "trivial additions")) if word in error]
        return "grounding: " + "+".join(dict.fromkeys(kinds))
    if "cites none" in error:
        return "cites none of its items"
    return error.split(":")[0]


def _mean(rows: list[dict[str, float]], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows) if rows else float("nan")


def run(conversations_n: int | None = None, embedder: str = "minilm",
        data: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """Import, ask (episodes only), consolidate with the planted-truth model, ask again
    (``data``: another set of the same shape, default the conversational set)."""
    from stash_pipeline.consolidation import runner as consolidation
    from stash_pipeline.consolidation.reasoner import reset_mode_cache
    from testkit.openai_server import ScriptedOpenAI
    from testkit.scripted_model import ScriptedModel

    data = data or conversations.load()
    chosen = sorted({t["namespace"] for t in data["turns"]})[:conversations_n]
    data = {name: [r for r in rows if r["namespace"] in chosen] for name, rows in data.items()}
    model = ScriptedModel(contradiction_class="compatible", contradiction_confidence=0.9)
    reset_mode_cache()
    started = time.monotonic()
    with ScriptedOpenAI(model) as server, common.fresh_store(
        embedder, openai_base_url=server.base_url, reasoner_model="planted-truth", reasoner_backoff_s=0.01,
        reasoner_timeout_s=60.0,
    ) as store:
        common.log(f"importing {len(data['turns'])} turns of {len(chosen)} conversations")
        keys = conversation_quality.load(store, data)
        ids = {key: i for i, key in keys.items()}
        planted = [f["content"] for f in data["facts"]]
        common.prime_embedding_cache(store, planted, common.dataset_vectors(planted))
        common.log("episodes only: asking the questions")
        before = evaluate(store, data["questions"], keys)
        model.facts_script = truth = PlantedTruth(data["facts"], ids)
        common.log("facts stage")
        totals: Counter[str] = Counter()
        for namespace in chosen:
            report = consolidation.run_stage(store, namespace, "facts")
            if report.status not in ("ok", "idle"):
                raise SystemExit(f"{namespace}: facts stage {report.status}: {report.message}")
            totals.update({"rows_in": report.rows_in, "model_calls": report.model_calls,
                           "items_failed": report.items_failed, "tokens": report.tokens_in + report.tokens_out})
            totals.update({k: v for k, v in report.details.items() if isinstance(v, int)})
        stage_seconds = time.monotonic() - started
        with store.db.connection() as conn:
            letters = conn.execute(common.sql("bench_facts_dead_letters")).fetchall()
            conn.commit()
        common.log("with the stage's facts: asking the questions")
        after = evaluate(store, data["questions"], keys)
        common.log("profiles stage")
        for namespace in chosen:
            consolidation.run_stage(store, namespace, "profiles")
        common.log("with the stage's facts and their profiles: asking the questions")
        profiled = evaluate(store, data["questions"], keys)
    reasons = Counter(reason(r["last_error"]) for r in letters)
    examples = [r["last_error"][:160] for r in letters[:5]]
    episodes_n = len(data["turns"])
    return {
        "conversations": len(chosen), "episodes": episodes_n, "questions": len(data["questions"]),
        "planted_facts": len(data["facts"]), "planted_answered": len(truth.given),
        "facts_created": totals["facts_created"], "facts_reinforced": totals["facts_reinforced"],
        "facts_refused": totals["facts_refused"], "windows": totals["windows"], "clusters": totals["clusters"],
        "dead_lettered_episodes": len({r["item_id"] for r in letters}),
        "dead_letter_rate": len({r["item_id"] for r in letters}) / episodes_n,
        "dead_letter_reasons": dict(reasons), "dead_letter_examples": examples,
        "facts_calls_per_episode": model.calls["facts"] / episodes_n,
        "calls_per_episode": totals["model_calls"] / episodes_n,
        "tokens_per_episode": totals["tokens"] / episodes_n,
        "seconds": round(stage_seconds, 1),
        "recall": {name: {group: {m: _mean(rows, m) for m in ("r@5", "r@10", "mrr")} | {"n": len(rows)}
                          for group, rows in result.items()}
                   for name, result in (("episodes only", before), ("episodes + stage facts", after),
                                        ("+ profiles", profiled))},
    }


def report(result: dict[str, Any]) -> str:
    r = result
    lines = [
        f"facts stage on the conversational set — {r['conversations']} conversations, {r['episodes']} turns, "
        f"scripted model answering from {r['planted_facts']} planted facts",
        f"windows: {r['windows']}, clusters: {r['clusters']}; planted facts answered: {r['planted_answered']}",
        f"facts kept: {r['facts_created']} created + {r['facts_reinforced']} reinforced; refused: {r['facts_refused']}",
        f"dead-lettered episodes: {r['dead_lettered_episodes']} of {r['episodes']} ({100 * r['dead_letter_rate']:.1f}%)"
        f" — {', '.join(f'{k}: {v}' for k, v in sorted(r['dead_letter_reasons'].items())) or 'none'}",
        f"model calls per episode: {r['facts_calls_per_episode']:.3f} facts prompts, {r['calls_per_episode']:.3f} in all;"
        f" tokens per episode: {r['tokens_per_episode']:.0f}; stage + import: {r['seconds']} s",
    ]
    lines += [f"  e.g. {e}" for e in r["dead_letter_examples"][:3]]
    print("\n".join(lines) + "\n")
    rows = []
    for group in [f"{split}/{kind}" for split in ("dev", "test") for kind in ("all", *KINDS)]:
        cells: list[Any] = [group]
        for name in ("episodes only", "episodes + stage facts", "+ profiles"):
            m = r["recall"][name].get(group)
            cells += [m["r@5"], m["r@10"], m["mrr"]] if m else ["", "", ""]
        cells.insert(1, r["recall"]["episodes only"].get(group, {}).get("n", 0))
        rows.append(cells)
    table = common.print_table("Recall with the stage's own facts (a fact hit counts its source turns)",
                               ["split/kind", "n", "episodes r@5", "r@10", "MRR", "+ facts r@5", "r@10", "MRR",
                                "+ profiles r@5", "r@10", "MRR"], rows)
    return "\n".join(lines) + "\n\n" + table
