-- Goals, their tree and their append-only notes (stash_pipeline.memory.goals).

-- goal_insert --
-- A new active goal.
INSERT INTO goals (namespace_id, parent_id, content, priority)
VALUES (%(namespace_id)s, %(parent_id)s, %(content)s, %(priority)s)
RETURNING id

-- goal_get --
-- One goal (deleted ones included; the caller decides) with its namespace slug. Its
-- parent_id is shown only when the parent lies in the caller's namespaces (visible_ids;
-- all when all_visible): a sub-namespace never learns the id of a parent goal above it.
SELECT g.id, g.namespace_id, n.slug AS namespace,
       CASE WHEN %(all_visible)s OR p.namespace_id = ANY(%(visible_ids)s::bigint[])
            THEN g.parent_id END AS parent_id,
       g.content, g.status, g.priority, g.completed_at, g.abandoned_at,
       g.created_at, g.updated_at, g.deleted_at
FROM goals g JOIN namespaces n ON n.id = g.namespace_id
LEFT JOIN goals p ON p.id = g.parent_id
WHERE g.id = %(id)s

-- goal_lock --
-- Lock one goal row before a change.
SELECT id FROM goals WHERE id = %(id)s FOR UPDATE

-- goal_list --
-- Non-deleted goals in the given namespaces: highest priority first, then oldest. As in
-- goal_get, a parent outside the caller's namespaces is neither shown nor filtered by.
SELECT g.id, g.namespace_id, n.slug AS namespace,
       CASE WHEN %(all_visible)s OR p.namespace_id = ANY(%(visible_ids)s::bigint[])
            THEN g.parent_id END AS parent_id,
       g.content, g.status, g.priority, g.completed_at, g.abandoned_at,
       g.created_at, g.updated_at, g.deleted_at
FROM goals g JOIN namespaces n ON n.id = g.namespace_id
LEFT JOIN goals p ON p.id = g.parent_id
WHERE g.namespace_id = ANY(%(ns_ids)s)
  AND g.deleted_at IS NULL
  AND (%(status)s::text IS NULL OR g.status = %(status)s::text)
  AND (%(parent_id)s::bigint IS NULL
       OR g.parent_id = %(parent_id)s::bigint
          AND (%(all_visible)s OR p.namespace_id = ANY(%(visible_ids)s::bigint[])))
  AND (NOT %(top_level_only)s OR g.parent_id IS NULL)
ORDER BY g.priority DESC, g.created_at, g.id
LIMIT %(limit)s OFFSET %(offset)s

-- goal_sub_goal_counts --
-- Direct, non-deleted children of a goal counted by status.
SELECT count(*) AS total,
       count(*) FILTER (WHERE status = 'active') AS active,
       count(*) FILTER (WHERE status = 'completed') AS completed,
       count(*) FILTER (WHERE status = 'abandoned') AS abandoned
FROM goals
WHERE parent_id = %(id)s AND deleted_at IS NULL

-- goal_notes_for --
-- The notes of one goal, oldest first.
SELECT * FROM goal_notes WHERE goal_id = %(goal_id)s ORDER BY id

-- goal_update --
-- Change content and/or priority; NULL keeps the current value (0 is a priority).
UPDATE goals
   SET content = COALESCE(%(content)s, content),
       priority = COALESCE(%(priority)s::integer, priority),
       updated_at = now()
 WHERE id = %(id)s

-- goal_set_completed --
-- active -> completed.
UPDATE goals SET status = 'completed', completed_at = now(), updated_at = now()
WHERE id = %(id)s AND status = 'active'

-- goal_set_abandoned --
-- active -> abandoned.
UPDATE goals SET status = 'abandoned', abandoned_at = now(), updated_at = now()
WHERE id = %(id)s AND status = 'active'

-- goal_parent_ready --
-- Whether an active, non-deleted goal has at least one non-abandoned child and all of
-- its non-abandoned, non-deleted children are completed (ancestor auto-complete rule).
-- The caller locks the goal first (goal_lock), so this statement's fresh snapshot sees
-- every sibling change committed by a concurrent complete/abandon.
SELECT g.id, g.parent_id, g.namespace_id,
       (g.status = 'active' AND g.deleted_at IS NULL
        AND EXISTS (SELECT 1 FROM goals c WHERE c.parent_id = g.id AND c.deleted_at IS NULL
                    AND c.status <> 'abandoned')
        AND NOT EXISTS (SELECT 1 FROM goals c WHERE c.parent_id = g.id AND c.deleted_at IS NULL
                        AND c.status = 'active')) AS ready
FROM goals g
WHERE g.id = %(id)s

-- goal_soft_delete_tree --
-- Soft-delete a goal and all its non-deleted descendants; returns the ids deleted.
WITH RECURSIVE tree AS (
    SELECT id FROM goals WHERE id = %(id)s AND deleted_at IS NULL
  UNION
    SELECT c.id FROM goals c JOIN tree t ON c.parent_id = t.id WHERE c.deleted_at IS NULL
)
UPDATE goals SET deleted_at = now(), updated_at = now()
WHERE id IN (SELECT id FROM tree)
RETURNING id

-- goal_insert_note --
-- Append a note; a model note for the same (goal, fact, kind) is written once.
INSERT INTO goal_notes (goal_id, namespace_id, author, kind, content, confidence, fact_id)
VALUES (%(goal_id)s, %(namespace_id)s, %(author)s, %(kind)s, %(content)s, %(confidence)s, %(fact_id)s)
ON CONFLICT (goal_id, fact_id, kind) WHERE author = 'model' DO NOTHING
RETURNING *
