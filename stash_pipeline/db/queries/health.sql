-- Pipeline health for people (the console, stash_pipeline/consolidation/health.py): the
-- namespaces of the caller's trees a page at a time, their model calls and open dead
-- letters. Trees come as %(all_namespaces)s / %(ids)s (memory.scope.read_scope); the
-- stages' cursors and backlog come from consolidation.sql's stage_backlog and counts.

-- health_namespaces --
-- One page of the trees' namespaces by path, each with how many the trees hold in all.
SELECT n.id, n.slug, count(*) OVER () AS total
FROM namespaces n
WHERE %(all_namespaces)s OR n.id = ANY(%(ids)s::bigint[])
ORDER BY n.slug
LIMIT %(limit)s OFFSET %(offset)s

-- health_model_calls --
-- Per namespace of the page and stage: the model calls since %(since)s (calls, tokens in
-- and out, failed calls and the newest failure's error) and the newest call ever. Each
-- reads one range of the (namespace_id, stage, created_at) index.
SELECT n.namespace_id, s.stage, w.calls, w.tokens_in, w.tokens_out, w.errors,
       (SELECT left(c.error, 2000) FROM model_calls c
         WHERE c.namespace_id = n.namespace_id AND c.stage = s.stage AND c.created_at >= %(since)s AND NOT c.ok
         ORDER BY c.created_at DESC LIMIT 1) AS last_error,
       (SELECT max(c.created_at) FROM model_calls c
         WHERE c.namespace_id = n.namespace_id AND c.stage = s.stage) AS last_call_at
FROM unnest(%(namespace_ids)s::bigint[]) AS n(namespace_id)
CROSS JOIN unnest(%(stages)s::text[]) AS s(stage)
CROSS JOIN LATERAL (
    SELECT count(*) AS calls, COALESCE(sum(c.prompt_tokens), 0) AS tokens_in,
           COALESCE(sum(c.completion_tokens), 0) AS tokens_out, count(*) FILTER (WHERE NOT c.ok) AS errors
      FROM model_calls c
     WHERE c.namespace_id = n.namespace_id AND c.stage = s.stage AND c.created_at >= %(since)s
) w

-- health_dead_letters --
-- The trees' open dead letters (pending: retried by the next runs; dead: waiting for an
-- operator), newest first, with their error (its first 2000 characters) and how many
-- are open in all.
SELECT d.id, n.slug AS namespace, d.stage, d.item_kind, d.item_id, d.attempts,
       left(d.last_error, 2000) AS last_error, d.status, d.created_at, d.updated_at,
       count(*) OVER () AS total
FROM dead_letters d JOIN namespaces n ON n.id = d.namespace_id
WHERE (%(all_namespaces)s OR d.namespace_id = ANY(%(ids)s::bigint[])) AND d.status IN ('pending', 'dead')
ORDER BY d.updated_at DESC, d.id DESC
LIMIT %(limit)s
