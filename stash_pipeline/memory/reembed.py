"""``stash reembed``: switch the embedding model (and dimension) of an existing database.

Input: every episode and fact (deleted, withdrawn and retired ones too — every stored
vector must come from one model) and every entity's name. Output: their ``embedding`` /
``embedding_model`` rewritten with the configured embedder, and the lock in ``settings``
updated to it. ``rows_written`` counts episodes and facts; ``entities`` the names.

When the dimension changes, the HNSW indexes are dropped, the vector columns of
``episodes``, ``facts``, ``entities`` and ``embedding_cache`` are retyped to ``vector(n)`` with
``USING NULL`` (the cache is emptied), the rows are refilled, then NOT NULL and the
indexes (same names as in 0001_initial.sql) come back.

Idempotency / crash safety: a row needs work iff its vector is NULL or was made by
another model, so a re-run after a crash resumes where it stopped; the schema repair
(NOT NULL, indexes) runs whenever it is found missing. Each batch commits on its own.
A session advisory lock (``db/locks.py``) keeps two reembeds from running at once. This bypasses the
model lock check on purpose: replacing the locked model is its job. Stop writers that
use the old configuration while it runs, and restart every Stash process afterwards
(they hold the old STASH_* settings).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from psycopg import sql

from stash_pipeline import errors
from stash_pipeline.db.gateway import translate_errors
from stash_pipeline.db.locks import REEMBED_LOCK, session_lock
from stash_pipeline.db.sql import query
from stash_pipeline.embedding import build_embedder
from stash_pipeline.embedding.cache import (
    LOCK_DIM_KEY,
    LOCK_ENDPOINT_KEY,
    LOCK_MODEL_KEY,
    CachedEmbedder,
    column_dims,
    read_lock,
)
from stash_pipeline.models import ReembedReport

if TYPE_CHECKING:
    from stash_pipeline.store import Store

Progress = Callable[[int, int], None]

#: vector columns reembed knows how to refill; any other one is refused, not left stale
KNOWN_VECTOR_COLUMNS = frozenset(
    {"episodes.embedding", "facts.embedding", "entities.embedding", "embedding_cache.embedding"}
)
#: table -> the query that stores one row's new vector (entities: of the normalised name)
_TABLES = {"episodes": "reembed_set_episode", "facts": "reembed_set_fact", "entities": "reembed_set_entity"}
_MAX_PASSES = 3  # a second pass picks up rows written by old-config writers during the first


def reembed(
    store: Store, *, progress: Progress | None = None, batch_size: int | None = None
) -> ReembedReport:
    """Re-embed every episode and fact with the configured embedder; return a report.

    ``progress(done, total)`` is called after each batch; ``batch_size`` rows are embedded
    and committed at a time (default STASH_EMBEDDING_BATCH_SIZE).
    """
    started = time.monotonic()
    batch = store.settings.embedding_batch_size if batch_size is None else batch_size
    if batch < 1:
        raise errors.InvalidInput("batch size must be at least 1")
    embedder = CachedEmbedder(store.db, build_embedder(store.settings), enforce_lock=False)
    new_dim = embedder.dim
    if not 1 <= new_dim <= 2000:  # HNSW's limit; also guards the literal formatted into DDL
        raise errors.ConfigurationError(f"vector dimension {new_dim} is outside 1..2000 (the HNSW limit)")

    with store.db.connection() as lock_conn, session_lock(lock_conn, REEMBED_LOCK, wait=False) as held:
        if not held:
            raise errors.StageBusy("another `stash reembed` is running on this database")
        return _run(store, embedder, progress, batch, started)


def _run(
    store: Store, embedder: CachedEmbedder, progress: Progress | None, batch: int, started: float
) -> ReembedReport:
    db = store.db
    dims = column_dims(db)
    unknown = sorted(set(dims) - KNOWN_VECTOR_COLUMNS)
    if unknown:
        raise errors.ConfigurationError(
            f"reembed does not know how to refill the vector column(s) {', '.join(unknown)}; "
            "extend stash_pipeline/memory/reembed.py first"
        )
    previous = read_lock(db)
    old_dim = dims.get("episodes.embedding")
    dims_changed = old_dim != embedder.dim
    if dims_changed:
        _ddl(store, "reembed_drop_indexes")
        _ddl(store, "reembed_alter_dims", dim=embedder.dim)

    counts = {table: 0 for table in _TABLES}
    total = sum(int(db.scalar(f"reembed_count_{table}", model=embedder.name)) for table in _TABLES)
    done = 0
    if progress:
        progress(0, total)
    for _ in range(_MAX_PASSES):
        pass_done = 0
        for table in _TABLES:
            after = 0
            while True:
                rows = db.all(
                    f"reembed_next_{table}",
                    after=after,
                    model=embedder.name,
                    limit=batch,
                )
                if not rows:
                    break
                vectors = embedder.embed([row["content"] for row in rows])
                with db.transaction() as tx:
                    tx.executemany(
                        _TABLES[table],
                        [
                            {"id": row["id"], "embedding": vector, "model": embedder.name}
                            for row, vector in zip(rows, vectors, strict=True)
                        ],
                    )
                after = rows[-1]["id"]
                counts[table] += len(rows)
                pass_done += len(rows)
                done += len(rows)
                if progress:
                    progress(done, max(total, done))
        if pass_done == 0:
            break

    remaining = sum(int(db.scalar(f"reembed_count_{table}", model=embedder.name)) for table in _TABLES)
    if remaining:
        raise errors.Conflict(
            f"{remaining} rows were written with another model while reembed ran; stop the old "
            "writers and run `stash reembed` again (it resumes)"
        )
    if _schema_needs_repair(store):
        _ddl(store, "reembed_restore_constraints", dim=embedder.dim)

    with db.transaction() as tx:
        tx.execute("embedding_lock_set", key=LOCK_MODEL_KEY, value=embedder.name)
        tx.execute("embedding_lock_set", key=LOCK_DIM_KEY, value=str(embedder.dim))
        tx.execute("embedding_lock_set", key=LOCK_ENDPOINT_KEY, value=embedder.endpoint)

    return ReembedReport(
        model=embedder.name,
        dim=embedder.dim,
        endpoint=embedder.endpoint,
        previous_model=previous.get(LOCK_MODEL_KEY),
        previous_dim=int(previous[LOCK_DIM_KEY]) if LOCK_DIM_KEY in previous else old_dim,
        dims_changed=dims_changed,
        episodes=counts["episodes"],
        facts=counts["facts"],
        entities=counts["entities"],
        rows_written=counts["episodes"] + counts["facts"],
        duration_s=round(time.monotonic() - started, 3),
    )


def _ddl(store: Store, name: str, **literals: int) -> None:
    """Run a DDL block from embedding.sql; DDL takes no bind parameters, so ints go in as literals."""
    statement = sql.SQL(query(name)).format(**{key: sql.Literal(int(value)) for key, value in literals.items()})
    with store.db.transaction() as tx, translate_errors():
        tx.conn.execute(statement)


def _schema_needs_repair(store: Store) -> bool:
    row = store.db.one("reembed_schema_state")
    return bool(row) and not all(row.values())
