-- episode_insert_many --
-- Insert a batch in one statement (parallel arrays, one element per episode, in order;
-- the vectors travel in binary: formatting them as text took about a fifth of a batch).
-- Rows are inserted in array order, so the commit-ordered ids follow it. Returns one
-- row per inserted episode, in array order: its id and idempotency key; a key taken by
-- a concurrent writer inserts nothing and returns no row.
WITH ins AS (
    INSERT INTO episodes (namespace_id, content, kind, metadata, idempotency_key,
                          embedding, embedding_model, occurred_at)
    SELECT %(namespace_id)s, content, kind, metadata, idempotency_key,
           embedding, %(embedding_model)s, COALESCE(occurred_at, now())
    FROM unnest(%(contents)s::text[], %(kinds)s::text[], %(metadata)s::jsonb[],
                %(idempotency_keys)s::text[], %(embeddings)b::vector[], %(occurred_at)s::timestamptz[])
         WITH ORDINALITY AS item(content, kind, metadata, idempotency_key, embedding, occurred_at, position)
    ORDER BY position
    ON CONFLICT (namespace_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id, idempotency_key
)
SELECT id, idempotency_key FROM ins ORDER BY id

-- episodes_by_idempotency_keys --
-- Existing episodes of one namespace carrying the given idempotency keys.
SELECT id, idempotency_key, content
FROM episodes
WHERE namespace_id = %(namespace_id)s AND idempotency_key = ANY(%(keys)s)

-- episode_get --
-- One episode by id with its namespace slug (no vector).
SELECT e.id, n.slug AS namespace, e.namespace_id, e.content, e.kind, e.metadata, e.idempotency_key,
       e.occurred_at, e.created_at, e.deleted_at, e.deleted_reason
FROM episodes e JOIN namespaces n ON n.id = e.namespace_id
WHERE e.id = %(id)s

-- episode_nearest --
-- The non-deleted episode nearest to a vector within the given namespaces (forget); an
-- episode still waiting for its vector has no distance yet and is not considered. Read by
-- the half-precision key's index (0019); the similarity is full precision.
SELECT e.id, n.slug AS namespace, e.content, 1 - (e.embedding <=> %(embedding)s) AS similarity
FROM (
    SELECT id, namespace_id, content, embedding
    FROM episodes
    WHERE deleted_at IS NULL AND embedding IS NOT NULL
      AND (%(all_namespaces)s OR namespace_id = ANY(%(namespace_ids)s))
    ORDER BY embedding_key(embedding) <=> embedding_key(%(embedding)s::vector)
    LIMIT 1
) e JOIN namespaces n ON n.id = e.namespace_id

-- episode_soft_delete --
-- Soft-delete one episode (forget); returns nothing if it was already deleted.
UPDATE episodes SET deleted_at = now(), deleted_reason = %(reason)s
WHERE id = %(id)s AND deleted_at IS NULL
RETURNING id

-- episode_remember_cached --
-- remember in one statement: resolve the namespace, return an idempotency-key replay,
-- otherwise read the cached vector of the text and insert with it. Always one row:
-- namespace_id null = no such namespace; existing_id set = a replay (nothing inserted);
-- cached false = the vector is not cached: with defer_vector the row is inserted without
-- it (the pending-vector worker fills it in), otherwise nothing is inserted (embed, then
-- episode_remember_embedded); id null with cached true (or defer_vector) = a concurrent
-- writer took the key.
WITH ns AS (
    SELECT id FROM namespaces WHERE slug = %(slug)s
), existing AS (
    SELECT e.id, e.content FROM episodes e, ns
    WHERE %(idempotency_key)s::text IS NOT NULL
      AND e.namespace_id = ns.id AND e.idempotency_key = %(idempotency_key)s::text
), cached AS (
    SELECT embedding FROM embedding_cache
    WHERE text_hash = %(text_hash)s AND model = %(model)s AND endpoint = %(endpoint)s
), ins AS (
    INSERT INTO episodes (namespace_id, content, kind, metadata, idempotency_key,
                          embedding, embedding_model, occurred_at)
    SELECT ns.id, %(content)s, %(kind)s, %(metadata)s, %(idempotency_key)s,
           (SELECT embedding FROM cached), %(embedding_model)s, COALESCE(%(occurred_at)s::timestamptz, now())
    FROM ns
    WHERE NOT EXISTS (SELECT 1 FROM existing)
      AND (%(defer_vector)s OR EXISTS (SELECT 1 FROM cached))
    ON CONFLICT (namespace_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id
)
SELECT (SELECT id FROM ns) AS namespace_id,
       (SELECT id FROM existing) AS existing_id,
       (SELECT content FROM existing) AS existing_content,
       EXISTS (SELECT 1 FROM cached) AS cached,
       (SELECT id FROM ins) AS id

-- episode_remember_embedded --
-- remember with a just-computed vector, in one statement: cache the vector and insert.
-- Always one row: namespace_id null = no such namespace; id null = the key was taken
-- (a replay: read it with episodes_by_idempotency_keys).
WITH ns AS (
    SELECT id FROM namespaces WHERE slug = %(slug)s
), cache_write AS (
    INSERT INTO embedding_cache (text_hash, model, endpoint, embedding)
    VALUES (%(text_hash)s, %(model)s, %(endpoint)s, %(embedding)s)
    ON CONFLICT DO NOTHING
), ins AS (
    INSERT INTO episodes (namespace_id, content, kind, metadata, idempotency_key,
                          embedding, embedding_model, occurred_at)
    SELECT ns.id, %(content)s, %(kind)s, %(metadata)s, %(idempotency_key)s,
           %(embedding)s, %(embedding_model)s, COALESCE(%(occurred_at)s::timestamptz, now())
    FROM ns
    ON CONFLICT (namespace_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id
)
SELECT (SELECT id FROM ns) AS namespace_id, (SELECT id FROM ins) AS id
