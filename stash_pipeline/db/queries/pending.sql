-- Episodes waiting for their vector (committed by remember before the embedding ran):
-- the pending-vector worker, `stash embed-pending` and the Dagster episode_embeddings asset.

-- pending_vectors_claim --
-- The oldest episodes still without a vector, locked for this transaction; rows another
-- worker holds are skipped (SKIP LOCKED), so two workers never embed the same row.
-- NO KEY UPDATE: the worker changes no key, so inserts referencing these rows are not blocked.
-- With its namespace's slug: the vector is cached under the key remember uses.
SELECT e.id, e.content, n.slug AS namespace
FROM episodes e JOIN namespaces n ON n.id = e.namespace_id
WHERE e.embedding IS NULL
ORDER BY e.id
LIMIT %(limit)s
FOR NO KEY UPDATE OF e SKIP LOCKED

-- pending_vectors_set --
-- Store the vectors of claimed episodes (parallel arrays; the vectors travel in binary),
-- with the model that made them.
UPDATE episodes e
   SET embedding = v.embedding, embedding_model = %(model)s
  FROM unnest(%(ids)s::bigint[], %(embeddings)b) AS v(id, embedding)
 WHERE e.id = v.id AND e.embedding IS NULL

-- pending_vectors_backlog --
-- How many episodes wait for a vector, and since when the oldest waits.
SELECT count(*) AS pending, min(created_at) AS oldest_created_at,
       EXTRACT(EPOCH FROM now() - min(created_at))::float8 AS oldest_age_s
FROM episodes
WHERE embedding IS NULL

-- pending_vectors_claim_in --
-- For a recall that must see the writes it follows: the episodes still without a vector in
-- the trees %(paths)s (all with %(all_namespaces)s), locked for this transaction. Unlike
-- pending_vectors_claim it WAITS for rows a worker holds (within the transaction's
-- lock_timeout): once that worker commits, such a row has its vector and no longer matches,
-- so it is skipped; the rest are this recall's to embed.
SELECT e.id, e.content, n.slug AS namespace
FROM episodes e JOIN namespaces n ON n.id = e.namespace_id
WHERE e.embedding IS NULL AND e.deleted_at IS NULL
  AND (%(all_namespaces)s
       OR EXISTS (SELECT 1 FROM unnest(%(paths)s::text[]) AS p(slug)
                  WHERE n.slug = p.slug
                     OR n.slug LIKE replace(replace(replace(p.slug, '\', '\\'), '%%', '\%%'), '_', '\_') || '/%%'))
ORDER BY e.id
LIMIT %(limit)s
FOR NO KEY UPDATE OF e

-- pending_vectors_lock_timeout --
-- How long this transaction waits for a row lock (milliseconds, as text).
SELECT set_config('lock_timeout', %(ms)s, true) AS value
