"""all-MiniLM-L6-v2 through ONNX Runtime, float32 or int8.

The graph is written from the bundled weights by ``onnx_graph.py`` (no exported model is
downloadable offline). Tokenisation, truncation, length-sorted batching and pooling are
the numpy embedder's (``MiniLMEmbedder``); only the forward pass runs in ONNX Runtime,
with one intra-op thread for the same reason the numpy pass pins OpenBLAS to one (a
small shared machine: a thread pool spinning against Postgres costs more than it gains).

* ``minilm-onnx`` (float32): the same vectors as the numpy pass (cosine ≥ 0.9999999),
  hence the same model name; switching between the two needs no ``stash reembed``.
* ``minilm-int8``: matmul weights quantised to int8 per output channel, activations
  quantised dynamically, one text per run (the activation scale is per run, and a text's
  vector must not depend on what it was batched with). Vectors differ slightly (cosine
  to float ≈ 0.99), so it has its own model name.

Building the graph takes about 2 s and quantising 2 s more, so the serialised model is
kept under ``STASH_HOME/models/`` (written atomically) and read from there afterwards.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np

from stash_pipeline.embedding.minilm import DIM, MAX_TOKENS, MODEL_NAME, MiniLMEmbedder
from stash_pipeline.errors import ConfigurationError

#: bump when ``onnx_graph`` changes what it writes, so stale cached graphs are not read
GRAPH_VERSION = 1
INT8_MODEL_NAME = MODEL_NAME + "-int8"

_sessions: dict[tuple[str, bool, int], _OnnxRunner] = {}
_sessions_lock = threading.Lock()


class _OnnxRunner:
    """A tokenizer plus an ONNX Runtime session computing the encoder."""

    def __init__(self, model_bytes: bytes, model_dir: Path, threads: int) -> None:
        import onnxruntime
        import tokenizers

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = onnxruntime.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
        tokenizer = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer: Any = tokenizer

    def encode(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        output = self.session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        return np.asarray(output, dtype=np.float32)


def _model_bytes(model_dir: Path, quantized: bool, cache_dir: Path | None) -> bytes:
    from stash_pipeline.embedding import onnx_graph

    name = f"all-MiniLM-L6-v2-{'int8' if quantized else 'fp32'}-v{GRAPH_VERSION}.onnx"
    cached = cache_dir / name if cache_dir is not None else None  # prepare() uses the same name
    if cached is not None and cached.is_file():
        return cached.read_bytes()
    data = onnx_graph.build(model_dir / "model.safetensors")
    if quantized:
        data = onnx_graph.quantized(data)
    if cached is not None:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            # write-then-rename: a concurrent reader sees the whole file or none
            handle, temporary = tempfile.mkstemp(dir=cached.parent, suffix=".tmp")
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(temporary, cached)
        except OSError:
            pass  # a read-only home only costs the rebuild next time
    return data


def prepare(model_dir: Path, quantized: bool, cache_dir: Path) -> bool:
    """Write the cached graph if it is missing; True if it had to be built."""
    name = f"all-MiniLM-L6-v2-{'int8' if quantized else 'fp32'}-v{GRAPH_VERSION}.onnx"
    if (cache_dir / name).is_file():
        return False
    _model_bytes(model_dir, quantized, cache_dir)
    return True


class OnnxMiniLMEmbedder(MiniLMEmbedder):
    """all-MiniLM-L6-v2 on ONNX Runtime; 384-d unit vectors."""

    endpoint = "local"
    dim = DIM

    def __init__(
        self, *, quantized: bool = False, cache_dir: Path | None = None, batch_size: int = 32, threads: int = 1
    ) -> None:
        for module in ("onnxruntime", "onnx"):
            if importlib.util.find_spec(module) is None:
                raise ConfigurationError(
                    f"STASH_EMBEDDER={'minilm-int8' if quantized else 'minilm-onnx'} needs the package {module!r} "
                    "(pip install onnxruntime onnx), or set STASH_EMBEDDER=minilm"
                )
        # Dynamic quantisation picks one activation scale per run over the whole batch, so
        # in a batch a text's vector would depend on its companions (cosine down to 0.97
        # against the same text alone). One text per run keeps a text's vector its own.
        super().__init__(batch_size=1 if quantized else batch_size)
        self.quantized = quantized
        self.cache_dir = cache_dir
        self.threads = threads  # 1 in the product; bench/embedders.py measures 2
        self.name = INT8_MODEL_NAME if quantized else MODEL_NAME

    def _runner(self) -> _OnnxRunner:
        key = (str(self.model_dir), self.quantized, self.threads)
        runner = _sessions.get(key)
        if runner is None:
            with _sessions_lock:
                runner = _sessions.get(key)
                if runner is None:
                    data = _model_bytes(self.model_dir, self.quantized, self.cache_dir)
                    runner = _sessions[key] = _OnnxRunner(data, self.model_dir, self.threads)
        return runner
