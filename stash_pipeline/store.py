"""``Store``: what every memory operation needs — settings, the database gateway, the embedder.

Each surface builds one per process::

    store = Store.open(load_settings())
    episodes.remember(store, "/projects/x", "The deploy uses blue-green on Fridays")

Operations are plain functions in ``stash_pipeline.memory.*`` taking the store first.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stash_pipeline.config import Settings
from stash_pipeline.db import Database

if TYPE_CHECKING:
    from stash_pipeline.embedding.cache import CachedEmbedder


@dataclass
class Store:
    settings: Settings
    db: Database
    _embedder: CachedEmbedder | None = field(default=None, repr=False)
    _embedder_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def open(cls, settings: Settings, *, db: Database | None = None) -> Store:
        return cls(settings=settings, db=db or Database.from_settings(settings))

    @property
    def embedder(self) -> CachedEmbedder:
        """The cached embedder, built (and its model lock checked) on first use."""
        if self._embedder is None:
            # MCP tools run in worker threads: build (and load the model) once
            with self._embedder_lock:
                if self._embedder is None:
                    from stash_pipeline.embedding import build_embedder
                    from stash_pipeline.embedding.cache import CachedEmbedder

                    self._embedder = CachedEmbedder(self.db, build_embedder(self.settings))
        return self._embedder

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
