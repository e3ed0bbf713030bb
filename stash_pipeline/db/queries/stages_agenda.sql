-- Goal-progress, hypothesis-evidence and failure-patterns stages.

-- stage_active_goals --
-- Active goals of a namespace (input of goal_progress), oldest first.
SELECT id, content FROM goals
 WHERE namespace_id = %(namespace_id)s AND status = 'active' AND deleted_at IS NULL
 ORDER BY priority DESC, id
 LIMIT 50

-- stage_open_hypotheses --
-- Proposed/testing hypotheses of a namespace with their verification plans.
SELECT id, content, verification_plan, status, confidence FROM hypotheses
 WHERE namespace_id = %(namespace_id)s AND status IN ('proposed', 'testing') AND deleted_at IS NULL
 ORDER BY id
 LIMIT 50

-- stage_live_failures --
-- Live failures of a namespace, newest first (each re-checked against new evidence).
SELECT id, content, reason, lesson, created_at FROM failures
 WHERE namespace_id = %(namespace_id)s AND deleted_at IS NULL
 ORDER BY id DESC
 LIMIT 50

-- stage_new_failures --
-- Live failures after the failure_patterns aux cursor.
SELECT id, content, reason, lesson, created_at FROM failures
 WHERE namespace_id = %(namespace_id)s AND id > %(aux_cursor)s AND deleted_at IS NULL
 ORDER BY id
 LIMIT 50

-- stage_failure_max_id --
-- Highest failure id of a namespace (deleted included), so the aux cursor can pass them.
SELECT COALESCE(max(id), 0) AS head FROM failures WHERE namespace_id = %(namespace_id)s

-- stage_evidence_after --
-- The next episodes after the failure_patterns cursor, kind included (repeat_failure
-- episodes are skipped as evidence by the stage but passed by the cursor).
SELECT id, content, kind, occurred_at FROM episodes
 WHERE namespace_id = %(namespace_id)s AND id > %(cursor)s AND deleted_at IS NULL
 ORDER BY id
 LIMIT %(limit)s

-- stage_recent_evidence --
-- The most recent evidence episodes up to the cursor (what a NEW failure is compared with).
SELECT id, content, kind, occurred_at FROM episodes
 WHERE namespace_id = %(namespace_id)s AND id <= %(cursor)s AND deleted_at IS NULL
   AND kind <> 'repeat_failure'
 ORDER BY id DESC
 LIMIT %(limit)s

-- stage_evidence_by_ids --
-- Live episodes by id (dead-letter retries of failure_patterns).
SELECT id, content, kind, occurred_at FROM episodes
 WHERE namespace_id = %(namespace_id)s AND id = ANY(%(ids)s::bigint[]) AND deleted_at IS NULL
 ORDER BY id

-- stage_repeat_failure_insert --
-- A repeat-failure episode (embedded); idempotent per (failure, evidence) via its key.
INSERT INTO episodes (namespace_id, content, kind, metadata, idempotency_key, embedding, embedding_model)
VALUES (%(namespace_id)s, %(content)s, 'repeat_failure', %(metadata)s, %(idempotency_key)s,
        %(embedding)s, %(embedding_model)s)
ON CONFLICT (namespace_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id
