-- Decay stage: confidence decay of stale current facts, then expiry.

-- decay_stale_facts --
-- Current facts not updated within the window lose confidence (x factor); refreshes updated_at
-- (the row changed, and it is decay's clock: once per window). No end changes, so a known_at
-- read still skips these facts' history (ends_changed_at, migration 0018).
UPDATE facts
   SET confidence = confidence * %(factor)s, updated_at = now()
 WHERE namespace_id = %(namespace_id)s
   AND withdrawn_at IS NULL AND valid_until IS NULL
   AND updated_at < now() - %(window)s::interval

-- decay_expire_facts --
-- Current facts whose confidence fell below the threshold expire now (valid_until; also
-- their given end, which a recomputed timeline keeps: stash_pipeline.memory.timeline).
UPDATE facts
   SET valid_until = GREATEST(now(), valid_from), given_valid_until = GREATEST(now(), valid_from),
       retired_at = now(), updated_at = now()
 WHERE namespace_id = %(namespace_id)s
   AND withdrawn_at IS NULL AND valid_until IS NULL
   AND confidence < %(threshold)s
