-- Facts stage and the shared contradiction check.

-- stage_facts_episodes_after --
-- The next batch of live episodes after the facts cursor (with vectors for clustering,
-- occurred_at: a fact's event time starts at its evidence, and metadata: session/thread ids
-- and speakers make conversation windows), stopping before the namespace's
-- first live episode still waiting for its vector: the cursor never passes an episode the
-- stage could not cluster yet.
SELECT id, content, embedding, occurred_at, metadata FROM episodes
 WHERE namespace_id = %(namespace_id)s AND id > %(cursor)s AND deleted_at IS NULL
   AND id < COALESCE((SELECT min(p.id) FROM episodes p
                      WHERE p.namespace_id = %(namespace_id)s AND p.embedding IS NULL AND p.deleted_at IS NULL),
                     9223372036854775807)
 ORDER BY id
 LIMIT %(limit)s

-- stage_facts_episodes_by_ids --
-- Live episodes by id (dead-letter retries).
SELECT id, content, embedding, occurred_at, metadata FROM episodes
 WHERE namespace_id = %(namespace_id)s AND id = ANY(%(ids)s::bigint[]) AND deleted_at IS NULL
 ORDER BY id

-- stage_facts_thread_before --
-- Up to %(limit)s live turns of one conversation thread just before %(before_id)s, newest
-- first: the thread is a metadata key = value (%(meta_key)s/%(meta_value)s), a dia_id
-- session prefix ("D3" of "D3:7", %(dia_session)s), or, when neither is given, every turn
-- since %(since)s (time proximity; the caller keeps the speaker-named ones). Only the
-- namespace's %(scan)s episodes before %(before_id)s are looked at, so a thread's first
-- window costs a bounded scan however large the namespace.
SELECT id, content, occurred_at, metadata FROM (
    SELECT id, content, occurred_at, metadata FROM episodes
     WHERE namespace_id = %(namespace_id)s AND id < %(before_id)s AND deleted_at IS NULL
     ORDER BY id DESC
     LIMIT %(scan)s
) recent
 WHERE (%(meta_key)s::text IS NULL OR metadata ->> %(meta_key)s::text = %(meta_value)s::text)
   AND (%(dia_session)s::text IS NULL
        OR regexp_replace(metadata ->> 'dia_id', ':[0-9]+$', '') = %(dia_session)s::text)
   AND (%(since)s::timestamptz IS NULL OR occurred_at >= %(since)s::timestamptz)
 ORDER BY id DESC
 LIMIT %(limit)s

-- stage_facts_known_about --
-- What a conversation window is shown as already known: the current facts of the
-- namespace about its participants (entity, case-insensitive, in %(names)s), the
-- %(limit)s nearest to the window's new turns (%(embedding)s, their mean direction) among
-- the newest %(scan)s. The candidates are materialised first so the distance order is
-- exact over them (no HNSW scan that a filter could empty).
WITH about AS MATERIALIZED (
    SELECT id, content, embedding FROM facts
     WHERE namespace_id = %(namespace_id)s AND lower(entity) = ANY(%(names)s::text[])
       AND origin <> 'profile' AND withdrawn_at IS NULL AND (valid_until IS NULL OR valid_until > now())
     ORDER BY id DESC
     LIMIT %(scan)s
)
SELECT id, content FROM about
 ORDER BY embedding <=> %(embedding)s, id
 LIMIT %(limit)s

-- stage_facts_nearest_current --
-- The current fact nearest to a vector in one namespace, with its cosine similarity (read
-- by the half-precision key's index, 0019; the similarity is full precision). Profiles
-- are not candidates: a new fact reinforces or contradicts a member, not its summary.
SELECT id, confidence, 1 - (embedding <=> %(embedding)s) AS similarity
  FROM facts
 WHERE namespace_id = %(namespace_id)s AND origin <> 'profile'
   AND withdrawn_at IS NULL AND valid_from <= now() AND (valid_until IS NULL OR valid_until > now())
 ORDER BY embedding_key(embedding) <=> embedding_key(%(embedding)s::vector)
 LIMIT 1

-- stage_facts_reinforce --
-- Seeing a fact again: confidence toward 1, one more reinforcement, fresh updated_at.
UPDATE facts
   SET confidence = LEAST(1.0, confidence + (1 - confidence) * %(gain)s),
       reinforcements = reinforcements + 1,
       updated_at = now()
 WHERE id = %(id)s AND namespace_id = %(namespace_id)s
RETURNING id, confidence

-- stage_hnsw_iterative_scan --
-- Let a filtered HNSW scan keep searching until it finds rows of this namespace
-- (pgvector >= 0.8); transaction-local.
SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true) AS mode
