"""Deterministic feature-hashing embedder: lexical overlap only, no model, no network.

Features are word unigrams, word bigrams and character 3-grams of ``#word#``, hashed
with blake2b (stable across processes, unlike ``hash()``) into signed buckets, then
L2-normalised. Good enough for tests and minimal installs; not semantic.
"""

from __future__ import annotations

import hashlib
import itertools
import re

import numpy as np

_WORD = re.compile(r"[a-z0-9]+")


def _features(text: str) -> list[str]:
    words = _WORD.findall(text.lower())
    feats = [f"w:{w}" for w in words]
    feats += [f"b:{a}_{b}" for a, b in itertools.pairwise(words)]
    for w in words:
        padded = f"#{w}#"
        feats += [f"c:{padded[i:i + 3]}" for i in range(len(padded) - 2)]
    return feats


class HashEmbedder:
    """Feature hashing into ``dim`` signed buckets."""

    endpoint = "local"

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self.name = f"hash-{dim}"

    def embed_one(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        for feat in _features(text):
            h = int.from_bytes(hashlib.blake2b(feat.encode(), digest_size=8).digest(), "little")
            vec[h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:
            vec[0] = 1.0  # texts without word characters still get a valid unit vector
            return vec
        return vec / norm

    def embed(self, texts: list[str]) -> list[np.ndarray]:
        return [self.embed_one(t) for t in texts]
