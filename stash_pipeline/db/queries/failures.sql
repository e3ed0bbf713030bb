-- Failures: what went wrong, why, and the lesson (stash_pipeline.memory.failures).

-- failure_insert --
-- A new failure record.
INSERT INTO failures (namespace_id, goal_id, content, reason, lesson)
VALUES (%(namespace_id)s, %(goal_id)s, %(content)s, %(reason)s, %(lesson)s)
RETURNING id

-- failure_get --
-- One failure (deleted ones included; the caller decides) with its namespace slug. Its
-- goal_id is shown only when the goal lies in the caller's namespaces (visible_ids; all
-- when all_visible).
SELECT fl.id, fl.namespace_id, n.slug AS namespace,
       CASE WHEN %(all_visible)s OR g.namespace_id = ANY(%(visible_ids)s::bigint[])
            THEN fl.goal_id END AS goal_id,
       fl.content, fl.reason, fl.lesson, fl.created_at, fl.deleted_at
FROM failures fl JOIN namespaces n ON n.id = fl.namespace_id
LEFT JOIN goals g ON g.id = fl.goal_id
WHERE fl.id = %(id)s

-- failure_list --
-- Non-deleted failures in the given namespaces, newest first.
SELECT fl.id, fl.namespace_id, n.slug AS namespace,
       CASE WHEN %(all_visible)s OR g.namespace_id = ANY(%(visible_ids)s::bigint[])
            THEN fl.goal_id END AS goal_id,
       fl.content, fl.reason, fl.lesson, fl.created_at, fl.deleted_at
FROM failures fl JOIN namespaces n ON n.id = fl.namespace_id
LEFT JOIN goals g ON g.id = fl.goal_id
WHERE fl.namespace_id = ANY(%(ns_ids)s)
  AND fl.deleted_at IS NULL
  AND (%(goal_id)s::bigint IS NULL
       OR fl.goal_id = %(goal_id)s::bigint
          AND (%(all_visible)s OR g.namespace_id = ANY(%(visible_ids)s::bigint[])))
ORDER BY fl.created_at DESC, fl.id DESC
LIMIT %(limit)s OFFSET %(offset)s

-- failure_soft_delete --
-- Soft-delete one failure.
UPDATE failures SET deleted_at = now() WHERE id = %(id)s AND deleted_at IS NULL
