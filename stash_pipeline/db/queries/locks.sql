-- Session-level advisory locks (stash_pipeline/db/locks.py names every key).

-- lock_try --
-- Take a session-level advisory lock if it is free; false when another session holds it.
SELECT pg_try_advisory_lock(%(key1)s::int, %(key2)s::int) AS ok

-- lock_wait --
-- Take a session-level advisory lock, waiting for its holder.
SELECT pg_advisory_lock(%(key1)s::int, %(key2)s::int) IS NOT NULL AS ok

-- lock_release --
-- Release a session-level advisory lock taken by lock_try / lock_wait.
SELECT pg_advisory_unlock(%(key1)s::int, %(key2)s::int) AS ok
