-- admin_stats --
-- Row counts of the given namespaces (all when %(all_namespaces)s), for `stash stats`.
WITH ns AS (
    SELECT id FROM namespaces WHERE %(all_namespaces)s OR id = ANY(%(namespace_ids)s)
)
SELECT
  (SELECT count(*) FROM ns) AS namespaces,
  (SELECT count(*) FROM episodes WHERE namespace_id IN (SELECT id FROM ns) AND deleted_at IS NULL) AS episodes,
  (SELECT count(*) FROM episodes WHERE namespace_id IN (SELECT id FROM ns) AND deleted_at IS NOT NULL)
      AS episodes_forgotten,
  (SELECT count(*) FILTER (WHERE withdrawn_at IS NULL AND valid_from <= now()
                            AND (valid_until IS NULL OR valid_until > now()))
     FROM facts WHERE namespace_id IN (SELECT id FROM ns)) AS facts_current,
  (SELECT count(*) FILTER (WHERE NOT (withdrawn_at IS NULL AND valid_from <= now()
                                  AND (valid_until IS NULL OR valid_until > now())))
     FROM facts WHERE namespace_id IN (SELECT id FROM ns)) AS facts_retired,
  (SELECT count(*) FROM facts WHERE namespace_id IN (SELECT id FROM ns) AND needs_recheck
      AND withdrawn_at IS NULL) AS facts_needing_recheck,
  (SELECT count(*) FROM relationships WHERE namespace_id IN (SELECT id FROM ns) AND withdrawn_at IS NULL)
      AS relationships,
  (SELECT count(*) FROM causal_links WHERE namespace_id IN (SELECT id FROM ns)
      AND withdrawn_at IS NULL AND deleted_at IS NULL) AS causal_links,
  (SELECT count(*) FROM patterns WHERE namespace_id IN (SELECT id FROM ns) AND withdrawn_at IS NULL) AS patterns,
  (SELECT count(*) FROM contradictions WHERE namespace_id IN (SELECT id FROM ns) AND NOT resolved)
      AS contradictions_open,
  (SELECT COALESCE(jsonb_object_agg(status, n), '{}'::jsonb) FROM (
      SELECT status, count(*) AS n FROM hypotheses
      WHERE namespace_id IN (SELECT id FROM ns) AND deleted_at IS NULL GROUP BY status) h) AS hypotheses,
  (SELECT COALESCE(jsonb_object_agg(status, n), '{}'::jsonb) FROM (
      SELECT status, count(*) AS n FROM goals
      WHERE namespace_id IN (SELECT id FROM ns) AND deleted_at IS NULL GROUP BY status) g) AS goals,
  (SELECT count(*) FROM failures WHERE namespace_id IN (SELECT id FROM ns) AND deleted_at IS NULL) AS failures,
  (SELECT count(*) FROM dead_letters WHERE namespace_id IN (SELECT id FROM ns) AND status = 'pending')
      AS dead_letters_pending,
  (SELECT count(*) FROM dead_letters WHERE namespace_id IN (SELECT id FROM ns) AND status = 'dead')
      AS dead_letters_dead,
  (SELECT count(*) FROM model_calls WHERE %(all_namespaces)s OR namespace_id IN (SELECT id FROM ns))
      AS model_calls,
  (SELECT COALESCE(sum(prompt_tokens), 0) FROM model_calls
    WHERE %(all_namespaces)s OR namespace_id IN (SELECT id FROM ns)) AS prompt_tokens,
  (SELECT COALESCE(sum(completion_tokens), 0) FROM model_calls
    WHERE %(all_namespaces)s OR namespace_id IN (SELECT id FROM ns)) AS completion_tokens
