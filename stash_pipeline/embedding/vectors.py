"""Vector arithmetic shared by the stages and the benchmarks."""

from __future__ import annotations

from typing import Any

import numpy as np


def unit_vector(vector: Any) -> np.ndarray:
    """``vector`` as float32 scaled to length 1 (a zero vector stays zero), so a dot product is a cosine.

    Accepts a pgvector ``Vector`` (as read from the database), a numpy array or a list.
    """
    if hasattr(vector, "to_numpy"):  # pgvector's Vector
        vector = vector.to_numpy()
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm else array
