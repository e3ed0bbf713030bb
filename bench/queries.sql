-- Bench-only SQL (loaded by bench/common.py with the library's parser).

-- bench_search_indexes --
-- The HNSW and GIN indexes of one table, dropped and re-created around a bulk fill.
SELECT indexname, indexdef FROM pg_indexes
WHERE schemaname = 'public' AND tablename = %(table)s
  AND (indexdef ILIKE '%%using hnsw%%' OR indexdef ILIKE '%%using gin%%')

-- bench_reference_insert --
-- The reference's write: one plain single-row INSERT of an episode with its vector.
INSERT INTO episodes (namespace_id, content, embedding, embedding_model, occurred_at)
VALUES (%(namespace_id)s, %(content)s, %(embedding)s, %(embedding_model)s, now())
RETURNING id

-- bench_model_calls --
-- Rows in model_calls (must stay 0 on the write path).
SELECT count(*) AS n FROM model_calls

-- bench_vector_only --
-- Baseline read: nearest current facts and episodes by cosine alone, ranked together.
WITH f AS (
    SELECT 'fact'::text AS kind, id, embedding <=> %(embedding)s::vector AS distance
    FROM facts
    WHERE withdrawn_at IS NULL AND valid_from <= now() AND (valid_until IS NULL OR valid_until > now())
    ORDER BY embedding <=> %(embedding)s::vector
    LIMIT %(limit)s
), e AS (
    SELECT 'episode'::text AS kind, id, embedding <=> %(embedding)s::vector AS distance
    FROM episodes
    WHERE deleted_at IS NULL
    ORDER BY embedding <=> %(embedding)s::vector
    LIMIT %(limit)s
)
SELECT kind, id, 1 - distance AS similarity
FROM (SELECT * FROM f UNION ALL SELECT * FROM e) u
ORDER BY distance
LIMIT %(limit)s
