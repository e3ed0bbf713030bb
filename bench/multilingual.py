"""Recall in eight languages: the multilingual set (bench/data/multilingual.py).

    python -m bench.multilingual                               # MiniLM, the default local embedder
    python -m bench.multilingual --embedder minilm-int8        # another local embedder
    python -m bench.multilingual --embedder openai --embedding-model NAME --openai-base-url URL

The same 76 memories (48 answers, 28 hard negatives) and 48 questions in en, zh, ja, th,
ar, hi, de and es, the questions not quoting their answers (a third keep a name or product
term), one namespace per language (its scope when asked). Systems, all with limit 10:

* ``keyword`` — ``recall(mode="text")``: the keyword leg alone (BM25 over ``stash_lexemes``);
* ``vector``  — ``recall(mode="vector")``: the embedder alone;
* ``hybrid``  — ``recall()`` as shipped;
* ``bm25``    — Okapi BM25 (k1 1.2, b 0.75) in Python over the same lexemes (the database's);
* ``bm25 english`` — the same BM25 over ``to_tsvector('english', ...)``, the keyword leg's
  tokens before migration 0022 (a run of Chinese, Japanese or Thai one token).

recall@k: whether the question's one memory is in the top k; MRR: 1 / its rank in the top 10.
The target: keyword-only recall within 0.10 of English in every language.
Also the cost of tokenising: server time per text of ``stash_lexemes`` against
``to_tsvector('english')``, the generated column's expression before 0022.
"""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter
from typing import Any

from bench import common
from bench.data import multilingual

SYSTEMS = ("keyword", "vector", "hybrid", "bm25", "bm25 english")
LIMIT = 10
BM25_K1 = 1.2
BM25_B = 0.75
TARGET_GAP = 0.10

_LEXEMES = {
    "bm25": "SELECT u.lexeme, COALESCE(array_length(u.positions, 1), 1) AS n FROM unnest(stash_lexemes(%(text)s)) u",
    "bm25 english": ("SELECT u.lexeme, COALESCE(array_length(u.positions, 1), 1) AS n "
                     "FROM unnest(to_tsvector('english', %(text)s)) u"),
}


def _id(result: Any) -> int:
    """An episode's id from remember_batch's result (an object, or a dict in older trees)."""
    return int(getattr(result, "id", None) or result["id"])


def load(store: Any, data: dict[str, dict[str, list[dict[str, Any]]]], prime: bool) -> dict[int, str]:
    """One namespace per language, its episodes in order; returns episode id -> key."""
    from stash_pipeline.memory import episodes, namespaces

    if prime:  # the default embedder's vectors, cached in bench/out/ across runs
        texts = [e["content"] for d in data.values() for e in d["episodes"]]
        texts += [q["query"] for d in data.values() for q in d["questions"]]
        common.prime_embedding_cache(store, texts, common.dataset_vectors(texts))
    keys: dict[int, str] = {}
    for language, d in data.items():
        namespaces.create(store, f"/ml/{language}")
        results = episodes.remember_batch(store, f"/ml/{language}", [{"content": e["content"]} for e in d["episodes"]])
        keys |= {_id(r): e["key"] for e, r in zip(d["episodes"], results, strict=True)}
    return keys


class Bm25:
    """Okapi BM25 over one language's episodes, tokenised by a SQL expression."""

    def __init__(self, store: Any, sql: str, episodes: list[dict[str, Any]]) -> None:
        self.store, self.sql = store, sql
        self.docs = {e["key"]: self.tokens(e["content"]) for e in episodes}
        self.df = Counter(lexeme for doc in self.docs.values() for lexeme in doc)
        self.average = sum(sum(d.values()) for d in self.docs.values()) / len(self.docs)

    def tokens(self, text: str) -> Counter[str]:
        with self.store.db.transaction() as tx:
            return Counter({r["lexeme"]: int(r["n"]) for r in tx.conn.execute(self.sql, {"text": text}).fetchall()})

    def rank(self, query: str) -> list[str]:
        terms, n = self.tokens(query), len(self.docs)
        scores = {}
        for key, doc in self.docs.items():
            length, score = sum(doc.values()), 0.0
            for term in terms:
                tf = doc.get(term, 0)
                if tf:
                    idf = math.log(1 + (n - self.df[term] + 0.5) / (self.df[term] + 0.5))
                    score += idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * length / self.average))
            if score > 0:
                scores[key] = score
        return sorted(scores, key=lambda k: (-scores[k], k))[:LIMIT]


def ranked(store: Any, system: str, language: str, query: str, keys: dict[int, str],
           bm25: dict[str, Bm25]) -> list[str]:
    from stash_pipeline import recall

    if system in _LEXEMES:
        return bm25[system].rank(query)
    mode = {"keyword": "text", "vector": "vector", "hybrid": "hybrid"}[system]
    hits = recall.recall(store, query, [f"/ml/{language}"], limit=LIMIT, mode=mode)
    return [keys[h.id] for h in hits if h.kind == "episode" and h.id in keys]


def score(found: list[str], relevant: str) -> dict[str, float]:
    rank = found.index(relevant) + 1 if relevant in found else None
    return {"r@5": float(rank is not None and rank <= 5), "r@10": float(rank is not None),
            "mrr": 0.0 if rank is None else 1.0 / rank}


def mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {k: sum(r[k] for r in rows) / len(rows) for k in rows[0]} | {"n": len(rows)}


def tokenising_cost(store: Any, data: dict[str, dict[str, list[dict[str, Any]]]], rounds: int) -> list[list[Any]]:
    """Server microseconds per text: each language's memories tokenised ``rounds`` times by
    each expression (one statement; the best of three)."""
    rows = []
    with store.db.transaction() as tx:
        for language, d in data.items():
            texts = [e["content"] for e in d["episodes"]]
            row: list[Any] = [language, round(sum(len(t) for t in texts) / len(texts))]
            # "|| g::text" keeps each call's argument distinct, so none is folded or cached
            for expression in ("to_tsvector('english', t || g::text)", "stash_lexemes(t || g::text)"):
                best = math.inf
                for _ in range(3):
                    start = time.perf_counter()
                    tx.conn.execute(f"SELECT sum(length({expression})) FROM unnest(%s::text[]) t, "
                                    "generate_series(1, %s) g", (texts, rounds))
                    best = min(best, time.perf_counter() - start)
                row.append(best * 1e6 / (len(texts) * rounds))
            row.append(common.ratio(row[3], row[2]))
            rows.append(row)
    return rows


@common.writes_results
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedder", default="minilm",
                        choices=("minilm", "minilm-onnx", "minilm-int8", "minilm-static", "e5-small", "openai"))
    parser.add_argument("--embedding-model", help="with --embedder openai: the model's name")
    parser.add_argument("--openai-base-url", help="with --embedder openai: the OpenAI-compatible endpoint")
    parser.add_argument("--rounds", type=int, default=50, help="tokenising cost: times each text is tokenised")
    args = parser.parse_args(argv)
    overrides = ({"embedding_model": args.embedding_model, "openai_base_url": args.openai_base_url}
                 if args.embedder == "openai" else {})
    data = multilingual.load()
    with common.fresh_store(args.embedder, **overrides) as store:
        common.log(f"loading {sum(len(d['episodes']) for d in data.values())} episodes in {len(data)} languages")
        keys = load(store, data, prime=args.embedder == "minilm")
        bm25 = {s: {lang: Bm25(store, _LEXEMES[s], d["episodes"]) for lang, d in data.items()} for s in _LEXEMES}
        scores: dict[tuple[str, str, str], list[dict[str, float]]] = {}
        for language, d in data.items():
            for q in d["questions"]:
                for system in SYSTEMS:
                    found = ranked(store, system, language, q["query"], keys,
                                   {s: bm25[s][language] for s in _LEXEMES})
                    scores.setdefault((language, system, q["split"]), []).append(score(found, q["relevant"][0]))
        cost = tokenising_cost(store, data, args.rounds)
        embedder = store.embedder.name
    report(scores, embedder)
    common.print_table(f"Tokenising cost: server µs per text (each language's memories x {args.rounds}, best of 3)",
                       ["language", "characters per text", "to_tsvector('english')", "stash_lexemes", "ratio"], cost)


def report(scores: dict[tuple[str, str, str], list[dict[str, float]]], embedder: str) -> None:
    languages = multilingual.LANGUAGES
    for split in ("test", "dev"):
        m = {(lang, s): mean(scores[(lang, s, split)]) for lang in languages for s in SYSTEMS}
        english = m[("en", "keyword")]
        rows = []
        for lang in languages:
            k = m[(lang, "keyword")]
            gap = max(english["r@5"] - k["r@5"], english["r@10"] - k["r@10"])
            rows.append([lang, int(k["n"]), k["r@5"], k["r@10"], gap, "yes" if gap <= TARGET_GAP else "**no**",
                         m[(lang, "bm25 english")]["r@10"], m[(lang, "bm25")]["r@10"],
                         m[(lang, "vector")]["r@5"], m[(lang, "vector")]["r@10"],
                         m[(lang, "hybrid")]["r@5"], m[(lang, "hybrid")]["r@10"], m[(lang, "hybrid")]["mrr"]])
        common.print_table(
            f"Multilingual set, {split.upper()} split, limit 10, vectors: {embedder} — keyword = recall's keyword "
            "leg alone; gap = English's keyword recall minus this language's (the larger of @5 and @10; "
            f"target <= {TARGET_GAP:.2f}); BM25 english = the keyword leg's tokens before migration 0022",
            ["language", "questions", "keyword r@5", "keyword r@10", "gap", "within 0.10", "BM25 english r@10",
             "BM25 r@10", "vector r@5", "vector r@10", "hybrid r@5", "hybrid r@10", "hybrid MRR"], rows)
    rows = []
    for lang in languages:
        for s in SYSTEMS:
            a = mean(scores[(lang, s, "test")] + scores[(lang, s, "dev")])
            rows.append([lang, s, int(a["n"]), a["r@5"], a["r@10"], a["mrr"]])
    common.print_table("Every question (dev and test), per system", ["language", "system", "questions", "r@5",
                                                                     "r@10", "MRR"], rows)


if __name__ == "__main__":
    main()
