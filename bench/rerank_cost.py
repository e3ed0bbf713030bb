"""What a reranking endpoint costs a recall: p50 / p95 with and without, in the same run.

    python -m bench.rerank_cost                 # 10,000 memories
    python -m bench.rerank_cost --large         # 100,000 memories
    python -m bench.rerank_cost --candidates 10,20,30 --questions 120

The store is ``bench.recall_latency``'s fill (episodes and facts by COPY, MiniLM vectors
with noise; the questions of bench/data over every namespace, limit 10), searched with the
product's default embedder (``minilm-int8``), every question's vector cached first so the
rows compare recall's own work. No cross-encoder ships in a package these machines can
install, so the endpoint is a **stand-in with a cross-encoder's cost**: a TEI-shaped
``/rerank`` server on loopback that runs a MiniLM-L6 forward pass (the same 6 layers and
384 dimensions as ``cross-encoder/ms-marco-MiniLM-L-6-v2``) over each "question [SEP]
candidate" pair in one batch, as a cross-encoder does; its scores are the pair vector's
cosine to the question's, which means nothing: this bench measures time, not quality.

Rows: recall without the endpoint (the baseline) and with it at each candidate count,
questions interleaved so the machine's load falls on both alike; the endpoint's own time
per request beside them.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from bench import common
from bench.recall_latency import fill


class StandIn:
    """A TEI-shaped /rerank endpoint doing a MiniLM-L6 cross-encoder's work per pair."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.times_ms: list[float] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                began = time.perf_counter()
                scores = outer.score(body["query"], body["texts"])
                outer.times_ms.append((time.perf_counter() - began) * 1000)
                data = json.dumps([{"index": i, "score": s} for i, s in enumerate(scores)]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/rerank"

    def score(self, query: str, texts: list[str]) -> list[float]:
        vectors = self.embedder.embed([query] + [f"{query} [SEP] {text}" for text in texts])
        head = vectors[0]
        return [float(np.dot(head, v)) for v in vectors[1:]]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@common.writes_results
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000, help="memories (default 10000)")
    parser.add_argument("--large", action="store_true", help="100,000 memories")
    parser.add_argument("--candidates", default="10,20,30", help="candidate counts to rerank (default 10,20,30)")
    parser.add_argument("--questions", type=int, default=120, help="questions asked per row (default 120)")
    args = parser.parse_args(argv)
    size = 100_000 if args.large else args.size
    counts = [int(c) for c in args.candidates.split(",") if c.strip()]

    from stash_pipeline import recall
    from stash_pipeline.store import Store

    with common.fresh_store("minilm-int8") as store:
        questions, _ = fill(store, size, {})
        questions = questions[: args.questions]
        stand_in = StandIn(store.embedder.inner)
        reranking = {
            n: Store.open(store.settings.model_copy(update={"rerank_url": stand_in.url, "rerank_candidates": n,
                                                            "rerank_timeout_s": 30.0}))
            for n in counts
        }
        try:
            for q in questions:  # every question's vector cached, the plans warm
                recall.recall(store, q, ["/"], limit=10)
            times: dict[str, list[float]] = {"off": []} | {str(n): [] for n in counts}
            endpoint: dict[str, list[float]] = {str(n): [] for n in counts}
            for q in questions:
                times["off"].append(common.timed(lambda q=q: recall.recall(store, q, ["/"], limit=10))[0])
                for n, other in reranking.items():
                    before = len(stand_in.times_ms)
                    times[str(n)].append(common.timed(lambda q=q, s=other: recall.recall(s, q, ["/"], limit=10))[0])
                    endpoint[str(n)] += stand_in.times_ms[before:]
        finally:
            for other in reranking.values():
                other.close()
            stand_in.close()
    off = common.summarize(times["off"])
    rows: list[list[Any]] = [["no reranking (baseline)", f"{off['p50']:.1f}", f"{off['p95']:.1f}", "", "1.00x"]]
    for n in counts:
        on = common.summarize(times[str(n)])
        spent = common.summarize(endpoint[str(n)]) if endpoint[str(n)] else {"p50": float("nan")}
        rows.append([f"reranking the best {n}", f"{on['p50']:.1f}", f"{on['p95']:.1f}", f"{spent['p50']:.1f}",
                     common.ratio(on["p95"], off["p95"])])
    common.print_table(
        f"Recall with a reranking endpoint, {size:,} memories, {len(questions)} questions, limit 10, "
        "cached query vectors (stand-in: a MiniLM-L6 forward pass per pair, on this machine's cores)",
        ["recall", "p50 ms", "p95 ms", "endpoint p50 ms", "p95 vs baseline"], rows)


if __name__ == "__main__":
    main()
