"""Recall as an agent gets it: through MCP stdio, against a bare HNSW top-10, and under writes.

    python -m bench.recall_service                          # 100 rounds, minilm-int8
    python -m bench.recall_service --baseline-rev REV       # also revision REV's server, same rounds
    python -m bench.recall_service --writes-per-second 200 --rounds 100
    python -m bench.recall_service --new-questions          # no question found in the cache

Data: the conversational labelled set (bench/data, every turn an episode of its
conversation's namespace, vectors from the committed MiniLM cache), queried with its
questions over their conversation's namespace, limit 10.

Table 1, each round: the same question through every path, the paths in rotating order so
load drift hits all alike:

* ``recall`` through ``stash serve mcp --transport stdio`` (the real MCP SDK client), as an
  agent calls it (the query embedding is a cache hit after the first round);
* with ``--baseline-src DIR`` or ``--baseline-rev REV`` (an older tree, ``bench/common.py``),
  the same server importing that tree first: before and after in the same rounds;
* the bare HNSW top-10 — one ``SELECT ... ORDER BY embedding <=> $1 LIMIT 10`` over all
  episodes on the same server (no namespace filter), the vector precomputed, default HNSW
  settings, in this process: the floor for "find the ten nearest memories";
* ``recall_results`` in this process (the library call the tool makes).

With ``--new-questions`` every call asks a question never asked before, as agents mostly
do: its vectors are erased from the embedding cache (every scope's) just before, so each
recall pays the embedding and whatever a first sight costs; the bare top-10 keeps its
precomputed vector, and a second floor, ``bare HNSW top-10, question embedded``, first
embeds the question with the store's model (no cache) as any search of a new text must.

Table 2, the same rounds while ``--writers`` threads remember turns into the same
namespaces at ``--writes-per-second`` in all (cached texts, so a write is its database
work: insert, full-text and HNSW index entries, term statistics) vs without them, blocks
of rounds alternating; the achieved write rate is reported.

Every table reports the load average beside it: the machine is shared.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

from bench import common, conversation_quality, mcp_overhead
from bench.data import conversations

#: the floor of a new question: embed it (the store's model, no cache), then the bare top-10
EMBEDDED_FLOOR = "bare HNSW top-10, question embedded"


def bare_hnsw(store: Any, vector: Any) -> list[dict[str, Any]]:
    """The ten nearest episodes: one indexed statement in autocommit (one round trip), nothing else."""
    with store.db.connection() as conn:
        conn.autocommit = True
        try:
            return conn.execute(common.sql("bench_bare_hnsw"), {"embedding": vector}).fetchall()
        finally:
            conn.autocommit = False


class Writer:
    """Remembers cached-text turns into the conversations at a steady rate, in ``threads``
    threads (each paced at its share of the rate, each on its own pooled connection)."""

    def __init__(self, store: Any, turns: list[dict[str, Any]], per_second: float, threads: int = 1) -> None:
        self.store, self.turns, self.interval = store, turns, threads / per_second
        self.on = threading.Event()
        self.stop = threading.Event()
        self.written = 0
        self.on_seconds = 0.0
        self._since: float | None = None
        self._count = threading.Lock()
        self.threads = [threading.Thread(target=self._run, args=(k,), daemon=True) for k in range(threads)]

    def _run(self, k: int) -> None:
        from stash_pipeline.memory import episodes, validate

        i = k * 997  # the threads write different turns
        due = time.perf_counter()
        while not self.stop.is_set():
            if not self.on.wait(0.05):
                due = time.perf_counter()
                continue
            turn = self.turns[i % len(self.turns)]
            # a data set's time is text: parsed as the remember tool parses it
            episodes.remember(self.store, turn["namespace"], turn["content"],
                              occurred_at=validate.timestamp(turn["occurred_at"], "occurred_at"))
            i += 1
            with self._count:
                self.written += 1
            due += self.interval
            pause = due - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            else:
                due = time.perf_counter()  # behind: write as fast as it goes, no burst to catch up

    def switch(self, on: bool) -> None:
        """Writing on or off; the time spent on is summed for the achieved rate."""
        now = time.perf_counter()
        if on and self._since is None:
            self._since = now
            self.on.set()
        elif not on and self._since is not None:
            self.on.clear()
            self.on_seconds += now - self._since
            self._since = None

    @property
    def rate(self) -> float:
        return self.written / self.on_seconds if self.on_seconds else 0.0

    @contextlib.contextmanager
    def running(self) -> Any:
        for thread in self.threads:
            thread.start()
        try:
            yield self
        finally:
            self.stop.set()
            for thread in self.threads:
                thread.join()


@contextlib.asynccontextmanager
async def stdio_servers(store: Any, home: Path, baseline: Path | None) -> AsyncIterator[dict[str, Any]]:
    env = mcp_overhead._env(store, home)
    command = [mcp_overhead._stash(), "serve", "mcp", "--transport", "stdio"]
    kinds = {"stdio": env} | ({"stdio before": {**env, "PYTHONPATH": str(baseline)}} if baseline else {})
    async with contextlib.AsyncExitStack() as clients:
        errlog = clients.enter_context((home / "stdio.log").open("w"))
        yield {name: await clients.enter_async_context(mcp_overhead.stdio_session(command, environment, errlog))
               for name, environment in kinds.items()}


def forget_question(store: Any, text: str) -> None:
    """Erase ``text``'s cached vectors, every scope's: the next recall of it is a first sight."""
    with store.db.transaction() as tx:
        store.embedder.forget_texts(tx, [text])


async def measure(store: Any, questions: list[dict[str, Any]], vectors: Any, rounds: int, home: Path,
                  baseline: Path | None, writer: Writer | None, block: int,
                  new_questions: bool = False) -> dict[str, dict[str, list[float]]]:
    """Per load state ("idle" / "writing") and path, the milliseconds of every round."""
    from stash_pipeline import recall

    samples: dict[str, dict[str, list[float]]] = {"idle": {}, "writing": {}}
    async with stdio_servers(store, home, baseline) as sessions:
        paths = [*sessions, "bare HNSW top-10", "library", *([EMBEDDED_FLOOR] if new_questions else [])]
        for i in range(-5, rounds):  # warm-up rounds (imports, pools, plans, caches) not kept
            state = "writing" if writer is not None and i >= 0 and (i // block) % 2 == 1 else "idle"
            if writer is not None:
                writer.switch(state == "writing")
            q = questions[i % len(questions)]
            vector = vectors[i % len(questions)]
            for k in range(len(paths)):
                path = paths[(i + k) % len(paths)]
                if new_questions:
                    forget_question(store, q["query"])
                if path in sessions:
                    elapsed = await mcp_overhead.timed_call(
                        sessions[path], "recall", {"query": q["query"], "namespaces": q["namespace"]})
                elif path == "library":
                    elapsed = common.timed(lambda q=q: recall.recall_results(store, q["query"], [q["namespace"]]))[0]
                elif path == EMBEDDED_FLOOR:
                    elapsed = common.timed(lambda q=q: bare_hnsw(store, store.embedder.inner.embed([q["query"]])[0]))[0]
                else:
                    elapsed = common.timed(lambda v=vector: bare_hnsw(store, v))[0]
                if i >= 0:
                    samples[state].setdefault(path, []).append(elapsed)
            if (i + 1) % 25 == 0:
                common.log(f"round {i + 1}/{rounds}, load average {os.getloadavg()[0]:.1f}")
    if writer is not None:
        writer.switch(False)
    return samples


@common.writes_results
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100, help="questions asked per path (default 100)")
    parser.add_argument("--embedder", choices=("minilm", "minilm-int8"), default="minilm-int8")
    common.add_baseline_arguments(parser, "its server too, same rounds")
    parser.add_argument("--writes-per-second", type=float, default=0.0,
                        help="with a writer at this rate in alternate blocks of rounds (e.g. 200)")
    parser.add_argument("--writers", type=int, default=4, help="writer threads sharing that rate (default 4)")
    parser.add_argument("--block", type=int, default=10, help="rounds per block with / without the writer")
    parser.add_argument("--new-questions", action="store_true",
                        help="every call a question never asked before (its cached vectors erased first)")
    args = parser.parse_args(argv)
    data = conversations.load()
    questions = data["questions"]
    vectors = common.dataset_vectors([q["query"] for q in questions])
    load_before = os.getloadavg()
    with common.baseline_tree(args) as baseline, common.fresh_store(args.embedder) as store, \
            tempfile.TemporaryDirectory(prefix="stash-recall-") as tmp:
        conversation_quality.load(store, data)
        common.log(f"loaded {len(data['turns']):,} turns in {len({t['namespace'] for t in data['turns']})} namespaces")
        writer = (Writer(store, data["turns"], args.writes_per_second, args.writers)
                  if args.writes_per_second else None)
        with writer.running() if writer else contextlib.nullcontext():
            samples = anyio.run(measure, store, questions, vectors, args.rounds, Path(tmp), baseline, writer,
                                args.block, args.new_questions)
    load_after = os.getloadavg()
    conditions = (f"{len(data['turns']):,} turns, {args.embedder}, "
                  f"{'new questions' if args.new_questions else 'questions as the rounds repeat them'}, load average {load_before[0]:.1f} before, "
                  f"{load_after[0]:.1f} after")
    for state, paths in samples.items():
        if not paths:
            continue
        floor = common.summarize(paths["bare HNSW top-10"])
        embedded = common.summarize(paths[EMBEDDED_FLOOR]) if EMBEDDED_FLOOR in paths else None
        rows = []
        for path, values in paths.items():
            s = common.summarize(values)
            rows.append([path, s["n"], s["p50"], s["p95"], common.ratio(s["p50"], floor["p50"]),
                         common.ratio(s["p95"], floor["p95"]),
                         *([common.ratio(s["p50"], embedded["p50"]), common.ratio(s["p95"], embedded["p95"])]
                           if embedded else [])])
        title = "Recall through MCP stdio vs a bare HNSW top-10, ms"
        if writer is not None:
            title += (f" — {'with the writers on' if state == 'writing' else 'writers off'} "
                      f"({writer.written:,} remembers at {writer.rate:.0f}/s achieved while on, "
                      f"{args.writes_per_second:.0f}/s asked of {args.writers} threads)")
        common.print_table(f"{title} ({conditions})",
                           ["path", "n", "p50", "p95", "p50 / bare HNSW", "p95 / bare HNSW",
                            *(["p50 / embedded", "p95 / embedded"] if embedded else [])], rows)


if __name__ == "__main__":
    sys.exit(main())
