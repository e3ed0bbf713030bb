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
from stash_pipeline.db.gateway import Database

if TYPE_CHECKING:
    from stash_pipeline.embedding.cache import CachedEmbedder


@dataclass
class Store:
    settings: Settings
    db: Database
    _embedder: CachedEmbedder | None = field(default=None, repr=False)
    _embedder_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    #: whether a write commits a new text's row before its vector exists (the
    #: pending-vector worker, ``memory/pending.py``, fills it in). True for
    #: STASH_EMBED_ON_WRITE=async; in auto mode the worker sets it when it starts.
    defer_vectors: bool = False
    #: set by a write that left rows waiting for a vector; the worker wakes on it
    vectors_pending: threading.Event = field(default_factory=threading.Event, repr=False)
    #: recall's namespace paths -> when (time.monotonic) a recall there last found episodes
    #: waiting for their vector (``recall/pipeline.search`` embeds them first for a while)
    pending_seen: dict[tuple[str, ...], float] = field(default_factory=dict, repr=False)

    @classmethod
    def open(
        cls,
        settings: Settings,
        *,
        db: Database | None = None,
        pool_max: int | None = None,
        timeout: float | None = None,
    ) -> Store:
        """The store for ``settings``: the one way a surface builds the database gateway.

        Without ``db``, a pool of ``pool_max`` connections (default STASH_DB_POOL_MAX) is
        made for the database ``stash_pipeline.db.dsn`` picks; an embedded server that is
        the database must already run (entry points start it: ``stash up``, the CLI, test
        fixtures), else ``DatabaseUnavailable`` says how to start it. ``timeout`` is how
        long a caller waits for a connection (default 15 s).
        """
        return cls(
            settings=settings,
            db=db or Database.from_settings(settings, max_size=pool_max, timeout=timeout),
            defer_vectors=settings.embed_on_write == "async",
        )

    @property
    def embedder(self) -> CachedEmbedder:
        """The cached embedder, built (and its model lock checked) on first use."""
        if self._embedder is None:
            # MCP tools run in worker threads: build (and load the model) once
            with self._embedder_lock:
                if self._embedder is None:
                    from stash_pipeline.embedding import build_embedder
                    from stash_pipeline.embedding.cache import CachedEmbedder

                    self.settings = self._settings_for_stored_model()
                    self._embedder = CachedEmbedder(self.db, build_embedder(self.settings))
        return self._embedder

    def _settings_for_stored_model(self) -> Settings:
        """With STASH_EMBEDDER unset, a database goes on with the local model it was written with.

        The default is MiniLM as an int8 ONNX graph; a database whose vectors came from
        another local model (the numpy MiniLM before it) keeps that model instead of
        refusing writes after an upgrade. A switch is explicit: set STASH_EMBEDDER and run
        `stash reembed`.
        """
        if "embedder" in self.settings.model_fields_set:
            return self.settings
        import psycopg

        from stash_pipeline.embedding.cache import LOCAL_EMBEDDERS, LOCK_MODEL_KEY, read_lock

        try:
            stored = read_lock(self.db).get(LOCK_MODEL_KEY, "")
        except psycopg.errors.UndefinedTable:  # not migrated yet: nothing was written
            return self.settings
        local = LOCAL_EMBEDDERS.get(stored)
        if local is None or local == self.settings.embedder:
            return self.settings
        return self.settings.model_copy(update={"embedder": local})

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
