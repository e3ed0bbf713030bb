-- Consolidation runner: checkpoints, backlog, dead letters, model-call log.

-- stage_backlog --
-- Per (namespace, stage): checkpoint cursor vs the stage's head, in ONE indexed query for
-- all namespaces (namespace_ids NULL) or the given ids. The stages arrive as parallel
-- arrays built from the stage table (stash_pipeline.stages.backlog_parameters): name,
-- source table, the upstream stage whose cursor is the head instead of the source's
-- newest id (NULL = none), a second source watched through aux_cursor (NULL = none) and
-- a gate (NULL = none). Rows come in stage-table order per namespace. Used by
-- consolidation.status() and the Dagster watermark sensor; keep the column names.
WITH ns AS (
    SELECT n.id, n.slug
    FROM namespaces n
    WHERE %(namespace_ids)s::bigint[] IS NULL OR n.id = ANY(%(namespace_ids)s::bigint[])
), heads AS (
    SELECT ns.id, ns.slug,
           -- the episode head stops before the first live episode waiting for its vector.
           -- A head is the newest row at or before (namespace, bound), found by a row
           -- comparison ordered by both columns, which only a (namespace_id, id) index can
           -- serve; "namespace_id = x" with max(id) was planned once for every namespace as
           -- a backward walk of the primary key, through the whole table for a namespace
           -- without rows. The row found is the namespace's, or a namespace's before it (none).
           COALESCE((SELECT CASE WHEN e.namespace_id = ns.id THEN e.id END FROM episodes e
                     WHERE e.namespace_id <= ns.id AND e.deleted_at IS NULL
                       AND (e.namespace_id, e.id) < (ns.id, COALESCE((SELECT min(p.id) FROM episodes p
                                            WHERE p.namespace_id = ns.id AND p.embedding IS NULL
                                              AND p.deleted_at IS NULL), 9223372036854775807))
                     ORDER BY e.namespace_id DESC, e.id DESC LIMIT 1), 0) AS episode_head,
           -- profile facts are the profiles stage's output, no stage's input: not in the head
           COALESCE((SELECT CASE WHEN f.namespace_id = ns.id THEN f.id END FROM facts f
                     WHERE f.namespace_id <= ns.id AND (f.namespace_id, f.id) <= (ns.id, 9223372036854775807)
                       AND f.origin <> 'profile'
                     ORDER BY f.namespace_id DESC, f.id DESC LIMIT 1), 0) AS fact_head,
           COALESCE((SELECT max(x.id) FROM failures x
                     WHERE x.namespace_id = ns.id AND x.deleted_at IS NULL), 0) AS failure_head,
           COALESCE((SELECT max(r.id) FROM profile_requests r WHERE r.namespace_id = ns.id), 0)
               AS profile_request_head,
           EXISTS (SELECT 1 FROM goals g WHERE g.namespace_id = ns.id AND g.status = 'active'
                                           AND g.deleted_at IS NULL) AS has_goal,
           EXISTS (SELECT 1 FROM hypotheses h WHERE h.namespace_id = ns.id
                                                AND h.status IN ('proposed', 'testing')
                                                AND h.deleted_at IS NULL) AS has_hypothesis
    FROM ns
), stages AS (
    SELECT * FROM unnest(%(stages)s::text[], %(sources)s::text[], %(head_stages)s::text[],
                         %(aux_sources)s::text[], %(gates)s::text[])
                  WITH ORDINALITY AS s(stage, source, head_stage, aux_source, gate, ord)
), joined AS (
    SELECT h.id, h.slug, s.stage, s.ord, s.source,
           COALESCE(c.cursor, 0) AS cursor,
           COALESCE(c.aux_cursor, 0) AS aux_cursor,
           c.last_run_at, c.last_status,
           CASE WHEN s.head_stage IS NOT NULL THEN COALESCE(u.cursor, 0)
                WHEN s.source = 'episodes' THEN h.episode_head
                WHEN s.source = 'facts' THEN h.fact_head
                WHEN s.source = 'failures' THEN h.failure_head
                ELSE 0
           END AS head,
           CASE s.aux_source
               WHEN 'episodes' THEN h.episode_head
               WHEN 'facts' THEN h.fact_head
               WHEN 'failures' THEN h.failure_head
               WHEN 'profile_requests' THEN h.profile_request_head
               ELSE 0
           END AS aux_head,
           CASE s.gate
               WHEN 'active_goal' THEN h.has_goal
               WHEN 'open_hypothesis' THEN h.has_hypothesis
               WHEN 'failure' THEN h.failure_head > 0
               ELSE true
           END AS gate_open
    FROM heads h
    CROSS JOIN stages s
    LEFT JOIN stage_checkpoints c ON c.namespace_id = h.id AND c.stage = s.stage
    LEFT JOIN stage_checkpoints u ON u.namespace_id = h.id AND u.stage = s.head_stage
)
SELECT id AS namespace_id, slug, stage, cursor, head,
       source <> 'none' AND gate_open AND (head > cursor OR aux_head > aux_cursor) AS has_work,
       aux_cursor, aux_head, last_run_at, last_status, gate_open
FROM joined
ORDER BY slug, ord

-- consolidation_backlog_counts --
-- Exact number of source rows between each (namespace, stage) cursor and its head, for
-- status displays (the sensor only needs stage_backlog's has_work). Ids are global per
-- table, so head - cursor alone would count other namespaces' rows too. The range is
-- written as row comparisons, (namespace, cursor) < (namespace_id, id) <= (namespace,
-- head), which only a (namespace_id, id) index serves: as "namespace_id = x AND id > c"
-- the plan made once for every pair was now and then a range of the primary key, reading
-- every namespace's rows in it.
-- %(count_limit)s (NULL: none) stops each count there, for a display that says "at least".
SELECT x.namespace_id, x.stage,
       CASE x.source
           WHEN 'episodes' THEN (SELECT count(*) FROM (
                                 SELECT 1 FROM episodes e
                                 WHERE (e.namespace_id, e.id) > (x.namespace_id, x.cursor)
                                   AND (e.namespace_id, e.id) <= (x.namespace_id, x.head)
                                   AND e.deleted_at IS NULL LIMIT %(count_limit)s) waiting)
           WHEN 'facts' THEN (SELECT count(*) FROM (
                              SELECT 1 FROM facts f
                              WHERE (f.namespace_id, f.id) > (x.namespace_id, x.cursor)
                                AND (f.namespace_id, f.id) <= (x.namespace_id, x.head)
                                AND f.origin <> 'profile' LIMIT %(count_limit)s) waiting)
           ELSE 0
       END AS backlog
FROM unnest(%(namespace_ids)s::bigint[], %(stages)s::text[], %(sources)s::text[],
            %(cursors)s::bigint[], %(heads)s::bigint[]) AS x(namespace_id, stage, source, cursor, head)

-- consolidation_ensure_checkpoint --
-- Get-or-create the checkpoint row of one (namespace, stage).
WITH ins AS (
    INSERT INTO stage_checkpoints (namespace_id, stage) VALUES (%(namespace_id)s, %(stage)s)
    ON CONFLICT (namespace_id, stage) DO NOTHING
    RETURNING *
)
SELECT * FROM ins
UNION ALL
SELECT * FROM stage_checkpoints WHERE namespace_id = %(namespace_id)s AND stage = %(stage)s

-- consolidation_advance_checkpoint --
-- Move a stage's cursors forward (never backwards), in the batch's transaction.
UPDATE stage_checkpoints
   SET cursor = GREATEST(cursor, %(cursor)s::bigint),
       aux_cursor = GREATEST(aux_cursor, %(aux_cursor)s::bigint),
       updated_at = now()
 WHERE namespace_id = %(namespace_id)s AND stage = %(stage)s

-- consolidation_finish_run --
-- Record the outcome of one stage run (cursors untouched).
INSERT INTO stage_checkpoints (namespace_id, stage, last_run_at, last_status, last_report)
VALUES (%(namespace_id)s, %(stage)s, now(), %(status)s, %(report)s)
ON CONFLICT (namespace_id, stage) DO UPDATE
   SET last_run_at = now(), last_status = EXCLUDED.last_status,
       last_report = EXCLUDED.last_report, updated_at = now()

-- consolidation_record_model_call --
-- One HTTP attempt against the reasoning model (own transaction; cost accounting).
INSERT INTO model_calls (namespace_id, stage, run_id, model, endpoint, prompt_tokens,
                         completion_tokens, latency_ms, attempt, ok, error)
VALUES (%(namespace_id)s, %(stage)s, %(run_id)s, %(model)s, %(endpoint)s, %(prompt_tokens)s,
        %(completion_tokens)s, %(latency_ms)s, %(attempt)s, %(ok)s, %(error)s)

-- consolidation_dead_letter_fail --
-- Count one failure of an item; 'dead' once attempts reach max_attempts.
INSERT INTO dead_letters (namespace_id, stage, item_kind, item_id, attempts, last_error, status, payload)
VALUES (%(namespace_id)s, %(stage)s, %(item_kind)s, %(item_id)s, 1, %(error)s,
        CASE WHEN 1 >= %(max_attempts)s THEN 'dead' ELSE 'pending' END, %(payload)s)
ON CONFLICT (namespace_id, stage, item_kind, item_id) DO UPDATE
   SET attempts = CASE WHEN dead_letters.status IN ('pending', 'dead') THEN dead_letters.attempts + 1 ELSE 1 END,
       last_error = EXCLUDED.last_error,
       status = CASE WHEN (CASE WHEN dead_letters.status IN ('pending', 'dead')
                               THEN dead_letters.attempts + 1 ELSE 1 END) >= %(max_attempts)s
                     THEN 'dead' ELSE 'pending' END,
       updated_at = now()
RETURNING status, attempts

-- consolidation_dead_letter_resolve --
-- An item that failed before has now been processed: mark its dead letter 'retried'.
UPDATE dead_letters SET status = 'retried', updated_at = now()
 WHERE namespace_id = %(namespace_id)s AND stage = %(stage)s AND item_kind = %(item_kind)s
   AND item_id = ANY(%(item_ids)s::bigint[]) AND status = 'pending'

-- consolidation_dead_letter_pending --
-- Item ids of one stage waiting to be retried, oldest first.
SELECT item_id FROM dead_letters
 WHERE namespace_id = %(namespace_id)s AND stage = %(stage)s AND item_kind = %(item_kind)s
   AND status = 'pending'
 ORDER BY item_id
 LIMIT %(limit)s

-- consolidation_dead_letters_due --
-- Per (namespace, stage): pending dead letters whose next try is due. An item that failed
-- n times is due backoff_s * 2^(n-1) after its last failure (capped at max_backoff_s);
-- one an operator re-queued (attempts 0) at once. `mark` changes whenever one of them
-- does, for run keys.
SELECT d.namespace_id, d.stage, count(*) AS due,
       md5(string_agg(d.id || ':' || d.attempts || ':' || d.updated_at, ',' ORDER BY d.id)) AS mark
FROM dead_letters d
WHERE d.status = 'pending'
  AND (%(namespace_ids)s::bigint[] IS NULL OR d.namespace_id = ANY(%(namespace_ids)s::bigint[]))
  AND d.updated_at + make_interval(secs => CASE WHEN d.attempts <= 0 THEN 0
          ELSE least(%(backoff_s)s * power(2, least(d.attempts - 1, 30)), %(max_backoff_s)s) END) <= now()
GROUP BY d.namespace_id, d.stage

-- consolidation_dead_letter_counts --
-- Pending/dead dead-letter counts per (namespace, stage).
SELECT namespace_id, stage,
       count(*) FILTER (WHERE status = 'pending') AS pending,
       count(*) FILTER (WHERE status = 'dead') AS dead
FROM dead_letters
WHERE %(namespace_ids)s::bigint[] IS NULL OR namespace_id = ANY(%(namespace_ids)s::bigint[])
GROUP BY namespace_id, stage

-- consolidation_dead_letter_list --
-- Dead letters in the given namespaces, filtered by stage/status, newest first.
SELECT d.*, n.slug AS namespace
FROM dead_letters d JOIN namespaces n ON n.id = d.namespace_id
WHERE d.namespace_id = ANY(%(namespace_ids)s::bigint[])
  AND (%(stage)s::text IS NULL OR d.stage = %(stage)s)
  AND (%(status)s::text IS NULL OR d.status = %(status)s)
ORDER BY d.updated_at DESC, d.id DESC
LIMIT %(limit)s OFFSET %(offset)s

-- consolidation_dead_letter_retry --
-- Put dead letters back in the queue with a fresh attempt count.
UPDATE dead_letters SET status = 'pending', attempts = 0, updated_at = now()
 WHERE id = ANY(%(ids)s::bigint[])
   AND (%(namespace_ids)s::bigint[] IS NULL OR namespace_id = ANY(%(namespace_ids)s::bigint[]))
RETURNING id

-- consolidation_dead_letter_drop --
-- Give up on dead letters for good (kept for the record as 'dropped').
UPDATE dead_letters SET status = 'dropped', updated_at = now()
 WHERE id = ANY(%(ids)s::bigint[])
   AND (%(namespace_ids)s::bigint[] IS NULL OR namespace_id = ANY(%(namespace_ids)s::bigint[]))
RETURNING id

-- consolidation_dead_letter_retry_all --
-- Re-queue every dead item of the given namespaces (optionally one stage).
UPDATE dead_letters SET status = 'pending', attempts = 0, updated_at = now()
 WHERE namespace_id = ANY(%(namespace_ids)s::bigint[]) AND status = 'dead'
   AND (%(stage)s::text IS NULL OR stage = %(stage)s)
RETURNING id

-- consolidation_dead_letter_drop_all --
-- Give up on every pending/dead item of the given namespaces (optionally one stage).
UPDATE dead_letters SET status = 'dropped', updated_at = now()
 WHERE namespace_id = ANY(%(namespace_ids)s::bigint[]) AND status IN ('pending', 'dead')
   AND (%(stage)s::text IS NULL OR stage = %(stage)s)
RETURNING id
