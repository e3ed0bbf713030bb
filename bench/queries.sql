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

-- bench_quality_facts --
-- Derived (synthesised, not withdrawn) facts of a namespace with their source episodes.
SELECT f.id, f.entity, f.property, f.value, f.content,
       array_remove(array_agg(l.parent_id ORDER BY l.parent_id), NULL) AS episodes
FROM facts f
LEFT JOIN lineage l ON l.child_kind = 'fact' AND l.child_id = f.id AND l.parent_kind = 'episode'
WHERE f.namespace_id = %(namespace_id)s AND f.origin = 'synthesis' AND f.withdrawn_at IS NULL
GROUP BY f.id ORDER BY f.id

-- bench_quality_relationships --
-- Relationships of a namespace (not withdrawn).
SELECT id, from_entity, relation_type, to_entity, source_fact_id FROM relationships
WHERE namespace_id = %(namespace_id)s AND withdrawn_at IS NULL ORDER BY id

-- bench_quality_causal --
-- Fact-to-fact causal links of a namespace (not withdrawn or deleted).
SELECT id, cause_fact_id, effect_fact_id FROM causal_links
WHERE namespace_id = %(namespace_id)s AND effect_fact_id IS NOT NULL
  AND withdrawn_at IS NULL AND deleted_at IS NULL ORDER BY id

-- bench_quality_episodes --
-- Episodes of a namespace (to map ids back to the labelled keys).
SELECT id, content FROM episodes WHERE namespace_id = %(namespace_id)s ORDER BY id

-- bench_quality_calls --
-- Every model call of the run: count, tokens, failures, answers cut off at max_tokens.
SELECT count(*) AS n, COALESCE(sum(prompt_tokens + completion_tokens), 0) AS tokens,
       count(*) FILTER (WHERE NOT ok) AS failed,
       count(*) FILTER (WHERE ok AND error LIKE 'truncated%%') AS truncated
FROM model_calls

-- bench_quality_dead_letters --
-- Items the stages gave up on or will retry.
SELECT count(*) AS n FROM dead_letters

-- bench_quality_modes --
-- The structured-output mode negotiated for the endpoint.
SELECT endpoint, model, mode FROM reasoner_modes
