"""Benchmark 5 — retrieval quality on the committed labelled sets.

    python -m bench.retrieval_quality                      # every set, dev and test
    python -m bench.retrieval_quality --skip-sweep         # without the sweeps on dev
    python -m bench.retrieval_quality --large              # + 10,000 distractor episodes
    python -m bench.retrieval_quality --distractors N      # + N distractor episodes
    python -m bench.retrieval_quality --baseline-rev REV   # then the same run from revision REV

1. The conversational set (bench/data/conversations.py: 12 two-person chats, one episode
   per turn, 961 questions of four kinds, evidence = turn ids, 3,095 derived facts each
   citing one turn), in bench/conversation_tables.py: episodes only (Okapi BM25 and a min-max
   cosine + BM25 mix in Python, vector-only, recall), then
   with the derived facts asserted (text-only, vector-only, recall without grouping,
   recall); the ranking constants (w_vector_masked x neighbour_weight, episodes only) and the
   grouping knobs (with the facts) are swept on DEV; both splits reported, per kind.
2. The agent-memory set (bench/data: 2,300 episodes over 7 namespaces, 73 asserted facts
   of which 15 are retired by supersede, 325 questions; plus, with --large,
   ``generate.distractors``). Systems: ``recall`` (hybrid), ``recall_ungrouped`` (each
   hit its own slot), ``recall_no_entities``, ``vector``, ``text`` and ``facts_first``
   (the reference's algorithm, bench/facts_first.py: facts take the slots first, raw
   cosine, no validity filter). TEST split reported, with "stale wins" on ``updated`` questions (a
   superseded or corrected item ranks above the current answer) on DEV and TEST.
3. The entity set (bench/entity_quality.py), in the agent-memory database.

Metrics: recall@5, recall@10 (share of a question's relevant items in the top k), MRR
(first relevant within the top 10). An item counts as found when it is a result or one
of the source episodes a fact result carries (``sources``); on the conversational set a
fact hit counts every source turn it cites.

An older recall (before BM25 ranking: revision ``2e97116^``) is that revision's own run:
``--baseline-src DIR`` / ``--baseline-rev REV`` runs this bench again from the older tree,
same arguments, after this run (its bench on its code, in a subprocess).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from bench import common, conversation_tables, entity_quality, facts_first
from bench.data import conversations, entity_graph, generate

K_VALUES = (5, 10)
LIMIT = 10
SYSTEMS = ("recall", "recall_ungrouped", "recall_no_entities", "vector", "text", "facts_first")
TYPES = ("paraphrase", "identifier", "temporal", "updated", "distractor")

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
                refs[episode["key"]] = ("episode", int(result.id))
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
        refs[fact["key"]] = ("fact", int(result.fact.id))
    return refs


# --- metrics ------------------------------------------------------------------------------


def score_question(ranked: Sequence[set[Ref]], relevant: set[Ref], stale: set[Ref]) -> dict[str, float]:
    """``ranked[i]`` = what result i shows: the hit, the source episodes a fact hit carries and
    a profile's members."""
    top = list(ranked[:LIMIT])
    out = {f"r@{k}": len(relevant & set().union(*top[:k])) / len(relevant) for k in K_VALUES}
    first = next((i for i, refs in enumerate(top) if refs & relevant), None)
    out["mrr"] = 0.0 if first is None else 1.0 / (first + 1)
    if stale:
        first_stale = next((i for i, refs in enumerate(top) if refs & stale), None)
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
    from stash_pipeline import recall
    from stash_pipeline.memory import validate
    from stash_pipeline.recall.config import DEFAULT

    config = config or DEFAULT
    # a question's trees as the recall tool parses them (a list or a comma string)
    paths = validate.slugs(question["namespaces"])
    if system == "facts_first":
        return facts_first.recall(store, question["query"], paths, limit=limit)
    if system == "recall_no_entities":  # the same recall with its entity leg off
        return recall.recall(store, question["query"], paths, limit=limit, config=config.replace(entity_leg=False))
    if system == "recall_ungrouped":  # each hit its own slot (recall/grouping.py off)
        return recall.recall(store, question["query"], paths, limit=limit, config=config.replace(grouping=False))
    if system == "recall":
        system = "hybrid"
    return recall.recall(store, question["query"], paths, limit=limit, mode=system, config=config)


def evaluate(
    store: Any, questions: list[dict[str, Any]], refs: dict[str, Ref], system: str, config: Any = None
) -> dict[str, list[dict[str, float]]]:
    """Per-type lists of per-question scores for one system."""
    out: dict[str, list[dict[str, float]]] = defaultdict(list)
    for q in questions:
        hits = run_system(store, system, q, config=config)
        ranked = [{(h.kind, h.id)} | {("episode", s.id) for s in getattr(h, "sources", None) or ()}
                  | {("fact", i) for i in getattr(h, "member_fact_ids", None) or ()} for h in hits]
        scores = score_question(ranked, {refs[k] for k in q["relevant"]}, {refs[k] for k in q["stale"]})
        out[q["type"]].append(scores)
    return out


def overall(per_type: dict[str, list[dict[str, float]]]) -> dict[str, float]:
    return aggregate([r for rows in per_type.values() for r in rows])


# --- report -------------------------------------------------------------------------------


def with_profiles(store: Any, test: list[dict[str, Any]], entity_questions: list[dict[str, Any]],
                  refs: dict[str, Ref], before: dict[str, list[dict[str, float]]]) -> list[list[Any]]:
    """Recall on the agent-memory TEST questions and the entity set's DEV and TEST questions
    before and after the profiles stage ran in every namespace (a profile hit shows its
    members: their words in its text, their ids in ``member_fact_ids``)."""
    from stash_pipeline.consolidation import runner

    entity = {split: [q for q in entity_questions if q["split"] == split] for split in ("dev", "test")}
    entity_before = {split: evaluate(store, questions, refs, "recall") for split, questions in entity.items()}
    with store.db.connection() as conn:
        slugs = [r["slug"] for r in conn.execute("SELECT slug FROM namespaces ORDER BY slug").fetchall()]
        conn.commit()
    written = sum(runner.run_stage(store, slug, "profiles").details.get("profiles_written", 0) for slug in slugs)
    common.log(f"profiles stage: {written} profiles in {len(slugs)} namespaces")
    rows = []
    for name, questions, old in (("agent memory, test", test, before),
                                 *((f"entity, {split}", entity[split], entity_before[split]) for split in entity)):
        b, a = overall(old), overall(evaluate(store, questions, refs, "recall"))
        rows.append([name, len(questions), b["r@5"], b["r@10"], b["mrr"], a["r@5"], a["r@10"], a["mrr"]])
    return rows


def metric_row(name: str, m: dict[str, float], baseline: dict[str, float] | None = None) -> list[Any]:
    row = [name, int(m["n"]), m["r@5"], m["r@10"], m["mrr"]]
    row.append(common.ratio(m["r@10"], baseline["r@10"]) if baseline else "1.00x")
    return row


@common.writes_results
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--distractors", type=int, default=0, help="extra episodes that answer no question")
    parser.add_argument("--large", action="store_true", help="10,000 distractor episodes")
    parser.add_argument("--skip-conversations", action="store_true", help="only the agent-memory set")
    parser.add_argument("--skip-sweep", action="store_true", help="no sweeps on dev (ranking constants, grouping knobs)")
    parser.add_argument("--only-conversations", action="store_true", help="not the agent-memory and entity sets")
    common.add_baseline_arguments(parser, common.RERUN)
    args = parser.parse_args(argv)
    common.measure_then_baseline(args, argv, "bench.retrieval_quality", lambda: measure(args))


def measure(args: argparse.Namespace) -> None:
    """The run: every set's tables and the plot."""
    extra = generate.distractors(10_000 if args.large else args.distractors)

    data = generate.load()
    test = [q for q in data["questions"] if q["split"] == "test"]
    with common.fresh_store("minilm") as store:
        if not args.skip_conversations:
            common.log("conversational set: loading")
            conversation_tables.conversation_tables(store, conversations.load(), sweep=not args.skip_sweep)
        if args.only_conversations:
            return
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
        profiled_rows = with_profiles(store, test, entities["questions"], refs, per_system["recall"])
    common.print_table("The profiles stage run in every namespace (as the pipeline runs it after the facts), "
                       "recall as shipped", ["set, split", "questions", "r@5 before", "r@10 before", "MRR before",
                                                   "r@5 with profiles", "r@10", "MRR"], profiled_rows)
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
