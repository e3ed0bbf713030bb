"""A serving process's start: ready only once it can serve a recall.

In a background thread at start, in order: the server's PostgreSQL and pgvector are
checked (``stash_pipeline.db.server``), the schema is at the latest migration, the pool
holds a connection (each new one prepares the recall statements, ``recall.statement``)
and the embedding model is loaded. A step that fails (a database still starting,
migrations not yet run) is tried again every ``RETRY_S`` seconds; until the last one
passes, ``/readyz`` answers 503 with the step it waits on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from stash_pipeline import errors
from stash_pipeline.db.migrate import current_revision, head_revision
from stash_pipeline.db.server import check as check_server
from stash_pipeline.store import Store

log = logging.getLogger("stash.warmup")

RETRY_S = 1.0


class Warmup:
    """``ready`` is set once the process can serve a recall; ``waiting_on`` says what it waits for;
    ``on_ready`` is called then (a worker tells its siblings, ``stash_serve.workers``)."""

    def __init__(self, store: Store, on_ready: Callable[[], None] | None = None) -> None:
        self.store = store
        self.on_ready = on_ready
        self.ready = threading.Event()
        self.waiting_on = "starting"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stash-warmup", daemon=True)

    def start(self) -> Warmup:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _steps(self) -> None:
        store = self.store
        self.waiting_on = "the database"
        check_server(store.db.dsn)
        self.waiting_on = "migrations"
        if current_revision(store.db.dsn) != head_revision():
            raise errors.ConfigurationError("migrations pending; run `stash migrate`")
        self.waiting_on = "a prepared connection"
        with store.db.connection():
            pass
        self.waiting_on = "the embedding model"
        store.embedder.inner.embed(["ready"])

    def _run(self) -> None:
        last = None
        while not self._stop.is_set():
            try:
                self._steps()
            except errors.UnsupportedServer as exc:
                log.error("cannot serve: %s", exc.message)
                self.waiting_on = exc.message
                return
            except Exception as exc:  # whatever it is, /readyz says it; tried again
                reason = exc.message if isinstance(exc, errors.StashError) else f"{type(exc).__name__}: {exc}"
                if reason != last:  # one line per new reason, not one per retry
                    log.warning("not ready yet (%s): %s", self.waiting_on, reason)
                    last = reason
                self._stop.wait(RETRY_S)
                continue
            self.waiting_on = ""
            self.ready.set()
            if self.on_ready is not None:
                self.on_ready()
            log.info("ready to serve")
            return
