"""Fact quality of consolidation against a real (or scripted) OpenAI-compatible model.

Without ``--base-url``: the facts stage on the conversational set, against a scripted
model answering from the set's planted truth — facts kept, dead-letter rate, calls per
episode and recall with the stage's own facts (``bench/facts_conversations.py``).

With ``--base-url``:
The labelled set ``bench/data/consolidation_quality.jsonl`` holds episode streams (one
namespace each) with what a careful reader derives from them: facts (entity, property,
value, source episodes), relationships (from, relation, to), causal links between those
facts, and the episodes from which nothing should be derived ("ok", "brb, coffee").

Each stream is remembered into a fresh database and the ``facts``, ``relationships`` and
``causal_links`` stages run against the given endpoint. Reported:

* facts: precision (derived facts matching a labelled fact) and recall (labelled facts
  matched by a derived one). A derived fact matches a labelled one when they share a
  source episode, the entities match (normalised tokens, one contained in the other) and
  every token of the labelled value occurs in the derived value or summary;
* hallucinated facts: derived facts with an entity/value word, a capitalised word or a
  number that none of their source episodes (by lineage) contains, or a summary with two
  or more words (4+ letters), over a quarter of its words, absent from the sources;
* facts from empty episodes: derived facts whose sources are all "nothing to derive";
* relationships: precision / recall on (from, to) with the same normalised matching;
* causal links: precision / recall on (cause, effect) once derived facts are mapped to
  labelled ones;
* model calls, tokens and failed calls per episode; dead letters; wall time.

    python -m bench.consolidation_quality     # the facts stage on the conversational set, scripted model
    python -m bench.consolidation_quality --base-url http://127.0.0.1:8000/v1 --model smollm2
    python -m bench.consolidation_quality --base-url URL --model M --embedder hash --json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from bench import common

DATA = Path(__file__).parent / "data" / "consolidation_quality.jsonl"
STAGES = ["facts", "relationships", "causal_links"]
#: share of a summary's words (4+ letters) that may be absent from its sources (paraphrase)
SUMMARY_UNSUPPORTED = 0.25

_WORD = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")
_CAPITALISED = re.compile(r"\b[A-Z][A-Za-z0-9]*")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_STOP = frozenset(
    "a an the of in on at to for with and or is are was were be by from as its it this that "
    "has have had now than into".split()
)


# -- normalised matching -----------------------------------------------------------------------
def _stem(word: str) -> str:
    """A crude stem so 'labelled'/'label', 'routes'/'routing' and 'GPUs'/'GPU' compare equal."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def tokens(text: str | None) -> set[str]:
    return {_stem(w) for w in _WORD.findall((text or "").lower()) if w not in _STOP}


def same_entity(gold: str, derived: str | None) -> bool:
    g, d = tokens(gold), tokens(derived)
    return bool(g and d) and (g <= d or d <= g)


def fact_matches(gold: dict[str, Any], derived: dict[str, Any], keys_by_id: dict[int, str]) -> bool:
    sources = {keys_by_id.get(i) for i in derived["episodes"]}
    if not sources & set(gold["sources"]):
        return False
    entity = derived["entity"] if derived["entity"] else derived["content"]
    if not same_entity(gold["entity"], entity):
        return False
    return tokens(gold["value"]) <= tokens(derived["value"]) | tokens(derived["content"])


def hallucinated(derived: dict[str, Any], source_text: str) -> list[str]:
    """Words of the derived fact that no source contains (empty = supported)."""
    vocabulary = tokens(source_text)
    raw = source_text.lower()
    missing = [w for w in tokens(derived["entity"]) | tokens(derived["value"]) if w not in vocabulary]
    missing += [w for w in _CAPITALISED.findall(derived["content"]) if _stem(w.lower()) not in vocabulary
                and w.lower() not in _STOP]
    missing += [n for n in _NUMBER.findall(derived["content"]) if n not in raw]
    # a summary may paraphrase (a word or two of its own), but over a quarter of its words
    # unsupported is invention
    words = [w for w in tokens(derived["content"]) if len(w) >= 4]
    absent = [w for w in words if w not in vocabulary]
    if len(absent) >= 2 and len(absent) / len(words) > SUMMARY_UNSUPPORTED:
        missing += absent
    return sorted(set(missing))


def _ratio(hits: int, total: int) -> float | None:
    return hits / total if total else None


# -- one stream --------------------------------------------------------------------------------
def _load() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]


def _score_stream(store: Any, stream: dict[str, Any], namespace: str) -> dict[str, Any]:
    with store.db.transaction() as tx:
        namespace_id = tx.scalar("get_namespace_by_slug", slug=namespace)
    with store.db.connection() as conn:
        facts = conn.execute(common.sql("bench_quality_facts"), {"namespace_id": namespace_id}).fetchall()
        rels = conn.execute(common.sql("bench_quality_relationships"), {"namespace_id": namespace_id}).fetchall()
        links = conn.execute(common.sql("bench_quality_causal"), {"namespace_id": namespace_id}).fetchall()
        episodes = conn.execute(common.sql("bench_quality_episodes"), {"namespace_id": namespace_id}).fetchall()
        conn.commit()
    text_by_id = {int(e["id"]): e["content"] for e in episodes}
    key_by_text = {e["text"]: e["key"] for e in stream["episodes"]}
    keys_by_id = {i: key_by_text.get(t, "") for i, t in text_by_id.items()}
    empty = set(stream["empty"])
    gold_facts = stream["facts"]

    matched_gold: set[str] = set()
    fact_to_gold: dict[int, set[str]] = {}
    correct = hallucinations = from_empty = 0
    examples: list[str] = []
    for fact in facts:
        fact["episodes"] = [int(i) for i in fact["episodes"] or []]
        hits = {g["id"] for g in gold_facts if fact_matches(g, fact, keys_by_id)}
        fact_to_gold[int(fact["id"])] = hits
        matched_gold |= hits
        correct += bool(hits)
        missing = hallucinated(fact, " ".join(text_by_id.get(i, "") for i in fact["episodes"]))
        if missing:
            hallucinations += 1
            examples.append(f"{fact['content']!r} (unsupported: {', '.join(missing[:4])})")
        if fact["episodes"] and all(keys_by_id.get(i) in empty for i in fact["episodes"]):
            from_empty += 1

    gold_rels = stream["relationships"]
    rel_hits = sum(
        any(same_entity(g["from"], r["from_entity"]) and same_entity(g["to"], r["to_entity"]) for g in gold_rels)
        for r in rels
    )
    rel_found = sum(
        any(same_entity(g["from"], r["from_entity"]) and same_entity(g["to"], r["to_entity"]) for r in rels)
        for g in gold_rels
    )
    gold_links = {(c["cause"], c["effect"]) for c in stream["causal"]}
    link_pairs = [
        {(a, b) for a in fact_to_gold.get(int(x["cause_fact_id"]), set())
         for b in fact_to_gold.get(int(x["effect_fact_id"]), set())}
        for x in links
    ]
    link_hits = sum(bool(pairs & gold_links) for pairs in link_pairs)
    link_found = len(gold_links & set().union(*link_pairs)) if link_pairs else 0
    return {
        "episodes": len(stream["episodes"]),
        "facts_derived": len(facts), "facts_correct": correct,
        "facts_labelled": len(gold_facts), "facts_recalled": len(matched_gold),
        "facts_hallucinated": hallucinations, "facts_from_empty": from_empty,
        "relationships_derived": len(rels), "relationships_correct": rel_hits,
        "relationships_labelled": len(gold_rels), "relationships_recalled": rel_found,
        "causal_derived": len(links), "causal_correct": link_hits,
        "causal_labelled": len(gold_links), "causal_recalled": link_found,
        "hallucination_examples": examples,
    }


# -- the run -----------------------------------------------------------------------------------
def evaluate(base_url: str, model: str, *, embedder: str = "minilm", structured: str = "auto",
             timeout_s: float = 120.0, api_key: str | None = None,
             streams: list[str] | None = None) -> dict[str, Any]:
    """Consolidate every stream (or the named ones) against the endpoint and score the result."""
    from stash_pipeline.consolidation import runner
    from stash_pipeline.memory import episodes, namespaces

    overrides: dict[str, Any] = {"openai_base_url": base_url, "reasoner_model": model,
                                 "reasoner_structured": structured, "reasoner_timeout_s": timeout_s}
    if api_key:
        overrides["openai_api_key"] = api_key
    selected = [s for s in _load() if not streams or s["stream"] in streams]
    if not selected:
        raise SystemExit(f"no stream named {streams}; the set has {[s['stream'] for s in _load()]}")
    per_stream: dict[str, dict[str, Any]] = {}
    started = time.monotonic()
    with common.fresh_store(embedder=embedder, **overrides) as store:
        statuses: dict[str, str] = {}
        for stream in selected:
            namespace = f"/quality/{stream['stream']}"
            namespaces.create(store, namespace)
            episodes.remember_batch(store, namespace, [{"content": e["text"]} for e in stream["episodes"]])
            for report in runner.run_all(store, namespace, stages=STAGES):
                statuses[f"{stream['stream']}/{report.stage}"] = report.status
            per_stream[stream["stream"]] = scored = _score_stream(store, stream, namespace)
            # progress for slow CPU runs: one line per stream as it finishes
            print(f"{stream['stream']}: {scored['facts_derived']} facts derived ({scored['facts_correct']} correct,"
                  f" {scored['facts_recalled']}/{scored['facts_labelled']} labelled recalled),"
                  f" {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
        with store.db.connection() as conn:
            calls = conn.execute(common.sql("bench_quality_calls")).fetchone()
            dead = conn.execute(common.sql("bench_quality_dead_letters")).fetchone()
            modes = conn.execute(common.sql("bench_quality_modes")).fetchall()
            conn.commit()
    total = {k: sum(s[k] for s in per_stream.values()) for k in next(iter(per_stream.values())) if k != "hallucination_examples"}
    n = total["episodes"]
    return {
        "model": model, "base_url": base_url, "embedder": embedder,
        "mode": ", ".join(m["mode"] for m in modes) or structured,
        "seconds": round(time.monotonic() - started, 1),
        "facts_precision": _ratio(total["facts_correct"], total["facts_derived"]),
        "facts_recall": _ratio(total["facts_recalled"], total["facts_labelled"]),
        "relationships_precision": _ratio(total["relationships_correct"], total["relationships_derived"]),
        "relationships_recall": _ratio(total["relationships_recalled"], total["relationships_labelled"]),
        "causal_precision": _ratio(total["causal_correct"], total["causal_derived"]),
        "causal_recall": _ratio(total["causal_recalled"], total["causal_labelled"]),
        "calls_per_episode": int(calls["n"]) / n, "tokens_per_episode": int(calls["tokens"]) / n,
        "failed_calls": int(calls["failed"]), "truncated_calls": int(calls["truncated"]),
        "dead_letters": int(dead["n"]),
        "failed_stages": sorted(k for k, v in statuses.items() if v not in ("ok", "idle")),
        "totals": total,
        "hallucination_examples": [e for s in per_stream.values() for e in s["hallucination_examples"]],
    }


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def report(result: dict[str, Any]) -> str:
    t = result["totals"]
    rows = [
        ["facts", t["facts_derived"], t["facts_labelled"], _fmt(result["facts_precision"]), _fmt(result["facts_recall"])],
        ["relationships", t["relationships_derived"], t["relationships_labelled"],
         _fmt(result["relationships_precision"]), _fmt(result["relationships_recall"])],
        ["causal links", t["causal_derived"], t["causal_labelled"],
         _fmt(result["causal_precision"]), _fmt(result["causal_recall"])],
    ]
    text = common.print_table(
        f"consolidation quality — {result['model']} ({result['mode']}), {t['episodes']} episodes, "
        f"{result['seconds']} s", ["output", "derived", "labelled", "precision", "recall"], rows)
    lines = [
        f"hallucinated facts: {t['facts_hallucinated']} of {t['facts_derived']}; "
        f"facts from empty episodes: {t['facts_from_empty']}",
        f"model calls per episode: {result['calls_per_episode']:.2f}; tokens per episode: "
        f"{result['tokens_per_episode']:.0f}; failed calls: {result['failed_calls']}; "
        f"truncated: {result['truncated_calls']}; dead letters: {result['dead_letters']}",
        f"stages not ok: {', '.join(result['failed_stages']) or 'none'}",
    ]
    lines += [f"  hallucinated: {e}" for e in result["hallucination_examples"][:5]]
    print("\n".join(lines))
    return text + "\n\n" + "\n".join(lines)


@common.writes_results
def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", default=None,
                        help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (without it: the facts stage on "
                             "the conversational set against a scripted model, bench/facts_conversations.py)")
    parser.add_argument("--model", default=None, help="model name as the server knows it")
    parser.add_argument("--conversations", type=int, default=None,
                        help="without --base-url: only the first N conversations of the conversational set")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--structured", default="auto", choices=["auto", "json_schema", "json_object", "none"])
    parser.add_argument("--embedder", default="minilm", choices=["minilm", "hash"])
    parser.add_argument("--timeout", type=float, default=120.0, help="STASH_REASONER_TIMEOUT_S for the run")
    parser.add_argument("--streams", default=None, help="comma-separated stream names (default: all)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.base_url is None:
        from bench import facts_conversations

        result = facts_conversations.run(args.conversations, embedder=args.embedder)
        if args.json:
            print(json.dumps(result, indent=2, default=str))
        else:
            facts_conversations.report(result)
        return result
    if args.model is None:
        parser.error("--base-url needs --model")
    result = evaluate(args.base_url, args.model, embedder=args.embedder, structured=args.structured,
                      timeout_s=args.timeout, api_key=args.api_key,
                      streams=args.streams.split(",") if args.streams else None)
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        report(result)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
