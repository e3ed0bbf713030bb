"""Rebuild ``data/minilm-static.npz``, the token table of the ``minilm-static`` embedder.

    python -m stash_pipeline.embedding.static_distill [--out PATH]

Deterministic: the same MiniLM weights give the same file. Runs the numpy MiniLM over
the whole vocabulary (30,522 three-token inputs: about 2 minutes on an idle core, 6 on a
busy 2-core machine), so the table ships in the wheel rather than being built on first
use. ``static.py`` describes the method.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from stash_pipeline.embedding.static import TABLE_PATH

SIF_COEFFICIENT = 1e-4
#: ids below this are [PAD], [unused…], [CLS], [SEP], [MASK]: the tokenizer never emits them
#: inside a text ([UNK] = 100 is kept)
FIRST_REAL_TOKEN = 999
_UNKNOWN_TOKEN = 100
_CLS, _SEP = 101, 102
_BATCH = 1024


def token_vectors() -> np.ndarray:
    """(vocabulary, 384): MiniLM's mean-pooled output for ``[CLS] token [SEP]``, per token."""
    from stash_pipeline.embedding import minilm

    model = minilm._load(minilm.model_path())
    size = model.word.shape[0]
    out = np.zeros((size, minilm.DIM), dtype=np.float32)
    for start in range(0, size, _BATCH):
        ids = np.arange(start, min(size, start + _BATCH), dtype=np.int64)
        batch = np.stack([np.full_like(ids, _CLS), ids, np.full_like(ids, _SEP)], axis=1)
        out[start : start + len(ids)] = model.encode(batch, np.ones_like(batch))
    return out


def build_table(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 rows, float32 scales): PCA-rotated, SIF-weighted token vectors."""
    used = np.zeros(len(vectors), dtype=bool)
    used[FIRST_REAL_TOKEN:] = True
    used[_UNKNOWN_TOKEN] = True
    # PCA, all components kept: centring removes the direction every token shares.
    mean = vectors[used].mean(axis=0)
    centred = vectors - mean
    _, _, components = np.linalg.svd(centred[used].astype(np.float64), full_matrices=False)
    rotated = (centred @ components.T.astype(np.float32)).astype(np.float32)
    # Zipf estimate of each token's probability from its rank in the (frequency-ordered) vocabulary.
    ranks = np.arange(len(vectors), dtype=np.float64)
    probability = (1.0 / (ranks + 2.0)) / np.sum(1.0 / (ranks + 2.0))
    weight = SIF_COEFFICIENT / (SIF_COEFFICIENT + probability)
    rotated[~used] = 0.0
    peak = np.abs(rotated).max(axis=1)
    scale = np.where(peak > 0, peak / 127.0, 1.0)
    rows = np.clip(np.rint(rotated / scale[:, None]), -127, 127).astype(np.int8)
    return rows, (scale * weight).astype(np.float32)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=TABLE_PATH)
    parser.add_argument("--vectors", type=Path, help="token vectors saved earlier (.npy), instead of running MiniLM")
    args = parser.parse_args(argv)
    vectors = np.load(args.vectors) if args.vectors else token_vectors()
    rows, scales = build_table(vectors)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, rows=rows, scales=scales)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
