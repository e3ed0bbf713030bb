"""The conversational set's part of ``python -m bench.retrieval_quality``: episodes only,
then with the derived facts, dev and test, per kind.

1. Every turn is imported as an episode (``conversation_quality.load``); the ranking
   constants w_vector_masked x neighbour_weight are swept on DEV (skipped with ``--skip-sweep``).
2. **Episodes only**: Okapi BM25 and the min-max mix in Python, vector-only, recall with
   without its entity leg and with speakers' names kept whole in its query vector
   (``names_kept``), and as shipped (an older recall: ``retrieval_quality --baseline-rev REV``).
3. The set's derived facts (bench/data/conversation_facts.py, 3,095) are asserted as a
   caller would: ``assert_fact`` with ``source_episode_ids`` = the cited turns and
   ``valid_from`` = the session date; the speakers are entities, so every fact's subject
   is one.
4. **Episodes + facts**: text-only (BM25 in SQL) and vector-only, recall without grouping
   (each hit its own slot), with names kept, and as shipped (a fact with its source turns is one
   result, ``recall/grouping.py``); the grouping knobs (``RecallConfig`` fields)
   are swept on DEV (skipped with ``--skip-sweep``).
5. **Episodes + facts + profiles**: the profiles stage runs over the asserted facts (one
   fact per speaker and aspect gathering their facts across sessions,
   ``stash_pipeline/stages/profiles.py``), as the pipeline runs it after the facts stage;
   vector-only and recall as shipped again.

A fact hit counts its source turns as found (``conversation_quality.result_covers``). Also
reported: the share of the ten slots facts take, the evidence found through episode
hits alone, the evidence missed split by whether a fact cites it, and tokens per answer.
``list`` = the questions that gather one person's threads across sessions (multi-hop and
inferential ones, also counted in their kind).
"""

from __future__ import annotations

import itertools
from typing import Any

from bench import common, conversation_quality, entity_quality

#: the cosine's weight for a query whose speaker's name is masked: nearly every question here
GRID_W_VECTOR_MASKED = (0.4, 0.5, 0.6, 0.7)
GRID_NEIGHBOUR = (0.0, 0.2, 0.35, 0.5)
#: the grouping knobs tried on DEV, as changes to the shipped RecallConfig
GROUPING_GRID: tuple[dict[str, Any], ...] = (
    {"grouping": False},
    {"fact_weight": 1.0, "subject_weight": 1.0, "entity_pool": False, "overfetch": 10},  # grouping alone
    {"fact_weight": 1.0, "subject_weight": 1.0},
    {"entity_pool": False},
    {"overfetch": 20},
    {"fact_weight": 1.4},
    {"fact_weight": 1.6},
    {"subject_weight": 1.0},
    {"subject_weight": 1.5},
    {"diversity": 0.05},
    {},
)
KINDS = (*conversation_quality.KINDS, "list")

PerKind = dict[str, list[dict[str, float]]]


def _ranking_sweep(store: Any, dev: list[dict[str, Any]], keys: Any, baselines: Any) -> dict[str, float]:
    """w_vector_masked x neighbour_weight on DEV, episodes only; prints the table, returns the best
    as changes to the shipped config (none when the shipped values are best)."""
    from stash_pipeline.recall.config import DEFAULT

    cq = conversation_quality
    shipped = {"w_vector_masked": DEFAULT.w_vector_masked, "neighbour_weight": DEFAULT.neighbour_weight}
    sweep = []
    for w_vector, neighbour in itertools.product(GRID_W_VECTOR_MASKED, GRID_NEIGHBOUR):
        point = {"w_vector_masked": w_vector, "neighbour_weight": neighbour}
        sweep.append((point, cq.overall(cq.evaluate(store, dev, keys, baselines, "recall", DEFAULT.replace(**point)))))
    sweep.sort(key=lambda item: (-item[1]["r@10"], -item[1]["mrr"]))
    common.print_table("Conversational set, DEV split, episodes only: ranking constants (real query)",
                       ["setting", "recall@5", "recall@10", "MRR"],
                       [[", ".join(f"{k}={v}" for k, v in p.items()), m["r@5"], m["r@10"], m["mrr"]]
                        for p, m in sweep])
    print(f"best on dev: {sweep[0][0]}; shipped: {shipped}\n")
    return sweep[0][0] if sweep[0][0] != shipped else {}


def _grouping_sweep(store: Any, dev: list[dict[str, Any]], keys: Any, baselines: Any) -> Any:
    """The grouping knobs on DEV with the facts present; prints the table, returns the best
    config whose single-hop and temporal recall@10 stay within 0.01 of no grouping."""
    from stash_pipeline.recall.config import DEFAULT

    cq = conversation_quality
    rows, measured = [], []
    for change in GROUPING_GRID:
        config = DEFAULT.replace(**change)
        per = cq.evaluate(store, dev, keys, baselines, "recall", config)
        m = cq.overall(per)
        by_kind = {k: cq.aggregate(per[k])["r@10"] for k in KINDS}
        measured.append((config, m, by_kind))
        name = ", ".join(f"{k}={v}" for k, v in change.items()) or "shipped"
        rows.append([name, m["r@5"], m["r@10"], m["mrr"], m["fact_share"], *by_kind.values()])
    base = measured[0][2]
    eligible = [item for item in measured[1:]
                if all(item[2][k] >= base[k] - 0.01 for k in ("single_hop", "temporal"))]
    best = max(eligible or measured[1:], key=lambda item: (item[1]["r@10"], item[1]["mrr"]))[0]
    common.print_table("Conversational set, DEV split, episodes + facts: grouping knobs (changes to the shipped config)",
                       ["setting", "r@5", "r@10", "MRR", "facts' share", *(f"{k} r@10" for k in KINDS)], rows)
    print(f"best on dev: {best}\n")
    return best


def conversation_tables(store: Any, data: dict[str, list[dict[str, Any]]], *, sweep: bool = True) -> dict[str, Any]:
    """Load the conversational set, measure episodes only and episodes + facts, print tables."""
    from stash_pipeline.consolidation import runner
    from stash_pipeline.recall.config import DEFAULT, VARIANTS

    cq = conversation_quality
    keys = cq.load(store, data)
    common.log(f"conversational set: {entity_quality.load_speakers(store, data['turns'])} speakers as entities")
    baselines = cq.PythonBaselines(store, data, keys)
    splits = {s: [q for q in data["questions"] if q["split"] == s] for s in ("dev", "test")}
    best_ranking = _ranking_sweep(store, splits["dev"], keys, baselines) if sweep else {}
    plain = VARIANTS["no_grouping"]

    results: dict[tuple[str, str], dict[str, PerKind]] = {}

    def run(condition: str, system: str, split: str, name: str | None = None, **options: Any) -> None:
        results.setdefault((condition, name or system), {})[split] = cq.evaluate(
            store, splits[split], keys, baselines, system, **options)

    for split in splits:
        common.log(f"conversational set, episodes only: {split}")
        for system in cq.SYSTEMS:
            run("episodes", system, split)
        run("episodes", "recall", split, "recall_no_entities", config=VARIANTS["no_entity_leg"])
        run("episodes", "recall", split, "recall_names_kept", config=VARIANTS["names_kept"])
        if best_ranking:
            run("episodes", "recall", split, "recall_dev_best", config=DEFAULT.replace(**best_ranking))

    common.log(f"conversational set: asserting {len(data['facts'])} derived facts")
    cq.assert_facts(store, data, keys)
    best_grouping = _grouping_sweep(store, splits["dev"], keys, baselines) if sweep else DEFAULT
    cited = {(f["namespace"], d) for f in data["facts"] for d in f["evidence"]}
    for split in splits:
        common.log(f"conversational set, episodes + facts: {split}")
        run("+facts", "text", split, config=plain, cited=cited)
        run("+facts", "vector", split, config=plain, cited=cited)
        run("+facts", "recall", split, "recall_ungrouped", config=plain, cited=cited)
        run("+facts", "recall", split, "recall_names_kept", config=VARIANTS["names_kept"], cited=cited)
        run("+facts", "recall", split, config=DEFAULT, cited=cited)
        if best_grouping != DEFAULT:
            run("+facts", "recall", split, "recall_dev_best", config=best_grouping, cited=cited)
    common.log("conversational set: the profiles stage over the asserted facts")
    written = sum(runner.run_stage(store, namespace, "profiles").details.get("profiles_written", 0)
                  for namespace in sorted({t["namespace"] for t in data["turns"]}))
    common.log(f"conversational set: {written} profiles")
    for split in splits:
        common.log(f"conversational set, episodes + facts + profiles: {split}")
        run("+facts +profiles", "vector", split, config=plain, cited=cited)
        run("+facts +profiles", "recall", split, config=DEFAULT, cited=cited)
    print(f"shipped config: {DEFAULT}\n")

    rows = []
    for (condition, system), per in results.items():
        dev, test = cq.overall(per["dev"]), cq.overall(per["test"])
        rows.append([condition, system, dev["r@5"], dev["r@10"], dev["mrr"], test["r@5"], test["r@10"], test["mrr"],
                     test["fact_share"], test["r@10_episodes"]])
    common.print_table(f"Conversational set ({len(data['turns']):,} turns, {len(data['facts'])} facts), "
                       "recall@k of evidence turns (a fact hit counts its source turns), limit 10",
                       ["condition", "system", "dev r@5", "dev r@10", "dev MRR", "test r@5", "test r@10", "test MRR",
                        "test facts' share", "test r@10 via episode hits"], rows)
    rows = [[condition, system,
             *(cq.overall(per[split])[k] for split in splits for k in ("r@10", "missed_cited", "missed_uncited"))]
            for (condition, system), per in results.items() if condition.startswith("+facts")]
    common.print_table("Where the evidence goes with facts, top 10: found, cited by a fact that did not rank, "
                       f"cited by none ({len(cited):,} of the turns are cited)",
                       ["condition", "system", "dev found", "dev missed, cited", "dev missed, uncited",
                        "test found", "test missed, cited", "test missed, uncited"], rows)
    rows = [[condition, system, *cq.tokens(per["dev"]), *cq.tokens(per["test"])]
            for (condition, system), per in results.items() if system.startswith("recall")]
    common.print_table("Tokens per answer: recall's answer as the tool sends it (limit 10, context 1), "
                       "serialised, in max_tokens units (4 characters each)",
                       ["condition", "system", "dev mean", "dev p95", "test mean", "test p95"], rows)
    rows = []
    for kind in KINDS:
        for (condition, system), per in results.items():
            if system == "minmax_mix":
                continue
            dev_m, test_m = cq.aggregate(per["dev"][kind]), cq.aggregate(per["test"][kind])
            rows.append([kind, condition, system, int(dev_m["n"]), dev_m["r@10"], int(test_m["n"]), test_m["r@5"],
                         test_m["r@10"], test_m["mrr"], test_m["fact_share"]])
    common.print_table("Conversational set per kind (list = questions gathering a person's threads)",
                       ["kind", "condition", "system", "dev n", "dev r@10", "test n", "test r@5", "test r@10",
                        "test MRR", "test facts' share"], rows)
    return results
