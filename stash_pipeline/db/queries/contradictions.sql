-- Contradictions: list and resolve with an action on the facts
-- (stash_pipeline.memory.contradictions).

-- contradiction_list --
-- Contradictions in the given namespaces, newest first; resolved ones only when asked.
SELECT c.*, n.slug AS namespace
FROM contradictions c JOIN namespaces n ON n.id = c.namespace_id
WHERE c.namespace_id = ANY(%(ns_ids)s)
  AND (%(include_resolved)s OR NOT c.resolved)
ORDER BY c.created_at DESC, c.id DESC
LIMIT %(limit)s OFFSET %(offset)s

-- contradiction_get_for_update --
-- One contradiction, locked for resolution.
SELECT c.*, n.slug AS namespace
FROM contradictions c JOIN namespaces n ON n.id = c.namespace_id
WHERE c.id = %(id)s
FOR UPDATE OF c

-- contradiction_get --
-- One contradiction with its namespace slug.
SELECT c.*, n.slug AS namespace
FROM contradictions c JOIN namespaces n ON n.id = c.namespace_id
WHERE c.id = %(id)s

-- contradiction_lock_facts --
-- Lock the two facts of a contradiction before changing them.
SELECT id, withdrawn_at, withdrawn_reason, superseded_by, valid_until FROM facts
WHERE id = ANY(%(ids)s)
ORDER BY id
FOR UPDATE

-- contradiction_withdraw_facts --
-- Withdraw both facts of a pair (action 'neither'); the lineage cascade follows.
UPDATE facts
   SET withdrawn_at = now(), withdrawn_reason = %(reason)s, updated_at = now(),
       retired_at = COALESCE(retired_at, now())
 WHERE id = ANY(%(ids)s) AND withdrawn_at IS NULL
RETURNING id

-- contradiction_mark_resolved --
-- Record the caller's resolution.
UPDATE contradictions
   SET resolved = true, resolution = %(resolution)s, resolved_at = now(), resolution_note = %(note)s
 WHERE id = %(id)s
