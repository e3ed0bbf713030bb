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

-- bench_recall_previous --
-- The recall query before BM25 ranking (weighted RRF of cosine and ts_rank_cd, newest-first
-- text candidates), kept here as the "previous recall" baseline of bench.retrieval_quality.
-- Candidates from four lists in one round trip: HNSW cosine over facts and episodes,
-- full text over facts and episodes. Vector hits of both kinds are ranked together, text
-- hits likewise; the two rankings are fused by weighted reciprocal rank fusion, where a
-- text hit that matches only some query terms weighs less than one matching them all
-- (or one of the query's identifiers, the most specific evidence there is).
-- Facts: current only by default; valid at %(as_of)s when given; everything with
-- %(include_history)s. Episodes: not forgotten (as_of: created by then, not forgotten then).
WITH
fact_vec AS (
    SELECT 'fact'::text AS kind, f.id, f.embedding <=> %(embedding)s::vector AS distance
    FROM facts f
    WHERE %(use_vector)s
      AND (%(all_namespaces)s OR f.namespace_id = ANY(%(namespace_ids)s))
      AND (%(include_history)s OR %(as_of)s::timestamptz IS NOT NULL
           OR (f.withdrawn_at IS NULL AND f.valid_from <= now() AND (f.valid_until IS NULL OR f.valid_until > now())))
      AND (%(as_of)s::timestamptz IS NULL
           OR (f.created_at <= %(as_of)s::timestamptz AND f.valid_from <= %(as_of)s::timestamptz
               AND (f.valid_until IS NULL OR f.valid_until > %(as_of)s::timestamptz)
               AND (f.withdrawn_at IS NULL OR f.withdrawn_at > %(as_of)s::timestamptz)))
    ORDER BY f.embedding <=> %(embedding)s::vector
    LIMIT %(candidates)s
),
episode_vec AS (
    SELECT 'episode'::text AS kind, e.id, e.embedding <=> %(embedding)s::vector AS distance
    FROM episodes e
    WHERE %(use_vector)s
      AND (%(all_namespaces)s OR e.namespace_id = ANY(%(namespace_ids)s))
      AND (CASE WHEN %(as_of)s::timestamptz IS NULL THEN e.deleted_at IS NULL
                ELSE e.created_at <= %(as_of)s::timestamptz
                     AND (e.deleted_at IS NULL OR e.deleted_at > %(as_of)s::timestamptz) END)
    ORDER BY e.embedding <=> %(embedding)s::vector
    LIMIT %(candidates)s
),
vec AS (
    SELECT kind, id, distance, row_number() OVER (ORDER BY distance, kind, id) AS rnk
    FROM (SELECT * FROM fact_vec UNION ALL SELECT * FROM episode_vec) u
),
tq AS (
    -- q_all: every query term (websearch syntax: "phrases", -not, or)
    -- q_any: any stemmed query term
    -- q_ident: the query's identifier-like tokens (digits, '-', '_'), selective by
    --          nature: "INC-8870", "ERR_CONN_RESET", "v7.4.2"
    SELECT array_to_string(ARRAY(
               SELECT '''' || replace(replace(l, '''', ''), '\', '') || ''''
               FROM unnest(tsvector_to_array(to_tsvector('english', %(query)s))) AS l
               WHERE replace(replace(l, '''', ''), '\', '') <> ''), ' | ')::tsquery AS q_any,
           websearch_to_tsquery('english', %(query)s) AS q_all,
           -- each identifier as the AND of its own lexemes ('inc-8870' & 'inc' & '8870'),
           -- OR-ed across identifiers; NULL when the query has none
           (SELECT string_agg('(' || plainto_tsquery('english', t)::text || ')', ' | ')
            FROM unnest(%(identifiers)s::text[]) AS t
            WHERE plainto_tsquery('english', t)::text <> '')::tsquery AS q_ident
),
-- Text candidates stay selective, so recall cost does not grow with how many rows share
-- a common word: 'strong' rows contain every query term or an identifier token (one
-- GIN-searchable tsquery); 'weak' rows are any-term matches among the vector candidates
-- (looked up by id: partial lexical evidence re-ranks them). At most text_scan_limit
-- strong rows, newest first, are ranked: thousands of rows sharing every query term
-- cost a scan, not thousands of rank computations. Text-only mode matches any term
-- instead: it is the benchmark baseline.
fact_text_rows AS (
    (SELECT f.id FROM facts f, tq
     WHERE %(use_text)s AND f.search @@ (CASE WHEN %(use_vector)s OR NOT %(text_any)s
                                              THEN tq.q_all || COALESCE(tq.q_ident, tq.q_all)
                                              ELSE tq.q_any END)
       AND (%(all_namespaces)s OR f.namespace_id = ANY(%(namespace_ids)s))
     ORDER BY f.id DESC
     LIMIT %(text_scan_limit)s)
    UNION
    SELECT f.id FROM facts f, tq
    WHERE %(use_text)s AND %(use_vector)s AND %(text_any)s
      AND f.id IN (SELECT id FROM fact_vec) AND f.search @@ tq.q_any
),
fact_text AS (
    SELECT 'fact'::text AS kind, f.id, ts_rank_cd(f.search, tq.q_any, %(rank_normalization)s) AS rank,
           (f.search @@ tq.q_all OR (tq.q_ident IS NOT NULL AND f.search @@ tq.q_ident)) AS all_terms
    FROM fact_text_rows r JOIN facts f ON f.id = r.id, tq
    WHERE (%(all_namespaces)s OR f.namespace_id = ANY(%(namespace_ids)s))
      AND (%(include_history)s OR %(as_of)s::timestamptz IS NOT NULL
           OR (f.withdrawn_at IS NULL AND f.valid_from <= now() AND (f.valid_until IS NULL OR f.valid_until > now())))
      AND (%(as_of)s::timestamptz IS NULL
           OR (f.created_at <= %(as_of)s::timestamptz AND f.valid_from <= %(as_of)s::timestamptz
               AND (f.valid_until IS NULL OR f.valid_until > %(as_of)s::timestamptz)
               AND (f.withdrawn_at IS NULL OR f.withdrawn_at > %(as_of)s::timestamptz)))
    ORDER BY all_terms DESC, rank DESC, f.id DESC
    LIMIT %(candidates)s
),
episode_text_rows AS (
    (SELECT e.id FROM episodes e, tq
     WHERE %(use_text)s AND e.search @@ (CASE WHEN %(use_vector)s OR NOT %(text_any)s
                                              THEN tq.q_all || COALESCE(tq.q_ident, tq.q_all)
                                              ELSE tq.q_any END)
       AND (%(all_namespaces)s OR e.namespace_id = ANY(%(namespace_ids)s))
     ORDER BY e.id DESC
     LIMIT %(text_scan_limit)s)
    UNION
    SELECT e.id FROM episodes e, tq
    WHERE %(use_text)s AND %(use_vector)s AND %(text_any)s
      AND e.id IN (SELECT id FROM episode_vec) AND e.search @@ tq.q_any
),
episode_text AS (
    SELECT 'episode'::text AS kind, e.id, ts_rank_cd(e.search, tq.q_any, %(rank_normalization)s) AS rank,
           (e.search @@ tq.q_all OR (tq.q_ident IS NOT NULL AND e.search @@ tq.q_ident)) AS all_terms
    FROM episode_text_rows r JOIN episodes e ON e.id = r.id, tq
    WHERE (%(all_namespaces)s OR e.namespace_id = ANY(%(namespace_ids)s))
      AND (CASE WHEN %(as_of)s::timestamptz IS NULL THEN e.deleted_at IS NULL
                ELSE e.created_at <= %(as_of)s::timestamptz
                     AND (e.deleted_at IS NULL OR e.deleted_at > %(as_of)s::timestamptz) END)
    ORDER BY all_terms DESC, rank DESC, e.id DESC
    LIMIT %(candidates)s
),
txt AS (
    SELECT kind, id, rank, all_terms,
           row_number() OVER (ORDER BY all_terms DESC, rank DESC, kind, id DESC) AS rnk
    FROM (SELECT * FROM fact_text UNION ALL SELECT * FROM episode_text) u
),
fused AS (
    SELECT COALESCE(v.kind, t.kind) AS kind, COALESCE(v.id, t.id) AS id,
           v.distance, t.rank AS text_rank,
           COALESCE(%(w_vector)s::float8 / (%(rrf_k)s::float8 + v.rnk), 0)
         + COALESCE(CASE WHEN t.all_terms THEN %(w_text)s::float8 ELSE %(w_text_partial)s::float8 END
                    / (%(rrf_k)s::float8 + t.rnk), 0) AS rrf
    FROM vec v FULL JOIN txt t ON t.kind = v.kind AND t.id = v.id
    ORDER BY rrf DESC, COALESCE(v.distance, 2), kind, id DESC
    LIMIT %(limit)s
)
SELECT fu.kind, fu.id, fu.rrf, fu.text_rank,
       CASE WHEN %(use_vector)s
            THEN 1 - COALESCE(fu.distance, COALESCE(f.embedding, e.embedding) <=> %(embedding)s::vector) END
         AS similarity,
       n.slug AS namespace, COALESCE(f.content, e.content) AS content,
       f.confidence, f.valid_from, f.valid_until, f.withdrawn_at,
       CASE WHEN fu.kind = 'fact' THEN
           (f.withdrawn_at IS NULL AND f.valid_from <= now() AND (f.valid_until IS NULL OR f.valid_until > now()))
       END AS current,
       CASE WHEN fu.kind = 'fact' THEN
           ARRAY(SELECT l.parent_id FROM lineage l
                 WHERE l.child_kind = 'fact' AND l.child_id = f.id AND l.parent_kind = 'episode'
                 ORDER BY l.parent_id)
       END AS source_episode_ids,
       e.metadata, e.occurred_at
FROM fused fu
LEFT JOIN facts f ON fu.kind = 'fact' AND f.id = fu.id
LEFT JOIN episodes e ON fu.kind = 'episode' AND e.id = fu.id
JOIN namespaces n ON n.id = COALESCE(f.namespace_id, e.namespace_id)
ORDER BY fu.rrf DESC, COALESCE(fu.distance, 2), fu.kind, fu.id DESC

-- bench_episode_lexemes --
-- Every live episode's lexemes with their counts, as Postgres full text tokenises them (the
-- Python BM25 baseline ranks the same tokens the database does).
SELECT e.id, n.slug AS namespace, u.lexeme, COALESCE(array_length(u.positions, 1), 1) AS n
FROM episodes e JOIN namespaces n ON n.id = e.namespace_id, unnest(e.search) AS u
WHERE e.deleted_at IS NULL

-- bench_text_lexemes --
-- The lexemes (with counts) of a text, tokenised like the stored rows.
SELECT u.lexeme, COALESCE(array_length(u.positions, 1), 1) AS n
FROM unnest(to_tsvector('english', %(text)s)) AS u

-- bench_entity_relationship_insert --
-- One relationship between two resolved entities, extracted from a fact.
INSERT INTO relationships (namespace_id, from_entity, relation_type, to_entity, confidence, source_fact_id,
                           from_entity_id, to_entity_id)
SELECT n.id, %(from_entity)s, %(relation_type)s, %(to_entity)s, 0.9, %(fact_id)s, %(from_entity_id)s, %(to_entity_id)s
FROM namespaces n WHERE n.slug = %(namespace)s

-- bench_entity_fill_aliases --
-- Latency fill: each entity of the namespace gets two more aliases ("e<id>", "<name> team").
INSERT INTO entity_aliases (entity_id, namespace_id, alias, normalised)
SELECT e.id, e.namespace_id, a.alias, a.normalised
FROM entities e
CROSS JOIN LATERAL (VALUES ('e' || e.id, 'e' || e.id), (e.name || ' team', e.normalised || ' team')) AS a(alias, normalised)
WHERE e.namespace_id = %(namespace_id)s
ON CONFLICT (namespace_id, normalised) DO NOTHING

-- bench_entity_fill_facts --
-- Latency fill: every fact of the namespace is about one of its entities (round robin).
UPDATE facts f SET entity_id = e.id
FROM (SELECT id, row_number() OVER (ORDER BY id) - 1 AS k, count(*) OVER () AS n
      FROM entities WHERE namespace_id = %(namespace_id)s) e
WHERE f.namespace_id = %(namespace_id)s AND f.id %% e.n = e.k

-- bench_entity_fill_relationships --
-- Latency fill: each entity links to three others (k+1, k+7, k+31), from one of its facts.
INSERT INTO relationships (namespace_id, from_entity, relation_type, to_entity, confidence, source_fact_id,
                           from_entity_id, to_entity_id)
SELECT a.namespace_id, a.name, 'related_to', b.name, 0.9, a.fact_id, a.id, b.id
FROM (SELECT e.id, e.namespace_id, e.name, row_number() OVER (ORDER BY e.id) - 1 AS k, count(*) OVER () AS n,
             (SELECT min(f.id) FROM facts f WHERE f.entity_id = e.id) AS fact_id
      FROM entities e WHERE e.namespace_id = %(namespace_id)s) a
CROSS JOIN (VALUES (1), (7), (31)) AS step(s)
JOIN (SELECT e.id, e.name, row_number() OVER (ORDER BY e.id) - 1 AS k FROM entities e
      WHERE e.namespace_id = %(namespace_id)s) b ON b.k = (a.k + step.s) %% a.n
WHERE a.fact_id IS NOT NULL

-- bench_entity_fill_names --
-- Latency fill: entities by name (with their normalised forms), each its own first alias.
WITH made AS (
    INSERT INTO entities (namespace_id, name, normalised)
    SELECT %(namespace_id)s, n.name, n.normalised
    FROM unnest(%(names)s::text[], %(normalised)s::text[]) AS n(name, normalised)
    RETURNING id, namespace_id, name, normalised
)
INSERT INTO entity_aliases (entity_id, namespace_id, alias, normalised)
SELECT id, namespace_id, name, normalised FROM made
ON CONFLICT (namespace_id, normalised) DO NOTHING

-- bench_entity_analyze --
-- Fresh planner statistics after the entity fill.
ANALYZE entities, entity_aliases, relationships, facts
