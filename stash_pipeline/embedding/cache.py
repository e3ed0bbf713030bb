"""``CachedEmbedder``: every embedding goes through Postgres' ``embedding_cache`` and the model lock.

* Key: ``sha256(text)`` (hex) + model name + endpoint, so two models, or one model name
  served by two endpoints, never share vectors.
* ``embed(texts)`` de-duplicates within the call, reads all hits in one query, computes
  all misses in ONE batched call of the inner embedder, then writes them
  (``ON CONFLICT DO NOTHING``). The cache is an optimisation: a failed read or write is
  logged and the embed still succeeds.
* Model lock (``check_lock``), run on first use: the ``settings`` table records the
  embedding model and dimension of the stored vectors (the first writer records them).
  A different configured model or dimension raises ``EmbeddingModelMismatch`` explaining
  the two ways out; so does a vector column whose declared dimension differs from the
  embedder's. The endpoint is recorded for audit but not locked: the same model name
  served from a moved host gives the same vectors.
* ``forget_texts(tx, texts)`` erases a text's cache entries for every model (purge),
  recall's scoped entries of it too.
* Every vector a tool call waits for (a recall's or forget's query, a remembered turn, an
  asserted fact, an entity name) is cached under ``query_key(text, paths)``: the text's
  hash followed by a hash of the namespaces the call serves (the namespace written, or
  the trees asked). A call reuses only a vector the same scope made before, so its
  answer time never tells whether another tenant stored or asked that text; a text's
  first call in a scope waits for the model. A hybrid recall's query that names an entity
  common in scope has a vector mixed from it and from it with that name masked
  (``recall/vectors.embedded_text``), cached under a key of both. Background work (stages,
  import, re-embed) uses the plain text hash.
* A query with a local model (``embeds_first``): agents rarely ask the same question
  twice, so a query this process has not cached is embedded before its one round trip
  rather than looked up first and found missing; one it has cached is read from the cache
  in that round trip. A model behind an endpoint is always looked up first.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg

from stash_pipeline import errors

if TYPE_CHECKING:
    from stash_pipeline.db.gateway import Database, Session
    from stash_pipeline.embedding import Embedder

log = logging.getLogger(__name__)

LOCK_MODEL_KEY = "embedding_model"
LOCK_DIM_KEY = "vector_dim"
LOCK_ENDPOINT_KEY = "embedding_endpoint"
#: query keys a process remembers having cached (about 100 bytes each)
CACHED_QUERIES = 100_000
#: seconds a process reuses the text a recall query was embedded as (its common names
#: masked) before it asks the database for the names again
MASKED_FOR = 10.0


def text_hash(text: str) -> str:
    """The cache key of a text: hex SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def query_key(text: str, paths: Iterable[str], *, masked: str | None = None) -> str:
    """The cache key of a text embedded for a call over the namespaces ``paths`` (see above):
    ``text_hash(text)`` followed by the hex SHA-256 of the sorted paths (and of ``masked``
    when it differs from ``text``: the text with names masked that a hybrid recall's vector
    is mixed from). Hex throughout, so ``forget_texts`` finds every scope's entry of a text
    by the text hash's prefix."""
    scope = "\n".join(sorted(set(paths))) + ("" if masked in (None, text) else "\nmasked as: " + masked)
    return text_hash(text) + hashlib.sha256(scope.encode("utf-8")).hexdigest()


def as_array(value: Any) -> np.ndarray:
    """A vector column value (pgvector ``Vector``, ndarray or list) as a float32 ndarray."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)


def read_lock(db: Database | Session) -> dict[str, str]:
    """The stored lock as {key: value} (keys embedding_model, vector_dim, embedding_endpoint)."""
    return {row["key"]: row["value"] for row in db.all("embedding_lock_read")}


def column_dims(db: Database | Session) -> dict[str, int]:
    """Declared dimension of every vector column, as {"table.column": dims}."""
    return {f"{r['table_name']}.{r['column_name']}": int(r["dim"]) for r in db.all("embedding_column_dims")}


#: the STASH_EMBEDDER value that makes each local model's vectors
LOCAL_EMBEDDERS = {
    "all-MiniLM-L6-v2": "minilm",
    "all-MiniLM-L6-v2-int8": "minilm-int8",
    "all-MiniLM-L6-v2-static": "minilm-static",
    "multilingual-e5-small-q4-centred": "e5-small",
}


def _how_to_switch(stored_model: str, stored_dim: str) -> str:
    local = LOCAL_EMBEDDERS.get(stored_model)
    again = (
        f"set STASH_EMBEDDER={local}" if local
        else f"STASH_EMBEDDER / STASH_EMBEDDING_MODEL / STASH_VECTOR_DIM matching {stored_model!r}, {stored_dim} dims"
    )
    return (
        f"Either configure the stored model again ({again}), or keep the new "
        "configuration and run `stash reembed` to re-embed every episode and fact with it."
    )


class CachedEmbedder:
    """Wraps a raw embedder with the Postgres cache and the model lock."""

    def __init__(self, db: Database, inner: Embedder, *, enforce_lock: bool = True) -> None:
        self.db = db
        self.inner = inner
        self.name: str = inner.name
        self.endpoint: str = inner.endpoint
        self.dim: int = int(inner.dim)
        # reembed passes enforce_lock=False: changing the locked model is its purpose.
        self._lock_checked = not enforce_lock
        self._guard = threading.Lock()
        self._cached_queries: OrderedDict[str, None] = OrderedDict()
        self._embedded_as: OrderedDict[str, tuple[float, str]] = OrderedDict()

    # -- the lock -----------------------------------------------------------------
    def check_lock(self) -> None:
        """Compare the configured model/dimension with the stored lock; record it if first."""
        with self.db.transaction() as tx:
            column_dim = tx.scalar("embedding_episode_column_dim")
            tx.execute("embedding_lock_init", key=LOCK_MODEL_KEY, value=self.name)
            tx.execute("embedding_lock_init", key=LOCK_DIM_KEY, value=str(self.dim))
            stored = read_lock(tx)
            stored_model = stored.get(LOCK_MODEL_KEY, "")
            stored_dim = stored.get(LOCK_DIM_KEY, "")
            if stored_model != self.name or stored_dim != str(self.dim):
                raise errors.EmbeddingModelMismatch(
                    f"the stored vectors were made by {stored_model!r} ({stored_dim} dims) but the "
                    f"configured embedder is {self.name!r} ({self.dim} dims). "
                    + _how_to_switch(stored_model, stored_dim),
                    stored_model=stored_model,
                    stored_dim=stored_dim,
                    configured_model=self.name,
                    configured_dim=self.dim,
                )
            if column_dim is not None and int(column_dim) != self.dim:
                raise errors.EmbeddingModelMismatch(
                    f"the database's vector columns hold {column_dim} dimensions but the configured "
                    f"embedder {self.name!r} produces {self.dim}. Set STASH_VECTOR_DIM={column_dim} with a "
                    f"matching model, or run `stash reembed` to retype the columns to {self.dim}.",
                    column_dim=int(column_dim),
                    configured_model=self.name,
                    configured_dim=self.dim,
                )
            if stored.get(LOCK_ENDPOINT_KEY) != self.endpoint:
                tx.execute("embedding_lock_set", key=LOCK_ENDPOINT_KEY, value=self.endpoint)

    def ensure_lock(self) -> None:
        """Check (once per embedder) that the configured model matches the stored lock."""
        if self._lock_checked:
            return
        with self._guard:
            if not self._lock_checked:
                self.check_lock()
                self._lock_checked = True

    # -- queries this process has cached --------------------------------------------
    def embeds_first(self, key: str) -> bool:
        """Whether a call should embed the query ``key`` before it asks the database: the
        model runs here (no endpoint to pay) and this process has not cached that key, so
        looking it up first would most likely cost a round trip for nothing."""
        if self.endpoint != "local":
            return False
        with self._guard:
            return key not in self._cached_queries

    def note_cached(self, key: str) -> None:
        """Record that the cache holds query ``key`` (the most recent ``CACHED_QUERIES``)."""
        self._note(self._cached_queries, key, None)

    def embedded_as(self, key: str) -> str | None:
        """The text query ``key`` was embedded as when this process last looked up the names
        to mask in it, if that was within ``MASKED_FOR`` seconds."""
        with self._guard:
            found = self._embedded_as.get(key)
        return found[1] if found and time.monotonic() - found[0] < MASKED_FOR else None

    def note_embedded_as(self, key: str, text: str) -> None:
        """Record the text query ``key`` is embedded as (the most recent ``CACHED_QUERIES``)."""
        self._note(self._embedded_as, key, (time.monotonic(), text))

    def _note(self, seen: OrderedDict[str, Any], key: str, value: Any) -> None:
        with self._guard:
            seen[key] = value
            seen.move_to_end(key)
            while len(seen) > CACHED_QUERIES:
                seen.popitem(last=False)

    # -- embedding ----------------------------------------------------------------
    def embed(self, texts: list[str], scope: Iterable[str] | None = None) -> list[np.ndarray]:
        """Unit vectors for ``texts`` (same order), from the cache where possible; with a
        ``scope`` (the namespaces a tool call serves) under its ``query_key`` entries only."""
        texts = list(texts)
        if not texts:
            return []
        if not all(isinstance(t, str) for t in texts):
            raise errors.InvalidInput("only strings can be embedded")
        self.ensure_lock()
        paths = None if scope is None else sorted(set(scope))
        hashes = [text_hash(t) if paths is None else query_key(t, paths) for t in texts]
        unique: dict[str, str] = {}
        for h, t in zip(hashes, texts, strict=True):
            unique.setdefault(h, t)

        found = self._lookup(list(unique))
        missing = {h: unique[h] for h in unique if h not in found}
        if missing:
            fresh = self.compute(missing)
            self._store(fresh)
            found.update(fresh)
        return [found[h] for h in hashes]

    def compute(self, texts_by_hash: dict[str, str]) -> dict[str, np.ndarray]:
        """Vectors of ``{hash: text}`` from the inner embedder in ONE call, unchecked by the cache."""
        if not texts_by_hash:
            return {}
        hashes = list(texts_by_hash)
        computed = self.inner.embed([texts_by_hash[h] for h in hashes])
        if len(computed) != len(hashes):
            raise errors.ModelResponseInvalid(
                f"embedder {self.name!r} returned {len(computed)} vectors for {len(hashes)} texts"
            )
        fresh: dict[str, np.ndarray] = {}
        for h, vector in zip(hashes, computed, strict=True):
            vector = np.asarray(vector, dtype=np.float32)
            if vector.shape != (self.dim,):
                raise errors.ConfigurationError(
                    f"embedder {self.name!r} returned {vector.shape[-1] if vector.ndim else 0} "
                    f"dimensions, expected {self.dim} (STASH_VECTOR_DIM)"
                )
            fresh[h] = vector
        return fresh

    def lookup_in(self, tx: Session, hashes: list[str]) -> dict[str, np.ndarray]:
        """Cached vectors of ``hashes`` read inside the caller's transaction (a write path
        that already holds a connection saves a pool checkout and a round trip)."""
        if not hashes:
            return {}
        rows = tx.all("embedding_cache_lookup", model=self.name, endpoint=self.endpoint, hashes=hashes)
        found = {row["text_hash"]: as_array(row["embedding"]) for row in rows}
        return {h: v for h, v in found.items() if v.shape == (self.dim,)}

    def store_in(self, tx: Session, vectors: dict[str, np.ndarray]) -> None:
        """Cache computed vectors inside the caller's transaction, in one statement."""
        if vectors:
            tx.execute(
                "embedding_cache_insert_many",
                model=self.name,
                endpoint=self.endpoint,
                hashes=list(vectors),
                embeddings=list(vectors.values()),
            )

    def embed_one(self, text: str, scope: Iterable[str] | None = None) -> np.ndarray:
        """The unit vector of one text (``scope`` as for ``embed``)."""
        return self.embed([text], scope)[0]

    def forget_texts(self, tx: Session, texts: list[str]) -> int:
        """Delete the cache entries of ``texts`` for every model, and recall's entries of them
        for every scope (``query_key``), inside the caller's transaction."""
        if not texts:
            return 0
        return tx.execute("embedding_cache_forget", hashes=sorted({text_hash(t) for t in texts}))

    # -- cache I/O (never fatal, except that an unreachable database fails fast) --
    def _lookup(self, hashes: list[str]) -> dict[str, np.ndarray]:
        try:
            rows = self.db.all(
                "embedding_cache_lookup", model=self.name, endpoint=self.endpoint, hashes=hashes
            )
        except errors.DatabaseUnavailable:
            raise  # the caller's own query would wait for the database again and fail the same way
        except (errors.StashError, psycopg.Error) as exc:
            log.warning("embedding cache read failed, computing instead: %s", exc)
            return {}
        out: dict[str, np.ndarray] = {}
        for row in rows:
            vector = as_array(row["embedding"])
            if vector.shape == (self.dim,):
                out[row["text_hash"]] = vector
        return out

    def _store(self, vectors: dict[str, np.ndarray]) -> None:
        rows: list[dict[str, Any]] = [
            {"text_hash": h, "model": self.name, "endpoint": self.endpoint, "embedding": v}
            for h, v in vectors.items()
        ]
        try:
            with self.db.transaction() as tx:
                # a lost cache row only costs a recomputation: skip the WAL flush wait
                tx.execute("embedding_cache_relaxed_commit")
                tx.executemany("embedding_cache_insert", rows)
        except (errors.StashError, psycopg.Error) as exc:
            log.warning("embedding cache write failed (vectors still returned): %s", exc)
