"""Benchmark 5 — retrieval quality on the committed labelled set (bench/data).

    python -m bench.retrieval_quality                      # default: tune on dev, report on test
    python -m bench.retrieval_quality --large              # + 10,000 distractor episodes
    python -m bench.retrieval_quality --distractors N      # + N distractor episodes

Loads bench/data (2,300 episodes over 7 namespaces, 73 asserted facts of which 15 are
retired by supersede, 325 questions; plus, with --large, ``generate.distractors`` —
episodes in the same templates and namespaces that answer no question) into a fresh database with the MiniLM embedder, then
asks every question of four systems, limit 10:

* ``hybrid``      — ours, ``recall(mode="hybrid")``: HNSW + full text, weighted RRF;
* ``vector``      — ``recall(mode="vector")``: cosine only, facts and episodes together;
* ``text``        — ``recall(mode="text")``: Postgres full text only;
* ``facts_first`` — ``facts_first_recall``: the reference's algorithm (facts take the
  slots first, raw cosine, no validity filter).

Also reported: ``hybrid_tuned`` / ``text_tuned`` (the real queries with the dev-chosen
constants) and ``normalised_sim`` (the best normalised-score combination on dev, fused
in Python from the same candidate lists — recall.py implements RRF only).

Metrics: recall@5, recall@10 (share of a question's relevant keys in the top k), MRR (first
relevant within the top 10), and for ``updated`` questions "stale wins" (a superseded or
corrected item ranks above the current answer).

Tuning: the fusion is tuned on the DEV split only. For each dev question the vector and
full-text candidate lists are fetched once (as the hybrid query builds them), and a grid of
RRF k, text weight and text-match mode — plus a min-max normalised score combination — is
fused in Python. The best RRF setting is then applied to ``stash_pipeline.memory.recall``'s
module constants and the held-out TEST split is answered by the real hybrid query, next to
the shipped defaults.
"""

from __future__ import annotations

import argparse
import itertools
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from bench import common
from bench.data import generate

K_VALUES = (5, 10)
LIMIT = 10
SYSTEMS = ("hybrid", "vector", "text", "facts_first")
TYPES = ("paraphrase", "identifier", "temporal", "updated", "distractor")
GRID_RRF_K = (5, 10, 20, 40, 60, 100)
GRID_W_TEXT = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
GRID_TEXT_MATCH = ("any", "all")
GRID_W_TEXT_PARTIAL = (0.25, 0.5, 0.75, 1.0)
GRID_ALPHA = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
CANDIDATES = 30  # the hybrid query's per-list candidate count at limit 10

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


def run_system(store: Any, system: str, question: dict[str, Any], limit: int = LIMIT) -> list[Any]:
    from stash_pipeline.memory import recall

    if system == "facts_first":
        return recall.facts_first_recall(store, question["query"], question["namespaces"], limit=limit)
    return recall.recall(store, question["query"], question["namespaces"], limit=limit, mode=system)


def evaluate(
    store: Any, questions: list[dict[str, Any]], refs: dict[str, Ref], system: str
) -> dict[str, list[dict[str, float]]]:
    """Per-type lists of per-question scores for one system."""
    out: dict[str, list[dict[str, float]]] = defaultdict(list)
    for q in questions:
        hits = run_system(store, system, q)
        ranked = [(h.kind, h.id) for h in hits]
        scores = score_question(ranked, {refs[k] for k in q["relevant"]}, {refs[k] for k in q["stale"]})
        out[q["type"]].append(scores)
    return out


def overall(per_type: dict[str, list[dict[str, float]]]) -> dict[str, float]:
    return aggregate([r for rows in per_type.values() for r in rows])


# --- fusion tuning (dev only) -------------------------------------------------------------


def candidate_lists(store: Any, questions: list[dict[str, Any]]) -> dict[str, dict[str, list[tuple[Ref, float]]]]:
    """Per question: the vector list and the text lists ('any' and 'all') the hybrid fuses."""
    from stash_pipeline.memory import recall

    default_match = recall.TEXT_MATCH
    lists: dict[str, dict[str, list[tuple[Ref, float]]]] = {}
    try:
        for q in questions:
            entry: dict[str, list[tuple[Ref, float]]] = {}
            vec = recall.recall(store, q["query"], q["namespaces"], limit=2 * CANDIDATES, mode="vector")
            per_kind: dict[str, int] = defaultdict(int)
            entry["vector"] = []
            for hit in vec:  # the hybrid takes the top CANDIDATES of each kind, then ranks them together
                if per_kind[hit.kind] < CANDIDATES:
                    per_kind[hit.kind] += 1
                    entry["vector"].append(((hit.kind, hit.id), float(hit.score_parts["vector"] or 0.0)))
            for match in GRID_TEXT_MATCH:
                recall.TEXT_MATCH = match
                txt = recall.recall(store, q["query"], q["namespaces"], limit=2 * CANDIDATES, mode="text")
                per_kind = defaultdict(int)
                entry[f"text_{match}"] = []
                for hit in txt:
                    if per_kind[hit.kind] < CANDIDATES:
                        per_kind[hit.kind] += 1
                        entry[f"text_{match}"].append(((hit.kind, hit.id), float(hit.score_parts["text"] or 0.0)))
            lists[q["id"]] = entry
    finally:
        recall.TEXT_MATCH = default_match
    return lists


def fuse_rrf(vec: list[tuple[Ref, float]], txt: list[tuple[Ref, float]], k: float, w_text: float) -> list[Ref]:
    scores: dict[Ref, float] = defaultdict(float)
    distance: dict[Ref, float] = {}
    for rank, (ref, sim) in enumerate(vec, start=1):
        scores[ref] += 1.0 / (k + rank)
        distance[ref] = 1 - sim
    for rank, (ref, _) in enumerate(txt, start=1):
        scores[ref] += w_text / (k + rank)
    return sorted(scores, key=lambda r: (-scores[r], distance.get(r, 2.0), r[0], -r[1]))


def fuse_normalised(vec: list[tuple[Ref, float]], txt: list[tuple[Ref, float]], alpha: float) -> list[Ref]:
    """alpha * minmax(cosine) + (1 - alpha) * minmax(ts_rank_cd); a missing part counts 0."""

    def minmax(items: list[tuple[Ref, float]]) -> dict[Ref, float]:
        if not items:
            return {}
        lo, hi = min(s for _, s in items), max(s for _, s in items)
        return {ref: (s - lo) / (hi - lo) if hi > lo else 1.0 for ref, s in items}

    v, t = minmax(vec), minmax(txt)
    refs = set(v) | set(t)
    return sorted(refs, key=lambda r: (-(alpha * v.get(r, 0.0) + (1 - alpha) * t.get(r, 0.0)), r[0], -r[1]))


def simulate(
    questions: list[dict[str, Any]],
    lists: dict[str, dict[str, list[tuple[Ref, float]]]],
    refs: dict[str, Ref],
    params: dict[str, Any],
) -> dict[str, list[dict[str, float]]]:
    """Per-type scores of one fusion setting, fused in Python from the candidate lists."""
    out: dict[str, list[dict[str, float]]] = defaultdict(list)
    for q in questions:
        entry = lists[q["id"]]
        txt = entry[f"text_{params['TEXT_MATCH']}"]
        if params["fusion"] == "rrf":
            ranked = fuse_rrf(entry["vector"], txt, params["RRF_K"], params["W_TEXT"])
        else:
            ranked = fuse_normalised(entry["vector"], txt, params["alpha"])
        out[q["type"]].append(
            score_question(ranked, {refs[k] for k in q["relevant"]}, {refs[k] for k in q["stale"]}))
    return out


def tune(
    questions: list[dict[str, Any]], lists: dict[str, dict[str, list[tuple[Ref, float]]]], refs: dict[str, Ref]
) -> list[tuple[dict[str, Any], dict[str, float]]]:
    """Every grid setting with its dev metrics, best first (recall@10, then MRR)."""

    def score(fuse: Callable[[dict[str, list[tuple[Ref, float]]]], list[Ref]]) -> dict[str, float]:
        rows = []
        for q in questions:
            ranked = fuse(lists[q["id"]])
            rows.append(score_question(ranked, {refs[k] for k in q["relevant"]}, {refs[k] for k in q["stale"]}))
        return aggregate(rows)

    results: list[tuple[dict[str, Any], dict[str, float]]] = []
    for k, w_text, match in itertools.product(GRID_RRF_K, GRID_W_TEXT, GRID_TEXT_MATCH):
        params = {"fusion": "rrf", "RRF_K": k, "W_TEXT": w_text, "TEXT_MATCH": match}
        results.append((params, score(lambda e, k=k, w=w_text, m=match: fuse_rrf(e["vector"], e[f"text_{m}"], k, w))))
    for alpha, match in itertools.product(GRID_ALPHA, GRID_TEXT_MATCH):
        params = {"fusion": "normalised", "alpha": alpha, "TEXT_MATCH": match}
        results.append((params, score(lambda e, a=alpha, m=match: fuse_normalised(e["vector"], e[f"text_{m}"], a))))
    results.sort(key=lambda item: (-item[1]["r@10"], -item[1]["mrr"], -item[1]["r@5"]))
    return results


# --- report -------------------------------------------------------------------------------


def metric_row(name: str, m: dict[str, float], baseline: dict[str, float] | None = None) -> list[Any]:
    row = [name, int(m["n"]), m["r@5"], m["r@10"], m["mrr"]]
    row.append(common.ratio(m["r@10"], baseline["r@10"]) if baseline else "1.00x")
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--distractors", type=int, default=0, help="extra episodes that answer no question")
    parser.add_argument("--large", action="store_true", help="10,000 distractor episodes")
    args = parser.parse_args(argv)
    extra = generate.distractors(10_000 if args.large else args.distractors)

    from stash_pipeline.memory import recall

    defaults = {name: getattr(recall, name) for name in ("RRF_K", "W_VECTOR", "W_TEXT", "TEXT_MATCH", "W_TEXT_PARTIAL")}
    data = generate.load()
    dev = [q for q in data["questions"] if q["split"] == "dev"]
    test = [q for q in data["questions"] if q["split"] == "test"]
    common.log(
        f"dataset: {len(data['episodes'])} episodes + {len(extra)} distractors, {len(data['facts'])} facts, "
        f"{len(dev)} dev / {len(test)} test questions"
    )
    with common.fresh_store("minilm") as store:
        refs = load_dataset(store, data, extra)
        common.log("loaded; fetching dev candidate lists for tuning")

        lists = candidate_lists(store, dev)
        ranking = tune(dev, lists, refs)
        best_rrf = next(p for p, _ in ranking if p["fusion"] == "rrf")
        default_key = {"fusion": "rrf", "RRF_K": defaults["RRF_K"], "W_TEXT": defaults["W_TEXT"],
                       "TEXT_MATCH": defaults["TEXT_MATCH"]}
        default_dev = next((m for p, m in ranking if p == default_key), None)
        rows = []
        for params, m in ranking[:8]:
            label = ", ".join(f"{k}={v}" for k, v in params.items())
            rows.append([label, m["r@5"], m["r@10"], m["mrr"]])
        if default_dev is not None:
            rows.append([f"(shipped default) RRF_K={defaults['RRF_K']}, W_TEXT={defaults['W_TEXT']}, "
                         f"TEXT_MATCH={defaults['TEXT_MATCH']}", default_dev["r@5"], default_dev["r@10"],
                         default_dev["mrr"]])
        common.print_table("Fusion grid on the DEV split (simulated from the hybrid's candidate lists; top 8)",
                           ["setting", "recall@5", "recall@10", "MRR"], rows)
        best_any = ranking[0][0]
        print(f"chosen RRF setting (best on dev): RRF_K={best_rrf['RRF_K']}, W_VECTOR=1.0, "
              f"W_TEXT={best_rrf['W_TEXT']}, TEXT_MATCH={best_rrf['TEXT_MATCH']!r}")
        print(f"best setting of any family on dev: {best_any}\n")

        # The partial-match weight acts inside the SQL (it needs to know whether a text hit
        # matched every query term), so it is swept with the real query, on DEV only.
        for name, value in (("RRF_K", best_rrf["RRF_K"]), ("W_TEXT", best_rrf["W_TEXT"]),
                            ("TEXT_MATCH", best_rrf["TEXT_MATCH"])):
            setattr(recall, name, value)
        sweep = []
        try:
            for partial in GRID_W_TEXT_PARTIAL:
                recall.W_TEXT_PARTIAL = partial
                sweep.append((partial, overall(evaluate(store, dev, refs, "hybrid"))))
        finally:
            recall.W_TEXT_PARTIAL = defaults["W_TEXT_PARTIAL"]
        best_partial = max(sweep, key=lambda item: (item[1]["r@10"], item[1]["mrr"], item[1]["r@5"]))[0]
        common.print_table("W_TEXT_PARTIAL on the DEV split (real query, chosen RRF setting)",
                           ["W_TEXT_PARTIAL", "recall@5", "recall@10", "MRR"],
                           [[p, m["r@5"], m["r@10"], m["mrr"]] for p, m in sweep])
        print(f"chosen W_TEXT_PARTIAL (best on dev): {best_partial} (shipped: {defaults['W_TEXT_PARTIAL']})\n")

        common.log("answering the TEST split")
        for name, value in defaults.items():
            setattr(recall, name, value)
        per_system = {s: evaluate(store, test, refs, s) for s in SYSTEMS}
        for name, value in (("RRF_K", best_rrf["RRF_K"]), ("W_TEXT", best_rrf["W_TEXT"]),
                            ("TEXT_MATCH", best_rrf["TEXT_MATCH"]), ("W_TEXT_PARTIAL", best_partial)):
            setattr(recall, name, value)
        try:
            per_system["hybrid_tuned"] = evaluate(store, test, refs, "hybrid")
            per_system["text_tuned"] = evaluate(store, test, refs, "text")  # full text with the tuned match mode
        finally:
            for name, value in defaults.items():
                setattr(recall, name, value)

        # the normalised-score family is not in recall.py: simulate its best dev setting on test,
        # and the chosen RRF setting too, to show the simulation agrees with the real query
        test_lists = candidate_lists(store, test)
        best_norm = next(p for p, _ in ranking if p["fusion"] == "normalised")
        per_system["normalised_sim"] = simulate(test, test_lists, refs, best_norm)
        simulated_rrf = overall(simulate(test, test_lists, refs, best_rrf))
        print(f"normalised_sim = alpha={best_norm['alpha']}, TEXT_MATCH={best_norm['TEXT_MATCH']!r} (best normalised "
              f"on dev), fused in Python; check: chosen RRF simulated on test (no partial-match weight) recall@10 "
              f"{simulated_rrf['r@10']:.3f} vs real {overall(per_system['hybrid_tuned'])['r@10']:.3f}\n")

        systems = ["hybrid_tuned", *SYSTEMS, "text_tuned", "normalised_sim"]
        base = overall(per_system["vector"])
        common.print_table(
            f"Retrieval quality, TEST split (held out), {len(data['episodes']) + len(extra):,} episodes, limit 10 "
            "— ratio = recall@10 / vector-only",
            ["system", "questions", "recall@5", "recall@10", "MRR", "ratio"],
            [metric_row(s, overall(per_system[s]), base) for s in systems],
        )
        rows = []
        for qtype in TYPES:
            for s in systems:
                m = aggregate(per_system[s][qtype])
                rows.append([qtype, s, int(m["n"]), m["r@5"], m["r@10"], m["mrr"]])
        common.print_table("Per question type, TEST split", ["type", "system", "n", "recall@5", "recall@10", "MRR"],
                           rows)
        stale_rows = [[s, aggregate(per_system[s]["updated"])["stale_wins"]] for s in systems]
        common.print_table("Updated facts, TEST split: share of questions where the OLD value outranks the new",
                           ["system", "stale wins"], stale_rows)

    def draw(ax: Any) -> None:
        width = 0.11
        for i, s in enumerate(systems):
            values = [aggregate(per_system[s][t])["r@10"] for t in TYPES] + [overall(per_system[s])["r@10"]]
            ax.bar([x + i * width for x in range(len(TYPES) + 1)], values, width, label=s)
        ax.set_xticks([x + 3 * width for x in range(len(TYPES) + 1)], [*TYPES, "overall"])
        ax.set_ylabel("recall@10 (test split)")
        ax.set_ylim(0, 1.3)
        ax.legend(fontsize=8, ncol=4, loc="upper center")
        ax.set_title("Retrieval quality by question type")

    common.save_plot("retrieval_quality" + ("_large" if extra else ""), draw, size=(10, 4.5))


if __name__ == "__main__":
    main()
