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

-- reasoner_breaker_get --
-- An endpoint's failed requests in a row (a row of settings, which also keeps the last
-- error; none = no failure since its last answer), when the streak began and how long
-- ago the last one was.
SELECT (value::jsonb ->> 'failures')::int AS failures, value::jsonb ->> 'since' AS since,
       value::jsonb ->> 'error' AS error,
       extract(epoch FROM now() - updated_at) AS age_s
  FROM settings WHERE key = %(key)s

-- reasoner_breaker_fail --
-- Count one failed request; a streak whose last failure is older than the cool-down
-- starts again at 1.
INSERT INTO settings (key, value)
VALUES (%(key)s, jsonb_build_object('failures', 1, 'error', %(error)s::text,
                                    'since', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS "UTC"'))::text)
ON CONFLICT (key) DO UPDATE
   SET value = CASE WHEN settings.updated_at > now() - make_interval(secs => %(cooldown_s)s)
                    THEN jsonb_build_object('failures', (settings.value::jsonb ->> 'failures')::int + 1,
                                            'error', %(error)s::text,
                                            'since', settings.value::jsonb ->> 'since')::text
                    ELSE EXCLUDED.value END,
       updated_at = now()
RETURNING (value::jsonb ->> 'failures')::int AS failures, value::jsonb ->> 'since' AS since

-- reasoner_breaker_clear --
-- The endpoint answered: forget its failures.
DELETE FROM settings WHERE key = %(key)s
