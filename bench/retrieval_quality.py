"""Benchmark 5 — retrieval quality on the two committed labelled sets.

    python -m bench.retrieval_quality                      # both sets, dev and test
    python -m bench.retrieval_quality --large              # + 10,000 distractor episodes
    python -m bench.retrieval_quality --distractors N      # + N distractor episodes

1. The conversational set (bench/data/conversations.py: 12 two-person chats, one episode
   per turn, 756 questions of four kinds, evidence = turn ids). Systems: Okapi BM25 and a
   min-max cosine + BM25 mix in Python over the same texts, vector-only, the previous
   recall query and the shipped recall (bench/conversation_quality.py). The ranking
   constants are swept on the DEV split (a small grid of w_vector x neighbour_weight);
   both splits are reported, per kind, with the shipped constants and the dev-best ones.
2. The agent-memory set (bench/data: 2,300 episodes over 7 namespaces, 73 asserted facts
   of which 15 are retired by supersede, 325 questions; plus, with --large,
   ``generate.distractors``). Systems: ``recall`` (hybrid), ``previous`` (the pre-BM25
   recall query), ``vector``, ``text`` and ``facts_first`` (the reference's algorithm:
   facts take the slots first, raw cosine, no validity filter). TEST split reported, with
   "stale wins" on ``updated`` questions (a superseded or corrected item ranks above the
   current answer) on DEV and TEST.

Metrics: recall@5, recall@10 (share of a question's relevant items in the top k), MRR
(first relevant within the top 10).
"""

from __future__ import annotations

import argparse
import itertools
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from bench import common, conversation_quality, entity_quality
from bench.data import conversations, entity_graph, generate

K_VALUES = (5, 10)
LIMIT = 10
SYSTEMS = ("recall", "recall_no_entities", "previous", "vector", "text", "facts_first")
TYPES = ("paraphrase", "identifier", "temporal", "updated", "distractor")
GRID_W_VECTOR = (0.3, 0.4, 0.5)
GRID_NEIGHBOUR = (0.0, 0.2, 0.35, 0.5)

Ref = tuple[str, int]


# --- loading ------------------------------------------------------------------------------


def load_dataset(
    store: Any, data: dict[str, list[dict[str, Any]]], extra: list[dict[str, Any]] | None = None
) -> dict[str, Ref]:
    """Insert episodes (remember_batch) and facts (assert_fact, supersede); key -> (kind, id)."""
    from stash_pipeline.memory import episodes, facts, namespaces

    all_episodes = data["episodes"] + (extra or [])
    texts = [e["content"] for e in all_episodes] + [f["content"] for f in data["facts"]]
    texts += [q["query"] for q in data["questions"]]
    common.prime_embedding_cache(store, texts, common.dataset_vectors(texts))

    for slug in sorted({e["namespace"] for e in all_episodes} | {f["namespace"] for f in data["facts"]}):
        namespaces.create(store, slug)
    refs: dict[str, Ref] = {}
    by_namespace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for episode in all_episodes:
        by_namespace[episode["namespace"]].append(episode)
    for slug, items in by_namespace.items():
        for start in range(0, len(items), 500):
            chunk = items[start : start + 500]
            results = episodes.remember_batch(
                store,
                slug,
                [{"content": e["content"], "occurred_at": e["occurred_at"], "kind": e["kind"]} for e in chunk],
            )
            for episode, result in zip(chunk, results, strict=True):
                refs[episode["key"]] = ("episode", int(result["id"]))
    for fact in data["facts"]:  # file order: a later fact on the same entity+property supersedes
        result = facts.assert_fact(
            store,
            fact["namespace"],
            fact["content"],
            entity=fact["entity"],
            property=fact["property"],
            value=fact["value"],
            source_episode_ids=[refs[k][1] for k in fact["sources"]],
            supersede=True,
        )
        refs[fact["key"]] = ("fact", int(result["fact"].id))
    return refs


# --- metrics ------------------------------------------------------------------------------


def score_question(ranked: Sequence[Ref], relevant: set[Ref], stale: set[Ref]) -> dict[str, float]:
    top = list(ranked[:LIMIT])
    out = {f"r@{k}": len(relevant & set(top[:k])) / len(relevant) for k in K_VALUES}
    first = next((i for i, ref in enumerate(top) if ref in relevant), None)
    out["mrr"] = 0.0 if first is None else 1.0 / (first + 1)
    if stale:
        first_stale = next((i for i, ref in enumerate(top) if ref in stale), None)
        out["stale_wins"] = float(first_stale is not None and (first is None or first_stale < first))
    return out


def aggregate(rows: list[dict[str, float]]) -> dict[str, float]:
    if not rows:
        return {}
    keys = {k for r in rows for k in r}
    return {k: sum(r[k] for r in rows if k in r) / sum(1 for r in rows if k in r) for k in keys} | {"n": len(rows)}


# --- systems ------------------------------------------------------------------------------


def run_system(store: Any, system: str, question: dict[str, Any], limit: int = LIMIT, config: Any = None) -> list[Any]:
    """One question's hits from one system; ``config`` a ``RecallConfig`` (default: as shipped)."""
    from stash_pipeline.memory import recall
    from stash_pipeline.memory.recall_config import DEFAULT

    config = config or DEFAULT
    if system == "facts_first":
        return recall.facts_first_recall(store, question["query"], question["namespaces"], limit=limit)
    if system == "previous":
        return previous_hits(store, question["query"], question["namespaces"])
    if system == "recall_no_entities":  # the same recall with its entity leg off
        return recall.recall(store, question["query"], question["namespaces"], limit=limit,
                             config=config.replace(entity_leg=False))
    if system == "recall":
        system = "hybrid"
    return recall.recall(store, question["query"], question["namespaces"], limit=limit, mode=system, config=config)


def evaluate(
    store: Any, questions: list[dict[str, Any]], refs: dict[str, Ref], system: str, config: Any = None
) -> dict[str, list[dict[str, float]]]:
    """Per-type lists of per-question scores for one system."""
    out: dict[str, list[dict[str, float]]] = defaultdict(list)
    for q in questions:
        hits = run_system(store, system, q, config=config)
        ranked = [(h.kind, h.id) for h in hits]
        scores = score_question(ranked, {refs[k] for k in q["relevant"]}, {refs[k] for k in q["stale"]})
        out[q["type"]].append(scores)
    return out


def overall(per_type: dict[str, list[dict[str, float]]]) -> dict[str, float]:
    return aggregate([r for rows in per_type.values() for r in rows])


# --- report -------------------------------------------------------------------------------


def metric_row(name: str, m: dict[str, float], baseline: dict[str, float] | None = None) -> list[Any]:
    row = [name, int(m["n"]), m["r@5"], m["r@10"], m["mrr"]]
    row.append(common.ratio(m["r@10"], baseline["r@10"]) if baseline else "1.00x")
    return row


def previous_hits(store: Any, query: str, namespaces: Any) -> list[Any]:
    """The pre-BM25 recall query's hits as (kind, id) records."""
    from types import SimpleNamespace

    rows = conversation_quality.previous_rows(store, query, namespaces)
    return [SimpleNamespace(kind=r["kind"], id=int(r["id"])) for r in rows]


def conversation_tables(store: Any, data: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Load the conversational set, sweep on dev, report dev and test per kind."""
    from stash_pipeline.memory.recall_config import DEFAULT, VARIANTS

    cq = conversation_quality
    keys = cq.load(store, data)
    common.log(f"conversational set: {entity_quality.load_speakers(store, data['turns'])} speakers as entities")
    baselines = cq.PythonBaselines(store, data, keys)
    dev = [q for q in data["questions"] if q["split"] == "dev"]
    test = [q for q in data["questions"] if q["split"] == "test"]
    shipped = {"w_vector": DEFAULT.w_vector, "neighbour_weight": DEFAULT.neighbour_weight}
    sweep = []
    for w_vector, neighbour in itertools.product(GRID_W_VECTOR, GRID_NEIGHBOUR):
        point = {"w_vector": w_vector, "neighbour_weight": neighbour}
        sweep.append((point, overall(cq.evaluate(store, dev, keys, baselines, "recall", DEFAULT.replace(**point)))))
    sweep.sort(key=lambda item: (-item[1]["r@10"], -item[1]["mrr"]))
    common.print_table("Conversational set, DEV split: ranking constants (real query)",
                       ["setting", "recall@5", "recall@10", "MRR"],
                       [[", ".join(f"{k}={v}" for k, v in p.items()), m["r@5"], m["r@10"], m["mrr"]]
                        for p, m in sweep])
    best = sweep[0][0]
    print(f"best on dev: {best}; shipped: {shipped}\n")

    results: dict[str, dict[str, Any]] = {}
    for split, questions in (("dev", dev), ("test", test)):
        per = {s: cq.evaluate(store, questions, keys, baselines, s) for s in cq.SYSTEMS}
        per["recall_no_entities"] = cq.evaluate(store, questions, keys, baselines, "recall", VARIANTS["no_entity_leg"])
        if best != shipped:
            per["recall_dev_best"] = cq.evaluate(store, questions, keys, baselines, "recall", DEFAULT.replace(**best))
        results[split] = per
    systems = list(results["test"])
    rows = []
    for s in systems:
        row: list[Any] = [s]
        for split in ("dev", "test"):
            m = overall(results[split][s])
            row += [m["r@5"], m["r@10"], m["mrr"]]
        rows.append(row)
    common.print_table(f"Conversational set ({len(data['turns']):,} turns), recall@k of evidence turns, limit 10",
                       ["system", "dev r@5", "dev r@10", "dev MRR", "test r@5", "test r@10", "test MRR"], rows)
    rows = []
    for kind in conversation_quality.KINDS:
        for s in systems:
            dev_m, test_m = aggregate(results["dev"][s][kind]), aggregate(results["test"][s][kind])
            rows.append([kind, s, int(dev_m["n"]), dev_m["r@10"], int(test_m["n"]), test_m["r@10"], test_m["mrr"]])
    common.print_table("Conversational set per kind (recall@10)",
                       ["kind", "system", "dev n", "dev r@10", "test n", "test r@10", "test MRR"], rows)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--distractors", type=int, default=0, help="extra episodes that answer no question")
    parser.add_argument("--large", action="store_true", help="10,000 distractor episodes")
    parser.add_argument("--skip-conversations", action="store_true", help="only the agent-memory set")
    args = parser.parse_args(argv)
    extra = generate.distractors(10_000 if args.large else args.distractors)

    data = generate.load()
    test = [q for q in data["questions"] if q["split"] == "test"]
    with common.fresh_store("minilm") as store:
        if not args.skip_conversations:
            common.log("conversational set: loading")
            conversation_tables(store, conversations.load())
        common.log(f"agent-memory set: {len(data['episodes'])} episodes + {len(extra)} distractors")
        refs = load_dataset(store, data, extra)
        entities = entity_graph.load()
        common.log(f"entity set: {len(entities['graph'])} records, {len(entities['questions'])} questions")
        refs |= entity_quality.load(store, entities["graph"])
        entity_quality.sweep(store, [q for q in entities["questions"] if q["split"] == "dev"],
                             [q for q in data["questions"] if q["split"] == "dev"], refs, evaluate, overall)
        entity_quality.report(store, entities["questions"], refs, evaluate, aggregate)
        per_system = {s: evaluate(store, test, refs, s) for s in SYSTEMS}
        # the updated questions of the DEV split too: the supersession constants are tuned there
        dev_updated = [q for q in data["questions"] if q["split"] == "dev" and q["type"] == "updated"]
        per_system_dev = {s: evaluate(store, dev_updated, refs, s) for s in SYSTEMS}
    systems = list(SYSTEMS)
    base = overall(per_system["vector"])
    common.print_table(
        f"Agent-memory set, TEST split (held out), {len(data['episodes']) + len(extra):,} episodes, limit 10 "
        "— ratio = recall@10 / vector-only",
        ["system", "questions", "recall@5", "recall@10", "MRR", "ratio"],
        [metric_row(s, overall(per_system[s]), base) for s in systems],
    )
    rows = []
    for qtype in TYPES:
        for s in systems:
            m = aggregate(per_system[s][qtype])
            rows.append([qtype, s, int(m["n"]), m["r@5"], m["r@10"], m["mrr"]])
    common.print_table("Per question type, TEST split", ["type", "system", "n", "recall@5", "recall@10", "MRR"], rows)
    # the lineage join can only demote an old episode that has facts; half the updated
    # values were stated as facts (and superseded), half only as episodes
    stale_rows = []
    for split, questions, results in (("dev", dev_updated, per_system_dev),
                                      ("test", [q for q in test if q["type"] == "updated"], per_system)):
        with_facts = [i for i, q in enumerate(questions) if any(k.startswith("fact-") for k in q["stale"])]
        without = [i for i in range(len(questions)) if i not in with_facts]

        def stale(system: str, only: list[int], rows_of: dict[str, Any] = results) -> float:
            rows = rows_of[system]["updated"]
            return aggregate([rows[i] for i in only])["stale_wins"]

        stale_rows += [[split, s, stale(s, list(range(len(questions)))), stale(s, with_facts), stale(s, without)]
                       for s in systems]
    common.print_table("Updated values: share of questions where the OLD value outranks the new "
                       "(old value stated as a fact and superseded: 15 per split; episodes only: 15)",
                       ["split", "system", "stale wins (all)", "old value stated as a fact", "episodes only"],
                       stale_rows)

    def draw(ax: Any) -> None:
        width = 0.8 / len(systems)
        for i, s in enumerate(systems):
            values = [aggregate(per_system[s][t])["r@10"] for t in TYPES] + [overall(per_system[s])["r@10"]]
            ax.bar([x + i * width for x in range(len(TYPES) + 1)], values, width, label=s)
        ax.set_xticks([x + (len(systems) - 1) * width / 2 for x in range(len(TYPES) + 1)], [*TYPES, "overall"])
        ax.set_ylabel("recall@10 (test split)")
        ax.set_ylim(0, 1.3)
        ax.legend(fontsize=8, ncol=len(systems), loc="upper center")
        ax.set_title("Retrieval quality by question type (agent-memory set)")

    common.save_plot("retrieval_quality" + ("_large" if extra else ""), draw, size=(10, 4.5))


if __name__ == "__main__":
    main()
