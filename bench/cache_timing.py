"""Timing probe: does a tenant's call answer faster for a text another tenant stored?

The embedding cache keys every vector a tool call waits for by the call's namespaces, so
it should not. The probe stores ``--guesses`` distinct texts in ``/b`` (remembered with
their vectors, so the cache holds them), then, from ``/a``, recalls each stored text
once and, in the same loop iteration, a never-stored text of the same shape; the order
of the pair is alternated so drift and warm-up hit both sides alike. Each guess is asked
once (as an attacker would). Reported: the median, quartiles and the median of the
pairwise differences, in milliseconds. A third column, "asked again in /a", recalls
texts ``/a`` itself asked before: what the cache still saves a tenant.

``--writes`` also times the write path the same way: ``assert_fact`` in ``/a`` of a text
stored in ``/b`` against one never stored, and ``remember`` with the service's deferred
vectors (STASH_EMBED_ON_WRITE=async).

Usage: ``.venv/bin/python -m bench.cache_timing [--guesses 200] [--embedder minilm-int8] [--writes]``
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench import common


def _ms(fn) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000.0


def _quartiles(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4)
    return f"{statistics.median(values):.2f} (IQR {q[0]:.2f}–{q[2]:.2f})"


@common.writes_results
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--guesses", type=int, default=200)
    parser.add_argument("--embedder", default="minilm-int8")
    parser.add_argument("--writes", action="store_true", help="also time assert_fact and deferred remember")
    args = parser.parse_args()

    from stash_pipeline import recall
    from stash_pipeline.memory import episodes, facts, namespaces

    words = ["north", "cellar", "garden", "harbour", "tower", "office", "vault", "gate"]
    def text(kind: str, i: int) -> str:
        return f"{kind} code {7000 + i} opens the {words[i % len(words)]} door on level {i % 9}"

    with common.fresh_store(args.embedder) as store:
        namespaces.create(store, "/a")
        namespaces.create(store, "/b")
        filler = [{"content": f"note {i}: the {words[i % len(words)]} meeting moved to {i % 12} pm"}
                  for i in range(40)]
        episodes.remember_batch(store, "/a", filler)
        episodes.remember_batch(store, "/b", filler)
        stored = [text("vault", i) for i in range(args.guesses)]
        never = [text("locker", i) for i in range(args.guesses)]
        for start in range(0, len(stored), 100):  # with their vectors: the cache holds them
            episodes.remember_batch(store, "/b", [{"content": t} for t in stored[start:start + 100]])
        for i in range(20):  # warm-up: the model, the pool, the prepared statements
            recall.recall_results(store, f"warm-up question {i}", ["/a"])
        asked = [text("asked", i) for i in range(args.guesses)]
        for t in asked:  # /a asks these once; below they are asked again
            recall.recall_results(store, t, ["/a"])

        elsewhere: list[float] = []
        nowhere: list[float] = []
        again: list[float] = []
        for i in range(args.guesses):
            pair = [("s", stored[i]), ("n", never[i])]
            if i % 2:
                pair.reverse()
            for kind, query in pair:
                took = _ms(lambda q=query: recall.recall_results(store, q, ["/a"]))
                (elsewhere if kind == "s" else nowhere).append(took)
            again.append(_ms(lambda q=asked[i]: recall.recall_results(store, q, ["/a"])))
        diffs = [s - n for s, n in zip(elsewhere, nowhere, strict=True)]
        print(f"embedder {args.embedder}, {args.guesses} guesses, recall_results from /a (ms):")
        print(f"  stored in /b only : {_quartiles(elsewhere)}")
        print(f"  never stored      : {_quartiles(nowhere)}")
        print(f"  asked again in /a : {_quartiles(again)}")
        print(f"  pairwise (stored - never): median {statistics.median(diffs):+.2f}, "
              f"ratio of medians {statistics.median(elsewhere) / statistics.median(nowhere):.2f}")
        if args.writes:
            _writes(store, args.guesses, text, facts, episodes)


def _writes(store, guesses: int, text, facts, episodes) -> None:  # type: ignore[no-untyped-def]
    """assert_fact and deferred remember in /a: a text stored in /b only against one never stored."""
    stored = [text("badge", i) for i in range(2 * guesses)]
    for start in range(0, len(stored), 100):
        episodes.remember_batch(store, "/b", [{"content": t} for t in stored[start:start + 100]])
    calls = {
        "assert_fact": lambda t: facts.assert_fact(store, "/a", t),
        "remember (deferred vector)": lambda t: episodes.remember(store, "/a", t),
    }
    store.defer_vectors = True  # as the service runs remember with a slow model
    for offset, (name, call) in enumerate(calls.items()):
        elsewhere: list[float] = []
        nowhere: list[float] = []
        for i in range(guesses):
            pair = [("s", stored[offset * guesses + i]), ("n", text(f"pin{offset}", i))]
            if i % 2:
                pair.reverse()
            for kind, value in pair:
                took = _ms(lambda v=value, c=call: c(v))
                (elsewhere if kind == "s" else nowhere).append(took)
        print(f"  {name} in /a: stored in /b only {_quartiles(elsewhere)}, never stored {_quartiles(nowhere)}, "
              f"ratio of medians {statistics.median(elsewhere) / statistics.median(nowhere):.2f}")


if __name__ == "__main__":
    main()
