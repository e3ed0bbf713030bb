"""A static embedder distilled from all-MiniLM-L6-v2: one table lookup per token, no network pass.

Method (model2vec's distillation, done with Stash's own numpy MiniLM; see
``static_distill.py``, which rebuilds the table):

1. every WordPiece token of MiniLM's vocabulary (30,522) is run through MiniLM alone, as
   ``[CLS] token [SEP]``, mean-pooled: one 384-d vector per token;
2. PCA over those vectors (centred, all 384 components kept): the shared direction every
   token vector has is removed, which is what makes plain averaging work;
3. Zipf / SIF weighting: token ``i`` of the frequency-ordered vocabulary gets weight
   ``a / (a + p(i))`` with ``p(i) ∝ 1 / (i + 2)`` and ``a = 1e-4``, so frequent glue
   tokens count less;
4. the table is stored as int8 rows with one float scale per row (weight folded in),
   9.5 MB compressed, shipped in the wheel (``data/minilm-static.npz``).

A text's vector is the normalised weighted sum of its tokens' rows (the tokenizer is
MiniLM's, without ``[CLS]``/``[SEP]``): a lookup instead of a forward pass; the
vectors are not MiniLM's (another model name, so switching needs ``stash reembed``) and
word order is ignored.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from stash_pipeline.errors import ConfigurationError

MODEL_NAME = "all-MiniLM-L6-v2-static"
DIM = 384
MAX_TOKENS = 512
TABLE_PATH = Path(__file__).resolve().parent / "data" / "minilm-static.npz"

_table: tuple[np.ndarray, object] | None = None
_table_lock = threading.Lock()


def _load() -> tuple[np.ndarray, object]:
    """(float32 table, tokenizer), read once per process."""
    global _table
    if _table is None:
        with _table_lock:
            if _table is None:
                import tokenizers

                from stash_pipeline.embedding.minilm import model_path

                if not TABLE_PATH.is_file():
                    raise ConfigurationError(
                        f"STASH_EMBEDDER=minilm-static needs {TABLE_PATH.name}, which ships with stash-memory; "
                        "reinstall stash-memory, or rebuild it with `python -m stash_pipeline.embedding.static_distill`"
                    )
                with np.load(TABLE_PATH) as stored:
                    rows = stored["rows"].astype(np.float32) * stored["scales"].astype(np.float32)[:, None]
                tokenizer = tokenizers.Tokenizer.from_file(str(model_path() / "tokenizer.json"))
                tokenizer.no_padding()
                tokenizer.enable_truncation(MAX_TOKENS)
                _table = (rows, tokenizer)
    return _table


class StaticEmbedder:
    """MiniLM distilled to a token table; 384-d unit vectors, a lookup per token."""

    name = MODEL_NAME
    endpoint = "local"
    dim = DIM

    def warm_up(self) -> None:
        _load()

    def embed(self, texts: list[str]) -> list[np.ndarray]:
        if not texts:
            return []
        table, tokenizer = _load()
        encodings = tokenizer.encode_batch(list(texts), add_special_tokens=False)  # type: ignore[attr-defined]
        out: list[np.ndarray] = []
        for encoding in encodings:
            ids = encoding.ids or [_UNKNOWN_TOKEN]  # an empty text still gets a unit vector
            summed = table[ids].sum(axis=0)
            norm = float(np.linalg.norm(summed))
            if norm < 1e-12:
                summed, norm = table[_UNKNOWN_TOKEN], float(np.linalg.norm(table[_UNKNOWN_TOKEN]))
            out.append((summed / norm).astype(np.float32))
        return out

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


_UNKNOWN_TOKEN = 100  # [UNK] in MiniLM's vocabulary
