-- The facts-first baseline's SQL (bench/facts_first.py, loaded with the library's parser).

-- facts_first_facts --
-- The reference's recall, step 1: nearest non-withdrawn facts by raw cosine, with no
-- validity filter (the reference ignored valid_until); read by the half-precision key's
-- index (0019), as recall's candidates are.
SELECT 'fact'::text AS kind, f.id, n.slug AS namespace, f.content, f.confidence, f.valid_from,
       f.valid_until, f.created_at, 1 - (f.embedding <=> %(embedding)s::vector) AS similarity
FROM facts f JOIN namespaces n ON n.id = f.namespace_id
WHERE f.withdrawn_at IS NULL AND (%(all_namespaces)s OR f.namespace_id = ANY(%(namespace_ids)s))
ORDER BY embedding_key(f.embedding) <=> embedding_key(%(embedding)s::vector)
LIMIT %(limit)s

-- facts_first_episodes --
-- The reference's recall, step 2: the remaining slots go to the nearest episodes.
SELECT 'episode'::text AS kind, e.id, n.slug AS namespace, e.content, e.metadata, e.occurred_at,
       e.created_at, 1 - (e.embedding <=> %(embedding)s::vector) AS similarity
FROM episodes e JOIN namespaces n ON n.id = e.namespace_id
WHERE e.deleted_at IS NULL AND e.embedding IS NOT NULL
  AND (%(all_namespaces)s OR e.namespace_id = ANY(%(namespace_ids)s))
ORDER BY embedding_key(e.embedding) <=> embedding_key(%(embedding)s::vector)
LIMIT %(limit)s
