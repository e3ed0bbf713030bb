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

-- contradiction_retire_fact --
-- Retire a fact in favour of another (the timeline rule of stash_pipeline.memory.timeline):
-- its event interval ends where the kept fact's begins, at its own start when the kept
-- fact began earlier (the retired statement is rejected: an empty interval), never later
-- than the end it already has (an expiry or an earlier supersession stays). When the end
-- changes, superseded_by is the kept fact and retired_at now.
WITH new AS (
    SELECT f.id,
           LEAST(COALESCE(f.valid_until, 'infinity'),
                 GREATEST(f.valid_from, (SELECT k.valid_from FROM facts k WHERE k.id = %(superseded_by)s))) AS ends
      FROM facts f WHERE f.id = %(id)s
)
UPDATE facts f
   SET valid_until = new.ends,
       superseded_by = CASE WHEN f.valid_until IS DISTINCT FROM new.ends THEN %(superseded_by)s
                            ELSE COALESCE(f.superseded_by, %(superseded_by)s) END,
       retired_at = CASE WHEN f.valid_until IS DISTINCT FROM new.ends THEN now() ELSE f.retired_at END,
       updated_at = now()
  FROM new
 WHERE f.id = new.id

-- contradiction_restore_fact --
-- Undo a supersession by the other fact of the pair (auto-resolution or keep_new).
-- Only a supersession by exactly that fact is undone; decay expiry is left alone. The
-- interval goes back to its end as first recorded and the fact is Stash's belief again.
UPDATE facts
   SET valid_until = recorded_valid_until, superseded_by = NULL, retired_at = NULL, updated_at = now()
 WHERE id = %(id)s AND superseded_by = %(other_id)s AND withdrawn_at IS NULL

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
