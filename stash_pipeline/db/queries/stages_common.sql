-- Inputs shared by the fact-driven consolidation stages.

-- stage_facts_after --
-- The next facts after a stage cursor (optionally up to an upper id), ALL of them so the
-- cursor can pass retired ones; "current" tells which ones the stage may use. Profile
-- facts restate their members, so no stage takes them as input.
SELECT id, content, entity, property, value, confidence,
       (origin <> 'profile' AND withdrawn_at IS NULL AND valid_from <= now()
        AND (valid_until IS NULL OR valid_until > now())) AS current
  FROM facts
 WHERE namespace_id = %(namespace_id)s AND id > %(cursor)s
   AND (%(upper)s::bigint IS NULL OR id <= %(upper)s::bigint)
 ORDER BY id
 LIMIT %(limit)s

-- stage_current_facts_by_ids --
-- Current facts by id (dead-letter retries); retired ones (and profiles) are not fed to stages.
SELECT id, content, entity, property, value, confidence, true AS current
  FROM facts
 WHERE namespace_id = %(namespace_id)s AND id = ANY(%(ids)s::bigint[]) AND origin <> 'profile'
   AND withdrawn_at IS NULL AND valid_from <= now() AND (valid_until IS NULL OR valid_until > now())
 ORDER BY id

-- stage_checkpoint_cursor --
-- Another stage's cursor in the same namespace (patterns read the relationships cursor).
SELECT COALESCE((SELECT cursor FROM stage_checkpoints
                  WHERE namespace_id = %(namespace_id)s AND stage = %(stage)s), 0) AS cursor
