-- recall_search_params --
-- Per-transaction settings for recall_hybrid: a wider HNSW beam and iterative scans, so
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

-- recall_hybrid --
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
    ORDER BY f.embedding <=> %(embedding)s::vector
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
    ORDER BY e.embedding <=> %(embedding)s::vector
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
WHERE e.deleted_at IS NULL AND e.embedding IS NOT NULL
  AND (%(all_namespaces)s OR e.namespace_id = ANY(%(namespace_ids)s))
ORDER BY e.embedding <=> %(embedding)s::vector
LIMIT %(limit)s

-- recall_neighbours --
-- The turns around each hit (for recall's context option): up to %(window)s episodes on
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

-- recall_entity_names --
-- The entities a query names (entity leg of hybrid recall, stash_pipeline.memory.
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

-- recall_entity_facts --
-- The entity leg's candidates: current facts about the named entities (%(entity_ids)s, with
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

-- recall_source_turns --
-- The source episodes of recall's fact hits (memory/recall_grouping.py), compactly: when
-- each occurred, its session marks (metadata) and the first %(excerpt_chars)s characters
-- (one more, so the caller can tell the text was cut). Episodes forgotten (as known at
-- %(known_at)s, now by default) are left out, as recall leaves them out.
SELECT e.id, e.occurred_at, e.metadata, left(e.content, %(excerpt_chars)s + 1) AS content
FROM episodes e
WHERE e.id = ANY(%(ids)s)
  AND (CASE WHEN %(known_at)s::timestamptz IS NULL THEN e.deleted_at IS NULL
            ELSE e.created_at <= %(known_at)s::timestamptz
                 AND (e.deleted_at IS NULL OR e.deleted_at > %(known_at)s::timestamptz) END)
ORDER BY e.id
