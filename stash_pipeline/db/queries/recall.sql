-- recall_search_params --
-- Per-transaction HNSW settings: a wider beam and iterative scans, so namespace and
-- validity filters applied during the index scan still yield enough candidates.
SELECT set_config('hnsw.ef_search', %(ef_search)s, true) AS ef_search,
       set_config('hnsw.iterative_scan', 'relaxed_order', true) AS iterative_scan

-- recall_hybrid --
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

-- recall_facts_first_facts --
-- The reference's recall, step 1 (benchmark baseline): nearest non-withdrawn facts by raw
-- cosine, with no validity filter (the reference ignored valid_until).
SELECT 'fact'::text AS kind, f.id, n.slug AS namespace, f.content, f.confidence, f.valid_from,
       f.valid_until, f.created_at, 1 - (f.embedding <=> %(embedding)s::vector) AS similarity
FROM facts f JOIN namespaces n ON n.id = f.namespace_id
WHERE f.withdrawn_at IS NULL AND (%(all_namespaces)s OR f.namespace_id = ANY(%(namespace_ids)s))
ORDER BY f.embedding <=> %(embedding)s::vector
LIMIT %(limit)s

-- recall_facts_first_episodes --
-- The reference's recall, step 2: the remaining slots go to the nearest episodes.
SELECT 'episode'::text AS kind, e.id, n.slug AS namespace, e.content, e.metadata, e.occurred_at,
       e.created_at, 1 - (e.embedding <=> %(embedding)s::vector) AS similarity
FROM episodes e JOIN namespaces n ON n.id = e.namespace_id
WHERE e.deleted_at IS NULL AND (%(all_namespaces)s OR e.namespace_id = ANY(%(namespace_ids)s))
ORDER BY e.embedding <=> %(embedding)s::vector
LIMIT %(limit)s
