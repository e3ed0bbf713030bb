"""Embeddings from any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, Ollama, vLLM, llama.cpp).

* Batched: ``STASH_EMBEDDING_BATCH_SIZE`` texts per request, results put back in input
  order by their ``index``.
* The ``openai`` client does the retries (``STASH_REASONER_MAX_RETRIES``, with backoff
  on connection errors, 408/409/429 and 5xx) and the timeout (``STASH_REASONER_TIMEOUT_S``).
  What still fails after that is ``ModelUnavailable``; a rejected request (bad key,
  unknown model) is ``ConfigurationError``.
* ``dimensions`` is never sent: text-embedding-ada-002 and many local servers reject it.
  Instead the returned dimension is checked against ``STASH_VECTOR_DIM`` and a mismatch
  is explained.
* Vectors are L2-normalised (some local servers return raw vectors; cosine is unchanged).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import openai

from stash_pipeline import errors

if TYPE_CHECKING:
    from stash_pipeline.config import Settings


class OpenAIEmbedder:
    """``STASH_EMBEDDING_MODEL`` at ``STASH_OPENAI_BASE_URL``, ``STASH_VECTOR_DIM`` dims."""

    def __init__(self, settings: Settings) -> None:
        if not (settings.embedding_model and settings.openai_base_url):
            raise errors.ConfigurationError(
                "STASH_EMBEDDER=openai needs STASH_EMBEDDING_MODEL and STASH_OPENAI_BASE_URL"
            )
        self.name: str = settings.embedding_model
        self.endpoint: str = settings.openai_base_url
        self.dim: int = settings.vector_dim
        self.batch_size: int = settings.embedding_batch_size
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else ""
        # Local servers need no key, but the client refuses to start without one.
        self._client = openai.OpenAI(
            base_url=settings.openai_base_url,
            api_key=key or "unused",
            timeout=settings.reasoner_timeout_s,
            max_retries=settings.reasoner_max_retries,
        )

    def embed(self, texts: list[str]) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(self._embed_batch(list(texts[start : start + self.batch_size])))
        return out

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def _embed_batch(self, batch: list[str]) -> list[np.ndarray]:
        try:
            response = self._client.embeddings.create(model=self.name, input=batch, encoding_format="float")
        except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as exc:
            # APITimeoutError is an APIConnectionError; all of these survived the client's retries.
            raise errors.ModelUnavailable(f"embedding endpoint unavailable: {_describe(exc)}") from exc
        except openai.APIStatusError as exc:
            if exc.status_code >= 500 or exc.status_code in (408, 409):
                raise errors.ModelUnavailable(f"embedding endpoint unavailable: {_describe(exc)}") from exc
            raise errors.ConfigurationError(
                f"embedding endpoint {self.endpoint} rejected model {self.name!r}: {_describe(exc)}"
            ) from exc
        except openai.OpenAIError as exc:  # malformed body and the like
            raise errors.ModelResponseInvalid(
                f"embedding endpoint returned an unusable answer: {exc}"
            ) from exc

        data = sorted(response.data, key=lambda item: item.index)
        if len(data) != len(batch):
            raise errors.ModelResponseInvalid(
                f"embedding endpoint returned {len(data)} vectors for {len(batch)} texts"
            )
        vectors: list[np.ndarray] = []
        for item in data:
            vector = np.asarray(item.embedding, dtype=np.float32)
            if vector.ndim != 1 or vector.shape[0] != self.dim:
                got = vector.shape[-1] if vector.ndim else 0
                raise errors.ConfigurationError(
                    f"embedding model {self.name!r} at {self.endpoint} returns {got}-dimensional vectors "
                    f"but STASH_VECTOR_DIM={self.dim}. Set STASH_VECTOR_DIM={got} (at most 2000, the "
                    "HNSW limit) and, if the database already holds vectors, run `stash reembed`. Stash "
                    "does not request a dimension because many models (text-embedding-ada-002, most "
                    "local servers) reject the `dimensions` parameter.",
                    returned_dim=got,
                    configured_dim=self.dim,
                )
            norm = float(np.linalg.norm(vector))
            vectors.append(vector / norm if norm > 0 else vector)
        return vectors


def _describe(exc: openai.OpenAIError) -> str:
    status = getattr(exc, "status_code", None)
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return f"HTTP {status}: {message}" if status else message
