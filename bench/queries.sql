-- Bench-only SQL (loaded by bench/common.py with the library's parser).
-- Every HNSW read, the earlier recall statements' too, orders by embedding_key (the only
-- vector indexes since migration 0019 are on it): they differ from today's in their ranking.

-- bench_search_indexes --
-- The HNSW and GIN indexes of one table, dropped and re-created around a bulk fill.
SELECT indexname, indexdef FROM pg_indexes
WHERE schemaname = 'public' AND tablename = %(table)s
  AND (indexdef ILIKE '%%using hnsw%%' OR indexdef ILIKE '%%using gin%%')

-- bench_rarest_df --
-- Documents holding the query's rarest known lexeme in the scoped namespaces (0: none).
SELECT COALESCE(min(df) FILTER (WHERE df > 0), 0) AS df FROM (
    SELECT (SELECT COALESCE(sum(t.documents), 0) FROM recall_term_stats t
            WHERE t.lexeme = l AND (%(all_namespaces)s OR t.namespace_id = ANY(%(namespace_ids)s))) AS df
    FROM unnest(tsvector_to_array(to_tsvector('english', %(query)s))) AS l) x

-- bench_reference_insert --
-- The reference's write: one plain single-row INSERT of an episode with its vector.
INSERT INTO episodes (namespace_id, content, embedding, embedding_model, occurred_at)
VALUES (%(namespace_id)s, %(content)s, %(embedding)s, %(embedding_model)s, now())
RETURNING id

-- bench_model_calls --
-- Rows in model_calls (must stay 0 on the write path).
SELECT count(*) AS n FROM model_calls

-- bench_vectors_present --
-- Which of the given episodes have their vector (the async write path's lag watcher).
SELECT id FROM episodes WHERE id = ANY(%(ids)s::bigint[]) AND embedding IS NOT NULL

-- bench_vector_only --
-- Baseline read: nearest current facts and episodes by cosine alone, ranked together.
WITH f AS (
    SELECT 'fact'::text AS kind, id, embedding <=> %(embedding)s::vector AS distance
    FROM facts
    WHERE withdrawn_at IS NULL AND valid_from <= now() AND (valid_until IS NULL OR valid_until > now())
    ORDER BY embedding_key(embedding) <=> embedding_key(%(embedding)s::vector)
    LIMIT %(limit)s
), e AS (
    SELECT 'episode'::text AS kind, id, embedding <=> %(embedding)s::vector AS distance
    FROM episodes
    WHERE deleted_at IS NULL
    ORDER BY embedding_key(embedding) <=> embedding_key(%(embedding)s::vector)
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
    ORDER BY embedding_key(f.embedding) <=> embedding_key(%(embedding)s::vector)
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
    ORDER BY embedding_key(e.embedding) <=> embedding_key(%(embedding)s::vector)
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

-- bench_relation_sizes --
-- Sizes of the episodes and facts tables (heap + TOAST) and of each of their indexes.
SELECT c.relname AS name,
       CASE WHEN c.relkind = 'i' THEN pg_relation_size(c.oid) ELSE pg_table_size(c.oid) END AS bytes
FROM pg_class c
WHERE c.oid IN ('episodes'::regclass, 'facts'::regclass)
   OR c.oid IN (SELECT i.indexrelid FROM pg_index i WHERE i.indrelid IN ('episodes'::regclass, 'facts'::regclass))
ORDER BY bytes DESC, name

-- bench_memory_count --
-- Episodes and facts already in the bench namespace (a kept database is filled once).
SELECT (SELECT count(*) FROM episodes e WHERE e.namespace_id = %(namespace_id)s) AS episodes,
       (SELECT count(*) FROM facts f WHERE f.namespace_id = %(namespace_id)s) AS facts

-- bench_previous_search_params --
-- The settings the previous recall query ran with (HNSW beam and iterative scans only).
SELECT set_config('hnsw.ef_search', %(ef_search)s, true) AS ef_search,
       set_config('hnsw.iterative_scan', 'relaxed_order', true) AS iterative_scan

-- bench_recall_first_bm25 --
-- recall_hybrid as first shipped with BM25 (commit 2de2e02), kept to time the current one
-- against on the same data: a subquery per text match unnesting its whole tsvector, no
-- materialized term lookups, planned at every call (its settings: bench_previous_search_params).
--
-- One statement: candidates, their scores, context neighbours, the top %(limit)s.
--
-- Candidates: HNSW cosine over facts and over episodes (%(candidates)s each), and
-- full-text matches of the query's RAREST lexemes: lexemes are taken in ascending
-- document frequency while their summed frequency fits %(text_scan_limit)s, so the rows
-- matched are bounded by construction (latency stays flat as the store grows) and no
-- older row is dropped for a newer one; when even the rarest lexeme is that common, its
-- newest %(text_scan_limit)s matches are taken.
-- The best %(text_candidates)s of those matches by BM25 join the vector candidates.
-- Scores, for every candidate: cosine similarity, and Okapi BM25 over the namespaces in
-- scope (document frequencies and lengths from recall_term_stats / recall_text_stats;
-- term frequency and length, in distinct lexemes, from the row's tsvector).
-- coverage = BM25 / the sum of the query lexemes' idf (what a row holding every query
-- lexeme once at average length scores): the share of the query's information the row
-- matches, comparable across queries.
-- Fused score = w_vector * max(cosine, 0) + (1 - w_vector) * least(coverage, 1)
-- (cosine alone in vector mode, coverage alone in text mode).
-- Stale episodes: an episode whose derived facts are all retired (superseded, expired or
-- withdrawn) has its score multiplied by stale_factor, so its correction outranks it.
-- Supersession by recency (when supersede): an episode candidate with a newer episode
-- candidate in its namespace (later occurred_at, cosine between the two embeddings >=
-- supersede_similarity, matching every query lexeme the older one matches) scores
-- supersede_margin times that newer one's score, but at least superseded_factor times its
-- own (it drops just below its restatement and otherwise keeps its place).
-- Context: an episode within context_window places (by id) of one of the best
-- context_pool episodes, in the same namespace and session (the same given occurred_at,
-- or the same metadata.session or metadata.thread), gains neighbour_weight times that
-- hit's score.
-- Facts: current only by default; valid at as_of when given; everything with
-- include_history. Episodes: not forgotten (as_of: created by then, not forgotten then).
WITH
query_lexemes AS (
    SELECT DISTINCT l AS lexeme FROM unnest(tsvector_to_array(to_tsvector('english', %(query)s))) AS l
),
corpus AS (
    SELECT COALESCE(sum(documents), 0)::float8 AS documents,
           GREATEST(COALESCE(sum(total_length), 0)::float8 / NULLIF(sum(documents), 0), 1) AS average_length
    FROM recall_text_stats
    WHERE %(use_text)s AND (%(all_namespaces)s OR namespace_id = ANY(%(namespace_ids)s))
),
terms AS (
    -- one index lookup per query word (a join let the planner scan the whole table)
    SELECT q.lexeme,
           (SELECT COALESCE(sum(t.documents), 0)::float8 FROM recall_term_stats t
            WHERE t.lexeme = q.lexeme AND (%(all_namespaces)s OR t.namespace_id = ANY(%(namespace_ids)s))) AS df
    FROM query_lexemes q
    WHERE %(use_text)s
),
weights AS (
    -- every query lexeme, seen or not: a word no row contains is information the query
    -- asks for and no row has (it counts in full_match, so coverage stays low)
    SELECT t.lexeme, t.df, ln(1 + (c.documents - t.df + 0.5) / (t.df + 0.5)) AS idf,
           sum(t.df) OVER (ORDER BY t.df, t.lexeme) AS cumulative_df,
           row_number() OVER (PARTITION BY t.df > 0 ORDER BY t.df, t.lexeme) AS rarity
    FROM terms t, corpus c
),
tq AS (
    SELECT (SELECT NULLIF(array_to_string(ARRAY(
                SELECT '''' || replace(replace(w.lexeme, '\', '\\'), '''', '''''') || ''''
                FROM weights w
                WHERE w.df > 0 AND (w.cumulative_df <= %(text_scan_limit)s OR w.rarity = 1)), ' | '), '')
           )::tsquery AS q_rare,
           (SELECT sum(w.idf) FROM weights w) AS full_match
),
fact_vec AS (
    SELECT f.id FROM facts f
    WHERE %(use_vector)s
      AND (%(all_namespaces)s OR f.namespace_id = ANY(%(namespace_ids)s))
      AND (%(include_history)s OR %(as_of)s::timestamptz IS NOT NULL
           OR (f.withdrawn_at IS NULL AND f.valid_from <= now() AND (f.valid_until IS NULL OR f.valid_until > now())))
      AND (%(as_of)s::timestamptz IS NULL
           OR (f.created_at <= %(as_of)s::timestamptz AND f.valid_from <= %(as_of)s::timestamptz
               AND (f.valid_until IS NULL OR f.valid_until > %(as_of)s::timestamptz)
               AND (f.withdrawn_at IS NULL OR f.withdrawn_at > %(as_of)s::timestamptz)))
    ORDER BY embedding_key(f.embedding) <=> embedding_key(%(embedding)s::vector)
    LIMIT %(candidates)s
),
episode_vec AS (
    SELECT e.id FROM episodes e
    WHERE %(use_vector)s
      AND (%(all_namespaces)s OR e.namespace_id = ANY(%(namespace_ids)s))
      AND (CASE WHEN %(as_of)s::timestamptz IS NULL THEN e.deleted_at IS NULL
                ELSE e.created_at <= %(as_of)s::timestamptz
                     AND (e.deleted_at IS NULL OR e.deleted_at > %(as_of)s::timestamptz) END)
    ORDER BY embedding_key(e.embedding) <=> embedding_key(%(embedding)s::vector)
    LIMIT %(candidates)s
),
fact_text AS (
    SELECT f.id, f.search FROM facts f, tq
    WHERE %(use_text)s AND f.search @@ tq.q_rare
      AND (%(all_namespaces)s OR f.namespace_id = ANY(%(namespace_ids)s))
      AND (%(include_history)s OR %(as_of)s::timestamptz IS NOT NULL
           OR (f.withdrawn_at IS NULL AND f.valid_from <= now() AND (f.valid_until IS NULL OR f.valid_until > now())))
      AND (%(as_of)s::timestamptz IS NULL
           OR (f.created_at <= %(as_of)s::timestamptz AND f.valid_from <= %(as_of)s::timestamptz
               AND (f.valid_until IS NULL OR f.valid_until > %(as_of)s::timestamptz)
               AND (f.withdrawn_at IS NULL OR f.withdrawn_at > %(as_of)s::timestamptz)))
    ORDER BY f.id DESC
    LIMIT %(text_scan_limit)s
),
episode_text AS (
    SELECT e.id, e.search FROM episodes e, tq
    WHERE %(use_text)s AND e.search @@ tq.q_rare
      AND (%(all_namespaces)s OR e.namespace_id = ANY(%(namespace_ids)s))
      AND (CASE WHEN %(as_of)s::timestamptz IS NULL THEN e.deleted_at IS NULL
                ELSE e.created_at <= %(as_of)s::timestamptz
                     AND (e.deleted_at IS NULL OR e.deleted_at > %(as_of)s::timestamptz) END)
    ORDER BY e.id DESC
    LIMIT %(text_scan_limit)s
),
-- the best text matches by BM25 join the vector candidates (cosine is computed only for
-- this short list, not for every match)
text_top AS (
    SELECT m.kind, m.id
    FROM (SELECT 'fact'::text AS kind, id, search FROM fact_text
          UNION ALL SELECT 'episode'::text, id, search FROM episode_text) m, corpus co
    ORDER BY COALESCE((
                 SELECT sum(w.idf * tf.n * (%(k1)s + 1)
                            / (tf.n + %(k1)s * (1 - %(b)s + %(b)s * length(m.search) / co.average_length)))
                 FROM unnest(m.search) AS u
                 JOIN weights w ON w.lexeme = u.lexeme
                 CROSS JOIN LATERAL (SELECT COALESCE(array_length(u.positions, 1), 1)::float8 AS n) tf), 0) DESC, m.id DESC
    LIMIT %(text_candidates)s
),
candidates AS (
    SELECT 'fact'::text AS kind, f.id, f.namespace_id, f.search, f.embedding,
           NULL::timestamptz AS occurred_at, NULL::jsonb AS metadata
    FROM facts f
    WHERE f.id IN (SELECT id FROM fact_vec UNION SELECT id FROM text_top WHERE kind = 'fact')
    UNION ALL
    SELECT 'episode'::text, e.id, e.namespace_id, e.search, e.embedding, e.occurred_at, e.metadata
    FROM episodes e
    WHERE e.id IN (SELECT id FROM episode_vec UNION SELECT id FROM text_top WHERE kind = 'episode')
),
-- MATERIALIZED: every score is computed once per candidate, however often it is used
scored AS MATERIALIZED (
    SELECT c.kind, c.id, c.namespace_id, c.occurred_at, c.metadata, c.embedding,
           CASE WHEN %(use_vector)s THEN 1 - (c.embedding <=> %(embedding)s::vector) END AS cosine,
           CASE WHEN %(use_text)s THEN COALESCE((
               SELECT sum(w.idf * tf.n * (%(k1)s + 1)
                          / (tf.n + %(k1)s * (1 - %(b)s + %(b)s * length(c.search) / co.average_length)))
               FROM unnest(c.search) AS u
               JOIN weights w ON w.lexeme = u.lexeme
               CROSS JOIN LATERAL (SELECT COALESCE(array_length(u.positions, 1), 1)::float8 AS n) tf), 0) END AS bm25,
           ARRAY(SELECT u.lexeme FROM unnest(c.search) AS u JOIN weights w ON w.lexeme = u.lexeme) AS matched
    FROM candidates c, corpus co
),
judged AS MATERIALIZED (
    SELECT s.*,
           s.bm25 / NULLIF(tq.full_match, 0) AS coverage,
           (CASE WHEN %(use_vector)s AND %(use_text)s
                 THEN %(w_vector)s * GREATEST(s.cosine, 0)
                      + (1 - %(w_vector)s) * LEAST(COALESCE(s.bm25 / NULLIF(tq.full_match, 0), 0), 1)
                 WHEN %(use_vector)s THEN GREATEST(s.cosine, 0)
                 ELSE LEAST(COALESCE(s.bm25 / NULLIF(tq.full_match, 0), 0), 1) END)
           * CASE WHEN s.kind = 'episode' AND %(as_of)s::timestamptz IS NULL AND NOT %(include_history)s
                       AND EXISTS (SELECT 1 FROM lineage l
                                   WHERE l.parent_kind = 'episode' AND l.parent_id = s.id AND l.child_kind = 'fact')
                       AND NOT EXISTS (
                           SELECT 1 FROM lineage l JOIN facts f ON f.id = l.child_id
                           WHERE l.parent_kind = 'episode' AND l.parent_id = s.id AND l.child_kind = 'fact'
                             AND f.withdrawn_at IS NULL AND f.valid_from <= now()
                             AND (f.valid_until IS NULL OR f.valid_until > now()))
                  THEN %(stale_factor)s::float8 ELSE 1 END AS score
    FROM scored s, tq
),
-- supersession by recency: the best score among each episode's newer near-duplicates
-- (same namespace, later occurred_at, cosine >= supersede_similarity, matching every
-- query lexeme the older one matches). Only the best supersede_pool candidates are checked
-- (a demotion only lowers a score, so one ranked below them cannot reach the results);
-- that bounds the pairs compared.
fused AS (
    SELECT j.kind, j.id, j.namespace_id, j.occurred_at, j.metadata, j.cosine, j.bm25, j.coverage,
           CASE WHEN newer.score IS NULL THEN j.score
                ELSE GREATEST(%(superseded_factor)s::float8 * j.score,
                              LEAST(j.score, %(supersede_margin)s::float8 * newer.score)) END AS score
    FROM (SELECT x.*, row_number() OVER (ORDER BY x.score DESC, x.id DESC) AS place FROM judged x) j
    LEFT JOIN LATERAL (
        SELECT max(n.score) AS score FROM judged n
        WHERE %(supersede)s AND j.place <= %(supersede_pool)s AND j.kind = 'episode' AND n.kind = 'episode'
          AND %(as_of)s::timestamptz IS NULL AND NOT %(include_history)s
          AND n.namespace_id = j.namespace_id AND n.occurred_at > j.occurred_at
          AND n.matched @> j.matched
          AND 1 - (n.embedding <=> j.embedding) >= %(supersede_similarity)s
    ) newer ON true
),
pool AS (
    SELECT f.* FROM fused f WHERE f.kind = 'episode' ORDER BY f.score DESC, f.id DESC LIMIT %(context_pool)s
),
neighbours AS (
    SELECT n.id, max(p.score) AS score
    FROM pool p
    CROSS JOIN LATERAL (
        (SELECT e.id, e.occurred_at, e.created_at, e.metadata FROM episodes e
         WHERE e.namespace_id = p.namespace_id AND e.id < p.id AND e.deleted_at IS NULL
         ORDER BY e.id DESC LIMIT %(context_window)s)
        UNION ALL
        (SELECT e.id, e.occurred_at, e.created_at, e.metadata FROM episodes e
         WHERE e.namespace_id = p.namespace_id AND e.id > p.id AND e.deleted_at IS NULL
         ORDER BY e.id LIMIT %(context_window)s)
    ) n
    WHERE %(neighbour_weight)s::float8 > 0 AND %(as_of)s::timestamptz IS NULL
      -- a shared occurred_at marks a session only when it was given: episodes written
      -- without one in the same transaction share now() and are no session
      AND ((n.occurred_at = p.occurred_at AND n.occurred_at <> n.created_at)
           OR n.metadata ->> 'session' = p.metadata ->> 'session'
           OR n.metadata ->> 'thread' = p.metadata ->> 'thread')
    GROUP BY n.id
),
-- neighbours that were no candidate get their own scores too (a handful of rows), so a
-- reply that shares a little with the query and follows a strong hit can rank
extra AS MATERIALIZED (
    SELECT 'episode'::text AS kind, e.id, 1 - (e.embedding <=> %(embedding)s::vector) AS cosine,
           COALESCE((
               SELECT sum(w.idf * tf.n * (%(k1)s + 1)
                          / (tf.n + %(k1)s * (1 - %(b)s + %(b)s * length(e.search) / co.average_length)))
               FROM unnest(e.search) AS u
               JOIN weights w ON w.lexeme = u.lexeme
               CROSS JOIN LATERAL (SELECT COALESCE(array_length(u.positions, 1), 1)::float8 AS n) tf), 0) AS bm25
    FROM episodes e, corpus co
    WHERE e.id IN (SELECT n.id FROM neighbours n)
      AND e.id NOT IN (SELECT f.id FROM fused f WHERE f.kind = 'episode')
),
own AS (
    SELECT f.kind, f.id, f.cosine, f.bm25, f.coverage, f.score FROM fused f
    UNION ALL
    -- (neighbours exist in hybrid mode only, so this is the hybrid formula)
    SELECT x.kind, x.id, x.cosine, x.bm25, x.bm25 / NULLIF(tq.full_match, 0),
           %(w_vector)s * GREATEST(x.cosine, 0)
           + (1 - %(w_vector)s) * LEAST(COALESCE(x.bm25 / NULLIF(tq.full_match, 0), 0), 1)
    FROM extra x, tq
),
ranked AS (
    SELECT o.kind, o.id, o.cosine, o.bm25, o.coverage, o.score AS own_score,
           %(neighbour_weight)s::float8 * nb.score AS context_score,
           o.score + %(neighbour_weight)s::float8 * COALESCE(nb.score, 0) AS score
    FROM own o LEFT JOIN neighbours nb ON o.kind = 'episode' AND nb.id = o.id
    ORDER BY score DESC, kind, id DESC
    LIMIT %(limit)s
)
SELECT r.kind, r.id, r.score, r.cosine, r.bm25, r.coverage, r.own_score, r.context_score,
       n.slug AS namespace, COALESCE(f.content, e.content) AS content,
       f.confidence, f.valid_from, f.valid_until, f.withdrawn_at,
       CASE WHEN r.kind = 'fact' THEN
           (f.withdrawn_at IS NULL AND f.valid_from <= now() AND (f.valid_until IS NULL OR f.valid_until > now()))
       END AS current,
       CASE WHEN r.kind = 'fact' THEN
           ARRAY(SELECT l.parent_id FROM lineage l
                 WHERE l.child_kind = 'fact' AND l.child_id = f.id AND l.parent_kind = 'episode'
                 ORDER BY l.parent_id)
       END AS source_episode_ids,
       e.metadata, e.occurred_at
FROM ranked r
LEFT JOIN facts f ON r.kind = 'fact' AND f.id = r.id
LEFT JOIN episodes e ON r.kind = 'episode' AND e.id = r.id
JOIN namespaces n ON n.id = COALESCE(f.namespace_id, e.namespace_id)
ORDER BY r.score DESC, r.kind, r.id DESC

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

-- bench_entity_count --
-- Entities already in the bench namespace (a kept database is filled once).
SELECT count(*) AS entities FROM entities WHERE namespace_id = %(namespace_id)s

-- bench_facts_sources --
-- Every live fact's source episodes (a fact hit shows the turns it rests on).
SELECT f.id, array_remove(array_agg(l.parent_id ORDER BY l.parent_id), NULL) AS episodes
FROM facts f
LEFT JOIN lineage l ON l.child_kind = 'fact' AND l.child_id = f.id AND l.parent_kind = 'episode'
WHERE f.withdrawn_at IS NULL
GROUP BY f.id

-- bench_facts_dead_letters --
-- Episodes the facts stage dead-lettered (pending a retry or given up), with the reason.
SELECT item_id, status, last_error FROM dead_letters
WHERE stage = 'facts' AND item_kind = 'episode'
ORDER BY item_id

-- The recall path as it ran before it became one round trip (scope lookup; entity names,
-- entity facts, settings + hybrid; neighbours: three transactions, up to five statements),
-- kept verbatim so bench/recall_latency.py measures each step's share against the
-- current path in the same run.

-- bench_before_recall_search_params --
-- (before one round trip) Per-transaction settings for recall_hybrid: a wider HNSW beam and iterative scans, so
-- namespace and validity filters applied during the index scan still yield enough
-- candidates; a generic plan once the statement is prepared (the client prepares a query
-- run 5 times on a connection), since planning this statement costs about as much as
-- running it and its best plan does not depend on the values; and no read of a whole
-- facts or episodes table at any size: at a few thousand rows the planner would otherwise
-- read every row (a sequential scan, or a bitmap scan of a partial index) and sort it by
-- distance instead of asking the HNSW index. With sorts off, a plan that needs no sort
-- for the nearest rows wins; the sorts every plan needs (text matches, the final order)
-- are still made.
SELECT set_config('hnsw.ef_search', %(ef_search)s, true) AS ef_search,
       set_config('hnsw.iterative_scan', 'relaxed_order', true) AS iterative_scan,
       set_config('plan_cache_mode', 'force_generic_plan', true) AS plan_cache_mode,
       set_config('enable_seqscan', 'off', true) AS enable_seqscan,
       set_config('enable_sort', 'off', true) AS enable_sort

-- bench_before_recall_entity_names --
-- (before one round trip) The entities a query names (entity leg of hybrid recall, stash_pipeline.memory.
-- entity_recall): aliases whose normalised form is one of the query's %(phrases)s, in the
-- namespaces in scope, found by entity_aliases' unique (namespace_id, normalised) index;
-- at most %(max_named)s entities, each with the aliases that matched. An entity merged into
-- another has moved its aliases, facts and relationship ends to the kept one, so these
-- rows name live entities only.
WITH matched AS MATERIALIZED (
    -- (MATERIALIZED: found by the (namespace_id, normalised) index, never by walking an
    -- entity_id index in order for the LIMIT)
    SELECT a.entity_id, a.alias
    FROM entity_aliases a
    WHERE a.normalised = ANY(%(phrases)s::text[])
      AND (%(all_namespaces)s OR a.namespace_id = ANY(%(namespace_ids)s))
)
SELECT m.entity_id, string_agg(m.alias, ' ' ORDER BY m.alias) AS aliases
FROM matched m
GROUP BY m.entity_id
ORDER BY m.entity_id
LIMIT %(max_named)s

-- bench_before_recall_entity_facts --
-- (before one round trip) The entity leg's candidates: current facts about the named entities (%(entity_ids)s, with
-- the %(aliases)s that named each, from recall_entity_names) and about their neighbours one
-- current relationship away: at most %(links_per_entity)s newest current relationships per
-- named entity (live, source fact current), at most %(max_neighbours)s entities. Facts: at
-- most %(facts_per_entity)s newest current facts per entity, the best %(max_facts)s by score.
-- Scored as recall_hybrid scores a fact (w_vector * cosine + (1 - w_vector) * coverage,
-- same BM25), except when the fact lacks a query word of the alias that named its entity
-- ("achen moved to Kestrel" for "what does Alice do"): then the missing words count as
-- matched, as entity_credit times their idf but at least entity_match of the query, times
-- hop_factor one hop away. A fact that spells the name scores exactly as in recall_hybrid.
-- Same columns as recall_hybrid, plus hop.
WITH
named AS (
    SELECT n.entity_id, n.aliases
    FROM unnest(%(entity_ids)s::bigint[], %(aliases)s::text[]) AS n(entity_id, aliases)
),
query_lexemes AS (
    SELECT DISTINCT l AS lexeme FROM unnest(tsvector_to_array(to_tsvector('english', %(query)s))) AS l
),
corpus AS (
    SELECT COALESCE(sum(documents), 0)::float8 AS documents,
           GREATEST(COALESCE(sum(total_length), 0)::float8 / NULLIF(sum(documents), 0), 1) AS average_length
    FROM recall_text_stats
    WHERE %(all_namespaces)s OR namespace_id = ANY(%(namespace_ids)s)
),
weights AS (
    SELECT q.lexeme, ln(1 + (c.documents - t.df + 0.5) / (t.df + 0.5)) AS idf
    FROM query_lexemes q, corpus c,
         LATERAL (SELECT COALESCE(sum(s.documents), 0)::float8 AS df FROM recall_term_stats s
                  WHERE s.lexeme = q.lexeme AND (%(all_namespaces)s OR s.namespace_id = ANY(%(namespace_ids)s))) t
),
full_match AS (
    SELECT sum(idf) AS idf FROM weights
),
-- the query words each named entity's matched aliases account for
named_words AS (
    SELECT m.entity_id,
           ARRAY(SELECT w.lexeme FROM weights w
                 WHERE w.lexeme = ANY(tsvector_to_array(to_tsvector('english', m.aliases)))) AS words
    FROM named m
),
links AS (
    SELECT l.id, l.entity_id, m.entity_id AS named_id
    FROM named m
    CROSS JOIN LATERAL (
        (SELECT r.id, r.to_entity_id AS entity_id FROM relationships r JOIN facts s ON s.id = r.source_fact_id
         WHERE r.from_entity_id = m.entity_id AND r.to_entity_id IS NOT NULL AND r.withdrawn_at IS NULL
           AND s.withdrawn_at IS NULL AND s.valid_from <= now() AND (s.valid_until IS NULL OR s.valid_until > now())
         ORDER BY r.id DESC LIMIT %(links_per_entity)s)
        UNION ALL
        (SELECT r.id, r.from_entity_id FROM relationships r JOIN facts s ON s.id = r.source_fact_id
         WHERE r.to_entity_id = m.entity_id AND r.from_entity_id IS NOT NULL AND r.withdrawn_at IS NULL
           AND s.withdrawn_at IS NULL AND s.valid_from <= now() AND (s.valid_until IS NULL OR s.valid_until > now())
         ORDER BY r.id DESC LIMIT %(links_per_entity)s)
    ) l
),
-- (named_id: the named entity it was reached from, by its newest link)
neighbours AS (
    SELECT l.entity_id, (array_agg(l.named_id ORDER BY l.id DESC))[1] AS named_id
    FROM links l
    WHERE l.entity_id NOT IN (SELECT entity_id FROM named)
    GROUP BY l.entity_id
    ORDER BY max(l.id) DESC
    LIMIT %(max_neighbours)s
),
reached AS (
    SELECT x.hop, x.words, f.id
    FROM (SELECT entity_id, 0 AS hop, words FROM named_words
          UNION ALL
          SELECT nb.entity_id, 1, m.words FROM neighbours nb JOIN named_words m ON m.entity_id = nb.named_id) x
    CROSS JOIN LATERAL (
        SELECT f.id FROM facts f
        WHERE f.entity_id = x.entity_id
          AND (%(all_namespaces)s OR f.namespace_id = ANY(%(namespace_ids)s))
          AND f.withdrawn_at IS NULL AND f.valid_from <= now() AND (f.valid_until IS NULL OR f.valid_until > now())
        ORDER BY f.valid_from DESC, f.id DESC
        LIMIT %(facts_per_entity)s
    ) f
),
scored AS (
    SELECT DISTINCT ON (r.id) r.id, r.hop, 1 - (f.embedding <=> %(embedding)s::vector) AS cosine,
           COALESCE((
               SELECT sum(w.idf * tf.n * (%(k1)s + 1)
                          / (tf.n + %(k1)s * (1 - %(b)s + %(b)s * length(f.search) / co.average_length)))
               FROM unnest(f.search) AS u
               JOIN weights w ON w.lexeme = u.lexeme
               CROSS JOIN LATERAL (SELECT COALESCE(array_length(u.positions, 1), 1)::float8 AS n) tf), 0) AS bm25,
           COALESCE((SELECT sum(w.idf) FROM weights w
                     WHERE w.lexeme = ANY(r.words) AND NOT w.lexeme = ANY(tsvector_to_array(f.search))), 0) AS missing
    FROM reached r JOIN facts f ON f.id = r.id, corpus co
    ORDER BY r.id, r.hop
),
credited AS (
    SELECT s.id, s.hop, s.cosine, s.bm25,
           (s.bm25 + CASE WHEN s.missing > 0
                          THEN power(%(hop_factor)s::float8, s.hop)
                               * GREATEST(%(entity_credit)s::float8 * s.missing, %(entity_match)s::float8 * fm.idf)
                          ELSE 0 END) / NULLIF(fm.idf, 0) AS coverage
    FROM scored s, full_match fm
),
ranked AS (
    SELECT c.id, c.hop, c.cosine, c.bm25, c.coverage,
           %(w_vector)s * GREATEST(c.cosine, 0) + (1 - %(w_vector)s) * LEAST(COALESCE(c.coverage, 0), 1) AS score
    FROM credited c
    ORDER BY score DESC, c.id DESC
    LIMIT %(max_facts)s
)
SELECT 'fact'::text AS kind, r.id, r.score, r.cosine, r.bm25, r.coverage,
       r.score AS own_score, NULL::float8 AS context_score, r.hop,
       n.slug AS namespace, f.content, f.confidence, f.valid_from, f.valid_until, f.withdrawn_at,
       true AS current,
       ARRAY(SELECT l.parent_id FROM lineage l
             WHERE l.child_kind = 'fact' AND l.child_id = f.id AND l.parent_kind = 'episode'
             ORDER BY l.parent_id) AS source_episode_ids,
       NULL::jsonb AS metadata, NULL::timestamptz AS occurred_at
FROM ranked r
JOIN facts f ON f.id = r.id
JOIN namespaces n ON n.id = f.namespace_id
ORDER BY r.score DESC, r.id DESC

-- bench_before_recall_hybrid --
-- (before one round trip) One statement: candidates, their scores, context neighbours, the top %(limit)s.
--
-- Candidates: HNSW cosine over facts and over episodes (%(candidates)s each), and
-- full-text matches of the query's RAREST lexemes: lexemes are taken in ascending
-- document frequency while their summed frequency fits %(text_scan_limit)s, so the rows
-- matched are bounded by construction (latency stays flat as the store grows) and no
-- older row is dropped for a newer one; when even the rarest lexeme is that common, its
-- newest %(text_scan_limit)s matches are taken.
-- The best %(text_candidates)s of those matches by BM25 join the vector candidates.
-- Scores, for every candidate: cosine similarity, and Okapi BM25 over the namespaces in
-- scope (document frequencies and lengths from recall_term_stats / recall_text_stats;
-- term frequency and length, in distinct lexemes, from the row's tsvector). The query's
-- lexemes are picked out of a row's tsvector in C (setweight marks them 'A', ts_filter
-- keeps those: to_tsvector gives every lexeme weight D), so only the one to three
-- matched lexemes are unnested, not the row's every word.
-- coverage = BM25 / the sum of the query lexemes' idf (what a row holding every query
-- lexeme once at average length scores): the share of the query's information the row
-- matches, comparable across queries.
-- Fused score = w_vector * max(cosine, 0) + (1 - w_vector) * least(coverage, 1)
-- (cosine alone in vector mode, coverage alone in text mode).
-- An episode still waiting for its vector (embedding NULL) is no vector candidate; found
-- by text, its NULL cosine counts as 0 (GREATEST ignores NULL): it ranks by text alone.
-- Stale episodes: an episode whose derived facts are all retired (superseded, expired or
-- withdrawn) has its score multiplied by stale_factor, so its correction outranks it.
-- Supersession by recency (when supersede): an episode candidate with a newer episode
-- candidate in its namespace (later occurred_at, cosine between the two embeddings >=
-- supersede_similarity, matching every query lexeme the older one matches) scores
-- supersede_margin times that newer one's score, but at least superseded_factor times its
-- own (it drops just below its restatement and otherwise keeps its place).
-- Context: an episode within context_window places (by id) of one of the best
-- context_pool episodes, in the same namespace and session (the same given occurred_at,
-- or the same metadata.session or metadata.thread), gains neighbour_weight times that
-- hit's score.
-- Facts: current only by default; valid at as_of (event time) as known at known_at
-- (system time) when either is given (the other is now); everything with
-- include_history. Episodes: not forgotten; with as_of/known_at: stored by known_at, not
-- forgotten then, occurred by as_of.
WITH
query_lexemes AS (
    SELECT DISTINCT l AS lexeme FROM unnest(tsvector_to_array(to_tsvector('english', %(query)s))) AS l
),
corpus AS (
    SELECT COALESCE(sum(documents), 0)::float8 AS documents,
           GREATEST(COALESCE(sum(total_length), 0)::float8 / NULLIF(sum(documents), 0), 1) AS average_length
    FROM recall_text_stats
    WHERE %(use_text)s AND (%(all_namespaces)s OR namespace_id = ANY(%(namespace_ids)s))
),
terms AS MATERIALIZED (
    -- one index lookup per query word (a join let the planner scan the whole table);
    -- MATERIALIZED: weights reads df five times, each would repeat the lookups
    SELECT q.lexeme,
           (SELECT COALESCE(sum(t.documents), 0)::float8 FROM recall_term_stats t
            WHERE t.lexeme = q.lexeme AND (%(all_namespaces)s OR t.namespace_id = ANY(%(namespace_ids)s))) AS df
    FROM query_lexemes q
    WHERE %(use_text)s
),
weights AS (
    -- every query lexeme, seen or not: a word no row contains is information the query
    -- asks for and no row has (it counts in full_match, so coverage stays low)
    SELECT t.lexeme, t.df, ln(1 + (c.documents - t.df + 0.5) / (t.df + 0.5)) AS idf,
           sum(t.df) OVER (ORDER BY t.df, t.lexeme) AS cumulative_df,
           row_number() OVER (PARTITION BY t.df > 0 ORDER BY t.df, t.lexeme) AS rarity
    FROM terms t, corpus c
),
tq AS (
    SELECT (SELECT NULLIF(array_to_string(ARRAY(
                SELECT '''' || replace(replace(w.lexeme, '\', '\\'), '''', '''''') || ''''
                FROM weights w
                WHERE w.df > 0 AND (w.cumulative_df <= %(text_scan_limit)s OR w.rarity = 1)), ' | '), '')
           )::tsquery AS q_rare,
           (SELECT sum(w.idf) FROM weights w) AS full_match,
           ARRAY(SELECT w.lexeme FROM weights w) AS lexemes
),
fact_vec AS (
    SELECT f.id FROM facts f
    WHERE %(use_vector)s
      AND (%(all_namespaces)s OR f.namespace_id = ANY(%(namespace_ids)s))
      -- fact validity (bitemporal, as facts_query): valid at as_of as known at known_at
      AND ((%(include_history)s AND %(as_of)s::timestamptz IS NULL AND %(known_at)s::timestamptz IS NULL)
           OR (f.recorded_at <= COALESCE(%(known_at)s::timestamptz, now())
               AND (f.withdrawn_at IS NULL OR f.withdrawn_at > COALESCE(%(known_at)s::timestamptz, now()))
               AND f.valid_from <= COALESCE(%(as_of)s::timestamptz, now())
               AND COALESCE(CASE WHEN f.retired_at > COALESCE(%(known_at)s::timestamptz, now())
                                 THEN f.recorded_valid_until ELSE f.valid_until END, 'infinity')
                   > COALESCE(%(as_of)s::timestamptz, now())))
      -- end of fact validity
    ORDER BY embedding_key(f.embedding) <=> embedding_key(%(embedding)s::vector)
    LIMIT %(candidates)s
),
episode_vec AS (
    SELECT e.id FROM episodes e
    WHERE %(use_vector)s AND e.embedding IS NOT NULL  -- a waiting episode is no vector candidate
      AND (%(all_namespaces)s OR e.namespace_id = ANY(%(namespace_ids)s))
      -- episode validity: stored by known_at and not forgotten then, occurred by as_of
      AND (CASE WHEN %(as_of)s::timestamptz IS NULL AND %(known_at)s::timestamptz IS NULL THEN e.deleted_at IS NULL
                ELSE e.created_at <= COALESCE(%(known_at)s::timestamptz, now())
                     AND (e.deleted_at IS NULL OR e.deleted_at > COALESCE(%(known_at)s::timestamptz, now()))
                     AND e.occurred_at <= COALESCE(%(as_of)s::timestamptz, now()) END)
    ORDER BY embedding_key(e.embedding) <=> embedding_key(%(embedding)s::vector)
    LIMIT %(candidates)s
),
fact_text AS (
    SELECT f.id, f.search FROM facts f, tq
    WHERE %(use_text)s AND f.search @@ tq.q_rare
      AND (%(all_namespaces)s OR f.namespace_id = ANY(%(namespace_ids)s))
      -- fact validity (bitemporal, as facts_query): valid at as_of as known at known_at
      AND ((%(include_history)s AND %(as_of)s::timestamptz IS NULL AND %(known_at)s::timestamptz IS NULL)
           OR (f.recorded_at <= COALESCE(%(known_at)s::timestamptz, now())
               AND (f.withdrawn_at IS NULL OR f.withdrawn_at > COALESCE(%(known_at)s::timestamptz, now()))
               AND f.valid_from <= COALESCE(%(as_of)s::timestamptz, now())
               AND COALESCE(CASE WHEN f.retired_at > COALESCE(%(known_at)s::timestamptz, now())
                                 THEN f.recorded_valid_until ELSE f.valid_until END, 'infinity')
                   > COALESCE(%(as_of)s::timestamptz, now())))
      -- end of fact validity
    ORDER BY f.id + 0 DESC  -- "+ 0": sort the matches; walking the primary key backwards
    LIMIT %(text_scan_limit)s    -- and testing each row for the words reads thousands of rows
),
episode_text AS (
    SELECT e.id, e.search FROM episodes e, tq
    WHERE %(use_text)s AND e.search @@ tq.q_rare
      AND (%(all_namespaces)s OR e.namespace_id = ANY(%(namespace_ids)s))
      -- episode validity: stored by known_at and not forgotten then, occurred by as_of
      AND (CASE WHEN %(as_of)s::timestamptz IS NULL AND %(known_at)s::timestamptz IS NULL THEN e.deleted_at IS NULL
                ELSE e.created_at <= COALESCE(%(known_at)s::timestamptz, now())
                     AND (e.deleted_at IS NULL OR e.deleted_at > COALESCE(%(known_at)s::timestamptz, now()))
                     AND e.occurred_at <= COALESCE(%(as_of)s::timestamptz, now()) END)
    ORDER BY e.id + 0 DESC  -- (as in fact_text)
    LIMIT %(text_scan_limit)s
),
-- the best text matches by BM25 join the vector candidates (cosine is computed only for
-- this short list, not for every match); one join and one aggregate over (match, matched
-- lexeme) pairs, not a subquery per match
text_top AS (
    SELECT m.kind, m.id
    FROM (SELECT 'fact'::text AS kind, id, search, length(search) AS doc_length FROM fact_text
          UNION ALL SELECT 'episode'::text, id, search, length(search) FROM episode_text) m
    CROSS JOIN corpus co
    CROSS JOIN tq
    CROSS JOIN LATERAL unnest(ts_filter(setweight(m.search, 'A', tq.lexemes), '{a}')) AS u
    JOIN weights w ON w.lexeme = u.lexeme
    GROUP BY m.kind, m.id, m.doc_length, co.average_length
    ORDER BY sum(w.idf * COALESCE(array_length(u.positions, 1), 1) * (%(k1)s + 1)
                 / (COALESCE(array_length(u.positions, 1), 1)
                    + %(k1)s * (1 - %(b)s + %(b)s * m.doc_length / co.average_length))) DESC, m.id DESC
    LIMIT %(text_candidates)s
),
candidates AS (
    SELECT 'fact'::text AS kind, f.id, f.namespace_id, f.search, f.embedding,
           NULL::timestamptz AS occurred_at, NULL::jsonb AS metadata
    FROM facts f
    WHERE f.id IN (SELECT id FROM fact_vec UNION SELECT id FROM text_top WHERE kind = 'fact')
    UNION ALL
    SELECT 'episode'::text, e.id, e.namespace_id, e.search, e.embedding, e.occurred_at, e.metadata
    FROM episodes e
    WHERE e.id IN (SELECT id FROM episode_vec UNION SELECT id FROM text_top WHERE kind = 'episode')
),
-- MATERIALIZED: every score is computed once per candidate, however often it is used
scored AS MATERIALIZED (
    SELECT c.kind, c.id, c.namespace_id, c.occurred_at, c.metadata, c.embedding,
           CASE WHEN %(use_vector)s THEN 1 - (c.embedding <=> %(embedding)s::vector) END AS cosine,
           CASE WHEN %(use_text)s THEN COALESCE((
               SELECT sum(w.idf * tf.n * (%(k1)s + 1)
                          / (tf.n + %(k1)s * (1 - %(b)s + %(b)s * length(c.search) / co.average_length)))
               FROM unnest(ts_filter(setweight(c.search, 'A', tq.lexemes), '{a}')) AS u
               JOIN weights w ON w.lexeme = u.lexeme
               CROSS JOIN LATERAL (SELECT COALESCE(array_length(u.positions, 1), 1)::float8 AS n) tf), 0) END AS bm25,
           tsvector_to_array(ts_filter(setweight(c.search, 'A', tq.lexemes), '{a}')) AS matched
    FROM candidates c, corpus co, tq
),
judged AS MATERIALIZED (
    SELECT s.*,
           s.bm25 / NULLIF(tq.full_match, 0) AS coverage,
           (CASE WHEN %(use_vector)s AND %(use_text)s
                 THEN %(w_vector)s * GREATEST(s.cosine, 0)
                      + (1 - %(w_vector)s) * LEAST(COALESCE(s.bm25 / NULLIF(tq.full_match, 0), 0), 1)
                 WHEN %(use_vector)s THEN GREATEST(s.cosine, 0)
                 ELSE LEAST(COALESCE(s.bm25 / NULLIF(tq.full_match, 0), 0), 1) END)
           * CASE WHEN s.kind = 'episode' AND %(as_of)s::timestamptz IS NULL AND %(known_at)s::timestamptz IS NULL
                       AND NOT %(include_history)s
                       AND EXISTS (SELECT 1 FROM lineage l
                                   WHERE l.parent_kind = 'episode' AND l.parent_id = s.id AND l.child_kind = 'fact')
                       AND NOT EXISTS (
                           SELECT 1 FROM lineage l JOIN facts f ON f.id = l.child_id
                           WHERE l.parent_kind = 'episode' AND l.parent_id = s.id AND l.child_kind = 'fact'
                             AND f.withdrawn_at IS NULL AND f.valid_from <= now()
                             AND (f.valid_until IS NULL OR f.valid_until > now()))
                  THEN %(stale_factor)s::float8 ELSE 1 END AS score
    FROM scored s, tq
),
-- supersession by recency: the best score among each episode's newer near-duplicates
-- (same namespace, later occurred_at, cosine >= supersede_similarity, matching every
-- query lexeme the older one matches). Only the best supersede_pool candidates are checked
-- (a demotion only lowers a score, so one ranked below them cannot reach the results);
-- that bounds the pairs compared.
fused AS (
    SELECT j.kind, j.id, j.namespace_id, j.occurred_at, j.metadata, j.cosine, j.bm25, j.coverage,
           CASE WHEN newer.score IS NULL THEN j.score
                ELSE GREATEST(%(superseded_factor)s::float8 * j.score,
                              LEAST(j.score, %(supersede_margin)s::float8 * newer.score)) END AS score
    FROM (SELECT x.*, row_number() OVER (ORDER BY x.score DESC, x.id DESC) AS place FROM judged x) j
    LEFT JOIN LATERAL (
        SELECT max(n.score) AS score FROM judged n
        WHERE %(supersede)s AND j.place <= %(supersede_pool)s AND j.kind = 'episode' AND n.kind = 'episode'
          AND %(as_of)s::timestamptz IS NULL AND %(known_at)s::timestamptz IS NULL AND NOT %(include_history)s
          AND n.namespace_id = j.namespace_id AND n.occurred_at > j.occurred_at
          AND n.matched @> j.matched
          AND 1 - (n.embedding <=> j.embedding) >= %(supersede_similarity)s
    ) newer ON true
),
pool AS (
    SELECT f.* FROM fused f WHERE f.kind = 'episode' ORDER BY f.score DESC, f.id DESC LIMIT %(context_pool)s
),
neighbours AS (
    SELECT n.id, max(p.score) AS score
    FROM pool p
    CROSS JOIN LATERAL (
        (SELECT e.id, e.occurred_at, e.created_at, e.metadata FROM episodes e
         WHERE e.namespace_id = p.namespace_id AND e.id < p.id AND e.deleted_at IS NULL
         ORDER BY e.id DESC LIMIT %(context_window)s)
        UNION ALL
        (SELECT e.id, e.occurred_at, e.created_at, e.metadata FROM episodes e
         WHERE e.namespace_id = p.namespace_id AND e.id > p.id AND e.deleted_at IS NULL
         ORDER BY e.id LIMIT %(context_window)s)
    ) n
    WHERE %(neighbour_weight)s::float8 > 0 AND %(as_of)s::timestamptz IS NULL AND %(known_at)s::timestamptz IS NULL
      -- a shared occurred_at marks a session only when it was given: episodes written
      -- without one in the same transaction share now() and are no session
      AND ((n.occurred_at = p.occurred_at AND n.occurred_at <> n.created_at)
           OR n.metadata ->> 'session' = p.metadata ->> 'session'
           OR n.metadata ->> 'thread' = p.metadata ->> 'thread')
    GROUP BY n.id
),
-- neighbours that were no candidate get their own scores too (a handful of rows), so a
-- reply that shares a little with the query and follows a strong hit can rank
extra AS MATERIALIZED (
    SELECT 'episode'::text AS kind, e.id, 1 - (e.embedding <=> %(embedding)s::vector) AS cosine,
           COALESCE((
               SELECT sum(w.idf * tf.n * (%(k1)s + 1)
                          / (tf.n + %(k1)s * (1 - %(b)s + %(b)s * length(e.search) / co.average_length)))
               FROM unnest(ts_filter(setweight(e.search, 'A', tq.lexemes), '{a}')) AS u
               JOIN weights w ON w.lexeme = u.lexeme
               CROSS JOIN LATERAL (SELECT COALESCE(array_length(u.positions, 1), 1)::float8 AS n) tf), 0) AS bm25
    FROM episodes e, corpus co, tq
    WHERE e.id IN (SELECT n.id FROM neighbours n)
      AND e.id NOT IN (SELECT f.id FROM fused f WHERE f.kind = 'episode')
),
own AS (
    SELECT f.kind, f.id, f.cosine, f.bm25, f.coverage, f.score FROM fused f
    UNION ALL
    -- (neighbours exist in hybrid mode only, so this is the hybrid formula)
    SELECT x.kind, x.id, x.cosine, x.bm25, x.bm25 / NULLIF(tq.full_match, 0),
           %(w_vector)s * GREATEST(x.cosine, 0)
           + (1 - %(w_vector)s) * LEAST(COALESCE(x.bm25 / NULLIF(tq.full_match, 0), 0), 1)
    FROM extra x, tq
),
ranked AS (
    SELECT o.kind, o.id, o.cosine, o.bm25, o.coverage, o.score AS own_score,
           %(neighbour_weight)s::float8 * nb.score AS context_score,
           o.score + %(neighbour_weight)s::float8 * COALESCE(nb.score, 0) AS score
    FROM own o LEFT JOIN neighbours nb ON o.kind = 'episode' AND nb.id = o.id
    ORDER BY score DESC, kind, id DESC
    LIMIT %(limit)s
)
SELECT r.kind, r.id, r.score, r.cosine, r.bm25, r.coverage, r.own_score, r.context_score,
       n.slug AS namespace, COALESCE(f.content, e.content) AS content,
       f.confidence, f.valid_from, f.valid_until, f.withdrawn_at,
       CASE WHEN r.kind = 'fact' THEN
           (f.withdrawn_at IS NULL AND f.valid_from <= now() AND (f.valid_until IS NULL OR f.valid_until > now()))
       END AS current,
       CASE WHEN r.kind = 'fact' THEN
           ARRAY(SELECT l.parent_id FROM lineage l
                 WHERE l.child_kind = 'fact' AND l.child_id = f.id AND l.parent_kind = 'episode'
                 ORDER BY l.parent_id)
       END AS source_episode_ids,
       e.metadata, e.occurred_at
FROM ranked r
LEFT JOIN facts f ON r.kind = 'fact' AND f.id = r.id
LEFT JOIN episodes e ON r.kind = 'episode' AND e.id = r.id
JOIN namespaces n ON n.id = COALESCE(f.namespace_id, e.namespace_id)
ORDER BY r.score DESC, r.kind, r.id DESC

-- bench_before_recall_neighbours --
-- (before one round trip) The turns around each hit (for recall's context option): up to %(window)s episodes on
-- each side by id, in the hit's namespace and session (the same given occurred_at, or the
-- same metadata.session or metadata.thread), not forgotten.
SELECT h.id AS hit_id, n.id, n.content, n.occurred_at
FROM episodes h
CROSS JOIN LATERAL (
    (SELECT e.id, e.content, e.occurred_at, e.created_at, e.metadata FROM episodes e
     WHERE e.namespace_id = h.namespace_id AND e.id < h.id AND e.deleted_at IS NULL
     ORDER BY e.id DESC LIMIT %(window)s)
    UNION ALL
    (SELECT e.id, e.content, e.occurred_at, e.created_at, e.metadata FROM episodes e
     WHERE e.namespace_id = h.namespace_id AND e.id > h.id AND e.deleted_at IS NULL
     ORDER BY e.id LIMIT %(window)s)
) n
WHERE h.id = ANY(%(ids)s)
  AND ((n.occurred_at = h.occurred_at AND n.occurred_at <> n.created_at)
       OR n.metadata ->> 'session' = h.metadata ->> 'session'
       OR n.metadata ->> 'thread' = h.metadata ->> 'thread')
ORDER BY h.id, n.id

-- bench_bare_hnsw --
-- The floor for "the ten nearest memories": one HNSW top-10 over the episodes, default
-- settings, no filter, no scoring (bench/recall_service.py).
SELECT id, content FROM episodes
ORDER BY embedding_key(embedding) <=> embedding_key(%(embedding)s::vector)
LIMIT 10

-- bench_lineage_fill --
-- Lineage for the recall-latency fill: fact n (by id) rests on episodes 4n-1 and 4n (by
-- id), so fact hits carry source turns for recall's grouping to read.
INSERT INTO lineage (child_kind, child_id, parent_kind, parent_id, namespace_id)
SELECT 'fact', f.id, 'episode', e.id, f.namespace_id
FROM (SELECT id, namespace_id, row_number() OVER (ORDER BY id) AS n FROM facts
      WHERE namespace_id = %(namespace_id)s) f
JOIN (SELECT id, row_number() OVER (ORDER BY id) AS n FROM episodes WHERE namespace_id = %(namespace_id)s) e
  ON e.n IN (4 * f.n - 1, 4 * f.n)
ON CONFLICT DO NOTHING

-- bench_interchange_fill_episodes --
-- N episodes in /bench (~200 characters, metadata, a 384-dimension vector), server side.
INSERT INTO episodes (namespace_id, content, metadata, embedding, embedding_model, occurred_at)
SELECT n.id, 'episode ' || g || ': ' || repeat(md5(g::text), 6), jsonb_build_object('n', g),
       array_fill((g %% 97) / 97.0, ARRAY[384])::vector, %(model)s, now() - g * interval '1 second'
  FROM namespaces n, generate_series(1, %(episodes)s) g WHERE n.slug = '/bench'

-- bench_interchange_fill_facts --
-- N facts in /bench, each drawn from one episode (a lineage edge the import re-points).
WITH f AS (
    INSERT INTO facts (namespace_id, content, entity, property, value, origin, embedding, embedding_model)
    SELECT n.id, 'fact ' || g || ': ' || md5(g::text), 'entity ' || (g %% 500), 'property', md5(g::text),
           'synthesis', array_fill((g %% 89) / 89.0, ARRAY[384])::vector, %(model)s
      FROM namespaces n, generate_series(1, %(facts)s) g WHERE n.slug = '/bench'
    RETURNING id, namespace_id)
INSERT INTO lineage (child_kind, child_id, parent_kind, parent_id, namespace_id)
SELECT 'fact', f.id, 'episode', (SELECT min(id) FROM episodes) + f.id %% %(episodes)s, f.namespace_id
  FROM f  -- a fresh database: the episodes' ids are contiguous

-- bench_interchange_indexes --
-- The vector and full-text indexes of episodes and facts: dropped before the fill, so
-- neither the fill nor the two imports maintain them (the writer is what is measured).
SELECT indexname FROM pg_indexes
 WHERE schemaname = 'public' AND tablename IN ('episodes', 'facts')
   AND (indexdef ILIKE '%%using hnsw%%' OR indexdef ILIKE '%%using gin%%')

-- bench_before_interchange_insert_rows --
-- The import's insert before the set-based one: interchange_insert (migration 0004),
-- dynamic SQL once per row, in array order; each result the inserted row or NULL.
SELECT x.n, interchange_insert(%(table)s::regclass, x.r) AS row
  FROM jsonb_array_elements(%(rows)s) WITH ORDINALITY AS x(r, n)
