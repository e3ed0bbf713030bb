-- episode_insert --
-- Insert one episode; an idempotency-key replay inserts nothing (and returns no row).
INSERT INTO episodes (namespace_id, content, kind, metadata, idempotency_key,
                      embedding, embedding_model, occurred_at)
VALUES (%(namespace_id)s, %(content)s, %(kind)s, %(metadata)s, %(idempotency_key)s,
        %(embedding)s, %(embedding_model)s, COALESCE(%(occurred_at)s::timestamptz, now()))
ON CONFLICT (namespace_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id

-- episode_insert_batch_item --
-- One item of a batch insert; always returns a row: the new id, or null on a key replay.
WITH ins AS (
    INSERT INTO episodes (namespace_id, content, kind, metadata, idempotency_key,
                          embedding, embedding_model, occurred_at)
    VALUES (%(namespace_id)s, %(content)s, %(kind)s, %(metadata)s, %(idempotency_key)s,
            %(embedding)s, %(embedding_model)s, COALESCE(%(occurred_at)s::timestamptz, now()))
    ON CONFLICT (namespace_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id
)
SELECT %(idx)s::int AS idx, (SELECT id FROM ins) AS id

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
-- The non-deleted episode nearest to a vector within the given namespaces (forget).
SELECT e.id, n.slug AS namespace, e.content, 1 - (e.embedding <=> %(embedding)s) AS similarity
FROM (
    SELECT id, namespace_id, content, embedding
    FROM episodes
    WHERE deleted_at IS NULL AND (%(all_namespaces)s OR namespace_id = ANY(%(namespace_ids)s))
    ORDER BY embedding <=> %(embedding)s
    LIMIT 1
) e JOIN namespaces n ON n.id = e.namespace_id

-- episode_soft_delete --
-- Soft-delete one episode (forget); returns nothing if it was already deleted.
UPDATE episodes SET deleted_at = now(), deleted_reason = %(reason)s
WHERE id = %(id)s AND deleted_at IS NULL
RETURNING id

-- episode_hard_delete --
-- Hard-delete one episode (purge), returning its text for the embedding-cache purge.
DELETE FROM episodes WHERE id = %(id)s RETURNING id, content
