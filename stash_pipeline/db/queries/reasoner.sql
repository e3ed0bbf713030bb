-- reasoner_mode_get --
-- The remembered structured-output mode of one endpoint + model.
SELECT endpoint, model, mode, reason, verified_at, updated_at
  FROM reasoner_modes WHERE endpoint = %(endpoint)s AND model = %(model)s

-- reasoner_mode_set --
-- Step down to another mode after a refusal (the reason is the server's message).
INSERT INTO reasoner_modes (endpoint, model, mode, reason, verified_at, updated_at)
VALUES (%(endpoint)s, %(model)s, %(mode)s, %(reason)s, NULL, now())
ON CONFLICT (endpoint, model) DO UPDATE
   SET mode = EXCLUDED.mode, reason = EXCLUDED.reason, verified_at = NULL, updated_at = now()

-- reasoner_mode_verified --
-- The mode answered: record it (or refresh its verification time).
INSERT INTO reasoner_modes (endpoint, model, mode, verified_at, updated_at)
VALUES (%(endpoint)s, %(model)s, %(mode)s, now(), now())
ON CONFLICT (endpoint, model) DO UPDATE
   SET mode = EXCLUDED.mode, verified_at = now(), updated_at = now(),
       reason = CASE WHEN reasoner_modes.mode = EXCLUDED.mode THEN reasoner_modes.reason END

-- reasoner_modes_all --
-- Every remembered mode, for `stash doctor` and `stash consolidate status`.
SELECT endpoint, model, mode, reason, verified_at, updated_at
  FROM reasoner_modes ORDER BY endpoint, model
