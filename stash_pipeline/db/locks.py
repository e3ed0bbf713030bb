"""Every PostgreSQL advisory lock Stash takes, named in one place, and the one way to hold one.

Advisory locks use the two-int4-key form ``(key1, key2)``; all of them share one key
space per database, so two holders must never pick the same pair by accident.

=====================  ========================================  ==================  ======================
lock                   key                                       level               holder
=====================  ========================================  ==================  ======================
id ordering            ``(7311, namespace_id % 2147483647)``     transaction         ``assign_ordered_id()``
                                                                                     trigger (migration
                                                                                     ``0001_initial.sql``)
schema migration       ``MIGRATION_LOCK = (7312, 1)``            session, waits      ``db/migrations/env.py``
re-embedding           ``REEMBED_LOCK = (7312, 3)``              session, try        ``memory/reembed.py``
stage run              ``stage_lock(stage, namespace_id)``       session, try/wait   ``consolidation.run_stage``
                       = ``(crc32 of the stage name, namespace)``
=====================  ========================================  ==================  ======================

The id-ordering trigger is plpgsql and cannot import this module: ``ID_ORDER_KEY`` below
must stay equal to the literal in ``0001_initial.sql`` (a unit test reads the file).
Every ``(ID_ORDER_KEY, n)`` pair belongs to the writers of namespace ``n``, so the
whole-database locks use their own first key (``MAINTENANCE_KEY``) — under 7311 a
re-embedding would block every write to namespace 3 for its whole run, and a write in
flight there would make it report "another reembed is running". A stage's first key is
derived from its name and never equals either, so a stage run never waits on them.

Session-level locks are held on a connection dedicated to the lock (``session_lock``):
it commits right after taking the lock so it never sits idle in a transaction, and the
lock lives until it is released or that connection closes (a crashed holder frees it).
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterator

import psycopg
from psycopg.rows import tuple_row

from stash_pipeline.db.gateway import translate_errors
from stash_pipeline.db.sql import query

#: A two-int4 advisory lock key.
LockKey = tuple[int, int]

#: First key of the per-namespace id-ordering lock (hard-coded in 0001_initial.sql).
ID_ORDER_KEY = 7311
#: First key of the whole-database maintenance locks below.
MAINTENANCE_KEY = 7312
#: ``stash migrate``: one migrator at a time; a second one waits.
MIGRATION_LOCK: LockKey = (MAINTENANCE_KEY, 1)
#: ``stash reembed``: one re-embedding at a time; a second one is refused.
REEMBED_LOCK: LockKey = (MAINTENANCE_KEY, 3)

_INT4_MAX = 2147483647


def stage_lock_key(stage: str) -> int:
    """The first (int4) key of a stage's run lock, derived from its name (never a reserved first key)."""
    key = zlib.crc32(f"stash-stage:{stage}".encode()) & _INT4_MAX
    while key in (ID_ORDER_KEY, MAINTENANCE_KEY):
        key += 1
    return key


def stage_lock(stage: str, namespace_id: int) -> LockKey:
    """The run lock of one (stage, namespace): one writer per stage and namespace."""
    return stage_lock_key(stage), namespace_id % _INT4_MAX


@contextlib.contextmanager
def session_lock(conn: psycopg.Connection, key: LockKey, *, wait: bool) -> Iterator[bool]:
    """Hold the session-level advisory lock ``key`` on ``conn`` for the block.

    ``conn`` must be dedicated to the lock for the block's duration (other work on it
    would run inside the locked session, which is harmless, but committing or closing it
    is the caller's business). Yields True once held; with ``wait=False`` yields False
    at once when another session holds it. Released on exit, also on an exception.
    """
    params = {"key1": key[0], "key2": key[1]}
    with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute(query("lock_wait" if wait else "lock_try"), params).fetchone()
    conn.commit()  # the lock is session-level; do not sit idle in a transaction
    held = bool(row and row[0])
    try:
        yield held
    finally:
        if held:
            with translate_errors(), conn.cursor(row_factory=tuple_row) as cur:
                cur.execute(query("lock_release"), params)
            conn.commit()
