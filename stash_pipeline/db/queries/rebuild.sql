-- Stage rebuilds: withdraw what one stage derived in a namespace, rewind its cursor.

-- rebuild_done --
-- Whether a rebuild of this (namespace, stage) already ran under this token.
SELECT EXISTS (SELECT 1 FROM stage_rebuilds
               WHERE namespace_id = %(namespace_id)s AND stage = %(stage)s AND token = %(token)s) AS done

-- rebuild_withdraw_facts --
-- Withdraw the facts the facts stage synthesised (asserted facts and facts from
-- hypotheses or failure patterns stay); returns the ids changed.
UPDATE facts
   SET withdrawn_at = now(), withdrawn_reason = %(reason)s, updated_at = now(),
       retired_at = COALESCE(retired_at, now())
 WHERE namespace_id = %(namespace_id)s AND origin = 'synthesis' AND withdrawn_at IS NULL
RETURNING id

-- rebuild_withdraw_profiles --
-- Withdraw the profile facts of the namespace (all are gathered by the profiles stage).
UPDATE facts
   SET withdrawn_at = now(), withdrawn_reason = %(reason)s, updated_at = now(),
       retired_at = COALESCE(retired_at, now())
 WHERE namespace_id = %(namespace_id)s AND origin = 'profile' AND withdrawn_at IS NULL
RETURNING id

-- rebuild_withdraw_relationships --
-- Withdraw every live relationship of the namespace (all are extracted by the stage).
UPDATE relationships
   SET withdrawn_at = now(), retired_at = COALESCE(retired_at, now())
 WHERE namespace_id = %(namespace_id)s AND withdrawn_at IS NULL
RETURNING id

-- rebuild_withdraw_causal_links --
-- Withdraw the extracted causal links (asserted links stay).
UPDATE causal_links
   SET withdrawn_at = now(), retired_at = COALESCE(retired_at, now())
 WHERE namespace_id = %(namespace_id)s AND method = 'extracted'
   AND withdrawn_at IS NULL AND deleted_at IS NULL
RETURNING id

-- rebuild_withdraw_patterns --
-- Withdraw every live pattern of the namespace (all are abstracted by the stage).
UPDATE patterns
   SET withdrawn_at = now(), updated_at = now()
 WHERE namespace_id = %(namespace_id)s AND withdrawn_at IS NULL
RETURNING id

-- rebuild_rewind_checkpoint --
-- Put a stage's cursors back to the start; returns where the cursor was (no row: never ran).
UPDATE stage_checkpoints c
   SET cursor = 0, aux_cursor = 0, updated_at = now()
  FROM stage_checkpoints old
 WHERE c.namespace_id = %(namespace_id)s AND c.stage = %(stage)s
   AND old.namespace_id = c.namespace_id AND old.stage = c.stage
RETURNING old.cursor AS cursor_was

-- rebuild_record --
-- Remember one rebuild (what it withdrew, where the cursor was).
INSERT INTO stage_rebuilds (namespace_id, stage, token, cursor_was, withdrawn)
VALUES (%(namespace_id)s, %(stage)s, %(token)s, %(cursor_was)s, %(withdrawn)s)
