-- recall_search_params --
-- Per-transaction settings for the recall statement (and the other HNSW reads): a wider
-- HNSW beam and iterative scans, so namespace and validity filters applied during the
-- index scan still yield enough candidates; a generic plan once the statement is prepared
-- (the client prepares a query run 5 times on a connection), since planning this
-- statement costs about as much as running it and its best plan does not depend on the
-- values; and no read of a whole facts or episodes table at any size: at a few thousand
-- rows the planner would otherwise read every row (a sequential scan, or a bitmap scan of
-- a partial index) and sort it by distance instead of asking the HNSW index. With sorts
-- off, a plan that needs no sort for the nearest rows wins; the sorts every plan needs
-- (text matches, the final order) are still made, and the entity leg's ordered reads have
-- (entity, order) indexes (0011), so no plan walks a whole index to avoid a sort.
-- Incremental sorts off too: they are not sorts to enable_sort, and with them the context
-- reads below took every turn of the namespace by another index and sorted it.
-- No parallel workers: a recall reads a few hundred rows, and starting workers costs more
-- than that (the exact read of a small scope, planned as a parallel sort, started them on
-- every recall although its one-time test then skipped it: about 8 ms).
SELECT set_config('hnsw.ef_search', %(ef_search)s, true) AS ef_search,
       set_config('hnsw.iterative_scan', 'relaxed_order', true) AS iterative_scan,
       set_config('plan_cache_mode', 'force_generic_plan', true) AS plan_cache_mode,
       set_config('enable_seqscan', 'off', true) AS enable_seqscan,
       set_config('enable_sort', 'off', true) AS enable_sort,
       set_config('enable_incremental_sort', 'off', true) AS enable_incremental_sort,
       set_config('max_parallel_workers_per_gather', '0', true) AS max_parallel_workers_per_gather

-- recall_check --
-- Pipelined with recall_search_params and the recall statement (one round trip, one
-- transaction): which of the %(paths)s name no namespace (recall then raises
-- NamespaceNotFound), and whether the query still needs its vector computed (none given
-- and none in the embedding cache: recall embeds it and runs the statement again).
SELECT ARRAY(SELECT p.slug FROM unnest(%(paths)s::text[]) AS p(slug)
             WHERE p.slug <> '/'
               AND NOT EXISTS (
                   SELECT 1 FROM namespaces n
                   WHERE n.slug = p.slug
                      OR n.slug LIKE replace(replace(replace(p.slug, '\', '\\'), '%%', '\%%'), '_', '\_') || '/%%'))
           AS missing,
       (%(use_vector)s AND %(embedding)s::vector IS NULL
        AND NOT EXISTS (SELECT 1 FROM embedding_cache c
                        WHERE c.text_hash = %(text_hash)s AND c.model = %(embedding_model)s
                          AND c.endpoint = %(embedding_endpoint)s)) AS needs_vector

-- recall --
-- Recall in one statement: the namespaces in scope, the entity leg, the hybrid candidates,
-- their scores and context neighbours, the fusion, the best %(fetch_limit)s by rank (facts
-- weighted, %(fact_weight)s, unless they restate a source word for word or match the
-- query's meaning below %(weight_min_cosine)s; the entity leg's facts all kept with
-- %(entity_pool)s), each
-- fact's source turns and each episode hit's context turns: the rows grouping
-- (memory/recall_grouping.py) folds into the %(limit)s results. Run after
-- recall_search_params and recall_check (one pipelined round trip, one transaction: memory/recall.py).
--
-- Scope: the namespaces %(paths)s name and their descendants (resolve_namespace_tree's
-- rule), unless %(all_namespaces)s.
--
-- Candidates: HNSW cosine over facts and over episodes (%(candidates)s each, read in the
-- half-precision embedding_key order of their indexes: 0019; every score is full
-- precision; exact, by full-precision cosine, in a scope of at most %(exact_scan_limit)s
-- live memories), and
-- full-text matches of the query's RAREST lexemes: lexemes are taken in ascending
-- document frequency while their summed frequency fits %(text_scan_limit)s, so the rows
-- matched are bounded by construction (latency stays flat as the store grows) and no
-- older row is dropped for a newer one. When even the rarest lexeme is that common, the
-- rows holding both of the two rarest are matched (the word index intersects their lists,
-- so far fewer rows are fetched than every match of the rarest), their newest
-- %(text_scan_limit)s; only when fewer than %(text_pair_min)s rows hold both (per kind)
-- are the newest %(text_scan_limit)s matches of the rarest alone added.
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
-- Stale episodes: an episode whose derived facts in scope are all retired (superseded,
-- expired or withdrawn) has its score multiplied by stale_factor, so its correction
-- outranks it (facts outside the scope, e.g. a parent namespace's citing a child's turn,
-- count for nothing: their withdrawal is not the reader's to see).
-- Supersession by recency (when supersede): an episode candidate with a newer episode
-- candidate in its namespace (later occurred_at, cosine between the two embeddings >=
-- supersede_similarity, matching every query lexeme the older one matches) scores
-- supersede_margin times that newer one's score, but at least superseded_factor times its
-- own (it drops just below its restatement and otherwise keeps its place).
-- Context: an episode within context_window places (by id) of one of the best
-- context_pool episodes, in the same namespace and session (the same given occurred_at,
-- or the same metadata.session or metadata.thread), gains neighbour_weight times that
-- hit's score.
-- Visibility (fact_visible, episode_visible, relationship_visible: migration 0012, one
-- definition for every read): facts current by default, valid at as_of as known at
-- known_at when either is given, everything with include_history; episodes not
-- forgotten, or stored by known_at, not forgotten then and occurred by as_of.
-- Entity leg (when %(phrases)s name an alias in scope): the visible facts of the named
-- entities and of their neighbours one visible relationship away, bounded (at most
-- %(max_named)s named, %(links_per_entity)s newest links each, %(max_neighbours)s
-- neighbours, %(facts_per_entity)s newest facts per entity, the best %(max_facts)s),
-- scored as a fact is here except that the query words of the alias that named its
-- entity count as matched when the fact lacks them: entity_credit times their idf but at
-- least entity_match of the query, times hop_factor one hop away.
WITH
{{ recall_scope }},
{{ recall_words }},
{{ recall_exact }},
{{ recall_vector_leg }},
{{ recall_text_leg }},
{{ recall_scoring }},
{{ recall_context }},
{{ recall_entity_leg }},
{{ recall_fusion }}
{{ recall_result }}

-- recall_scope() --
-- the query's vector: the one given, else the embedding cache's (%(text_hash)s under the
-- configured model and endpoint), so a query seen before needs no round trip of its own;
-- when there is none (recall_check says so), nothing below finds anything and recall
-- embeds the query and runs again
query_vector AS MATERIALIZED (
    SELECT v, (v IS NOT NULL OR NOT %(use_vector)s) AS ready
    FROM (SELECT COALESCE(%(embedding)s::vector,
                          (SELECT c.embedding FROM embedding_cache c
                           WHERE c.text_hash = %(text_hash)s AND c.model = %(embedding_model)s
                             AND c.endpoint = %(embedding_endpoint)s)) AS v) q
),
scope AS MATERIALIZED (
    SELECT COALESCE(array_agg(n.id), '{}')::bigint[] AS ids
    FROM namespaces n
    WHERE NOT %(all_namespaces)s
      AND EXISTS (SELECT 1 FROM unnest(%(paths)s::text[]) AS p(slug)
                  WHERE n.slug = p.slug
                     OR n.slug LIKE replace(replace(replace(p.slug, '\', '\\'), '%%', '\%%'), '_', '\_') || '/%%')
)

-- recall_words() --
query_lexemes AS (
    SELECT DISTINCT l AS lexeme FROM unnest(tsvector_to_array(to_tsvector('english', %(query)s))) AS l
    WHERE (SELECT ready FROM query_vector)
),
-- The text leg's reads are written once for all namespaces and once for the scope, each
-- guarded by %(all_namespaces)s alone (a one-time test: only one of them runs), not as
-- "%(all_namespaces)s OR namespace_id = ANY(scope)": under the generic plan recall runs,
-- that OR cannot use a namespace index, so every row matching a word in ANY namespace
-- was fetched and tested (21 ms p50 with 200 namespaces, against 2 ms with the values).
corpus AS (
    SELECT COALESCE(sum(s.documents), 0)::float8 AS documents,
           GREATEST(COALESCE(sum(s.total_length), 0)::float8 / NULLIF(sum(s.documents), 0), 1) AS average_length
    FROM (SELECT documents, total_length FROM recall_text_stats WHERE %(all_namespaces)s
          UNION ALL
          SELECT documents, total_length FROM recall_text_stats
          WHERE NOT %(all_namespaces)s AND namespace_id = ANY((SELECT ids FROM scope)::bigint[])) s
    WHERE %(use_text)s
),
terms AS MATERIALIZED (
    -- one index lookup per query word (a join let the planner scan the whole table);
    -- MATERIALIZED: weights reads df five times, each would repeat the lookups
    SELECT q.lexeme,
           CASE WHEN %(all_namespaces)s
                THEN (SELECT COALESCE(sum(t.documents), 0)::float8 FROM recall_term_stats t WHERE t.lexeme = q.lexeme)
                ELSE (SELECT COALESCE(sum(t.documents), 0)::float8 FROM recall_term_stats t
                      WHERE t.namespace_id = ANY((SELECT ids FROM scope)::bigint[]) AND t.lexeme = q.lexeme) END AS df
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
           -- the rarest lexeme in more than text_scan_limit rows: it and the next rarest
           (SELECT CASE WHEN count(*) = 2 AND min(w.df) > %(text_scan_limit)s THEN
                       string_agg('''' || replace(replace(w.lexeme, '\', '\\'), '''', '''''') || '''', ' & ') END
            FROM weights w WHERE w.df > 0 AND w.rarity <= 2)::tsquery AS q_pair,
           (SELECT sum(w.idf) FROM weights w) AS full_match,
           ARRAY(SELECT w.lexeme FROM weights w) AS lexemes
)

-- recall_exact() --
-- a scope of at most %(exact_scan_limit)s live memories is ranked exactly: each of its rows
-- is compared with the query, read by the namespace index. The HNSW walk filters by
-- namespace as it goes, so in a large store it passes mostly other namespaces' rows before
-- it has enough of a small one's (an 80-turn namespace beside 100,000: about 400 ms).
-- The text leg's reads in such a scope test each of its rows for the query's words too (the
-- word index would fetch a word's matches in every namespace: rare in a small scope, a
-- word may be common beside it). A one-time test, as the text leg's: only one branch of
-- each read runs.
exact AS MATERIALIZED (
    SELECT NOT %(all_namespaces)s
           AND COALESCE((SELECT sum(s.documents) FROM recall_text_stats s
                         WHERE s.namespace_id = ANY((SELECT ids FROM scope)::bigint[])), 0)
               <= %(exact_scan_limit)s AS small
)

-- recall_vector_leg() --
-- the vector candidates carry the columns scoring needs: the HNSW scan has their rows in
-- hand, so candidates fetches again only the text matches the vector reads did not find
fact_vec AS (
    (SELECT f.id, f.namespace_id, f.search, f.embedding FROM facts f
     WHERE %(use_vector)s AND (SELECT ready FROM query_vector) AND NOT (SELECT small FROM exact)
       AND (%(all_namespaces)s OR f.namespace_id = ANY((SELECT ids FROM scope)::bigint[]))
       AND fact_visible(f, %(as_of)s, %(known_at)s, %(include_history)s)
     ORDER BY embedding_key(f.embedding) <=> embedding_key((SELECT v FROM query_vector))  -- the half-precision index (0019)
     LIMIT %(candidates)s)
    UNION ALL
    -- ("+ 0": an order no index gives, so the scope's rows are read and sorted)
    (SELECT f.id, f.namespace_id, f.search, f.embedding FROM facts f
     WHERE %(use_vector)s AND (SELECT ready FROM query_vector) AND (SELECT small FROM exact)
       AND f.namespace_id = ANY((SELECT ids FROM scope)::bigint[])
       AND fact_visible(f, %(as_of)s, %(known_at)s, %(include_history)s)
     ORDER BY (f.embedding <=> (SELECT v FROM query_vector)) + 0
     LIMIT %(candidates)s)
),
episode_vec AS (
    (SELECT e.id, e.namespace_id, e.search, e.embedding, e.occurred_at, e.metadata FROM episodes e
     WHERE %(use_vector)s AND (SELECT ready FROM query_vector) AND NOT (SELECT small FROM exact)
       AND e.embedding IS NOT NULL  -- a waiting episode is no vector candidate
       AND (%(all_namespaces)s OR e.namespace_id = ANY((SELECT ids FROM scope)::bigint[]))
       AND episode_visible(e, %(as_of)s, %(known_at)s)
     ORDER BY embedding_key(e.embedding) <=> embedding_key((SELECT v FROM query_vector))
     LIMIT %(candidates)s)
    UNION ALL
    (SELECT e.id, e.namespace_id, e.search, e.embedding, e.occurred_at, e.metadata FROM episodes e
     WHERE %(use_vector)s AND (SELECT ready FROM query_vector) AND (SELECT small FROM exact)
       AND e.embedding IS NOT NULL
       AND e.namespace_id = ANY((SELECT ids FROM scope)::bigint[])
       AND episode_visible(e, %(as_of)s, %(known_at)s)
     ORDER BY (e.embedding <=> (SELECT v FROM query_vector)) + 0
     LIMIT %(candidates)s)
)

-- recall_text_leg() --
-- (scoped: the word index's matches ANDed with the namespace index's rows in scope; in a
-- small scope (exact, above) the scope's rows by the namespace index, each tested for the
-- words: "IS TRUE" keeps the word index out, which would fetch the words' matches in every
-- namespace, and a word rare in a small scope may be common beside it)
-- the rows holding both rarest lexemes (none unless tq.q_pair is set)
fact_pair AS (
    (SELECT f.id, f.search FROM facts f, tq
     WHERE %(use_text)s AND %(all_namespaces)s AND f.search @@ tq.q_pair
       AND fact_visible(f, %(as_of)s, %(known_at)s, %(include_history)s)
     ORDER BY f.id + 0 DESC  -- "+ 0": sort the matches; walking the primary key backwards
     LIMIT %(text_scan_limit)s)  -- and testing each row for the words reads thousands of rows
    UNION ALL
    (SELECT f.id, f.search FROM facts f, tq
     WHERE %(use_text)s AND NOT %(all_namespaces)s AND NOT (SELECT small FROM exact) AND f.search @@ tq.q_pair
       AND f.namespace_id = ANY((SELECT ids FROM scope)::bigint[])
       AND fact_visible(f, %(as_of)s, %(known_at)s, %(include_history)s)
     ORDER BY f.id + 0 DESC
     LIMIT %(text_scan_limit)s)
    UNION ALL
    (SELECT f.id, f.search FROM facts f, tq
     WHERE %(use_text)s AND (SELECT small FROM exact) AND (f.search @@ tq.q_pair) IS TRUE
       AND f.namespace_id = ANY((SELECT ids FROM scope)::bigint[])
       AND fact_visible(f, %(as_of)s, %(known_at)s, %(include_history)s)
     ORDER BY f.id + 0 DESC
     LIMIT %(text_scan_limit)s)
),
-- the pair's rows, and the rare lexemes' newest matches when the pair found too few
-- (the count a one-time test: with enough pairs the rarest's matches are never fetched)
fact_text AS (
    SELECT id, search FROM fact_pair
    UNION ALL
    (SELECT f.id, f.search FROM facts f, tq
     WHERE %(use_text)s AND %(all_namespaces)s AND f.search @@ tq.q_rare
       AND (SELECT count(*) FROM fact_pair) < %(text_pair_min)s AND f.id NOT IN (SELECT id FROM fact_pair)
       AND fact_visible(f, %(as_of)s, %(known_at)s, %(include_history)s)
     ORDER BY f.id + 0 DESC
     LIMIT %(text_scan_limit)s)
    UNION ALL
    (SELECT f.id, f.search FROM facts f, tq
     WHERE %(use_text)s AND NOT %(all_namespaces)s AND NOT (SELECT small FROM exact) AND f.search @@ tq.q_rare
       AND (SELECT count(*) FROM fact_pair) < %(text_pair_min)s AND f.id NOT IN (SELECT id FROM fact_pair)
       AND f.namespace_id = ANY((SELECT ids FROM scope)::bigint[])
       AND fact_visible(f, %(as_of)s, %(known_at)s, %(include_history)s)
     ORDER BY f.id + 0 DESC
     LIMIT %(text_scan_limit)s)
    UNION ALL
    (SELECT f.id, f.search FROM facts f, tq
     WHERE %(use_text)s AND (SELECT small FROM exact) AND (f.search @@ tq.q_rare) IS TRUE
       AND (SELECT count(*) FROM fact_pair) < %(text_pair_min)s AND f.id NOT IN (SELECT id FROM fact_pair)
       AND f.namespace_id = ANY((SELECT ids FROM scope)::bigint[])
       AND fact_visible(f, %(as_of)s, %(known_at)s, %(include_history)s)
     ORDER BY f.id + 0 DESC
     LIMIT %(text_scan_limit)s)
),
-- (as fact_pair and fact_text)
episode_pair AS (
    (SELECT e.id, e.search FROM episodes e, tq
     WHERE %(use_text)s AND %(all_namespaces)s AND e.search @@ tq.q_pair
       AND episode_visible(e, %(as_of)s, %(known_at)s)
     ORDER BY e.id + 0 DESC
     LIMIT %(text_scan_limit)s)
    UNION ALL
    (SELECT e.id, e.search FROM episodes e, tq
     WHERE %(use_text)s AND NOT %(all_namespaces)s AND NOT (SELECT small FROM exact) AND e.search @@ tq.q_pair
       AND e.namespace_id = ANY((SELECT ids FROM scope)::bigint[])
       AND episode_visible(e, %(as_of)s, %(known_at)s)
     ORDER BY e.id + 0 DESC
     LIMIT %(text_scan_limit)s)
    UNION ALL
    (SELECT e.id, e.search FROM episodes e, tq
     WHERE %(use_text)s AND (SELECT small FROM exact) AND (e.search @@ tq.q_pair) IS TRUE
       AND e.namespace_id = ANY((SELECT ids FROM scope)::bigint[])
       AND episode_visible(e, %(as_of)s, %(known_at)s)
     ORDER BY e.id + 0 DESC
     LIMIT %(text_scan_limit)s)
),
episode_text AS (
    SELECT id, search FROM episode_pair
    UNION ALL
    (SELECT e.id, e.search FROM episodes e, tq
     WHERE %(use_text)s AND %(all_namespaces)s AND e.search @@ tq.q_rare
       AND (SELECT count(*) FROM episode_pair) < %(text_pair_min)s AND e.id NOT IN (SELECT id FROM episode_pair)
       AND episode_visible(e, %(as_of)s, %(known_at)s)
     ORDER BY e.id + 0 DESC
     LIMIT %(text_scan_limit)s)
    UNION ALL
    (SELECT e.id, e.search FROM episodes e, tq
     WHERE %(use_text)s AND NOT %(all_namespaces)s AND NOT (SELECT small FROM exact) AND e.search @@ tq.q_rare
       AND (SELECT count(*) FROM episode_pair) < %(text_pair_min)s AND e.id NOT IN (SELECT id FROM episode_pair)
       AND e.namespace_id = ANY((SELECT ids FROM scope)::bigint[])
       AND episode_visible(e, %(as_of)s, %(known_at)s)
     ORDER BY e.id + 0 DESC
     LIMIT %(text_scan_limit)s)
    UNION ALL
    (SELECT e.id, e.search FROM episodes e, tq
     WHERE %(use_text)s AND (SELECT small FROM exact) AND (e.search @@ tq.q_rare) IS TRUE
       AND (SELECT count(*) FROM episode_pair) < %(text_pair_min)s AND e.id NOT IN (SELECT id FROM episode_pair)
       AND e.namespace_id = ANY((SELECT ids FROM scope)::bigint[])
       AND episode_visible(e, %(as_of)s, %(known_at)s)
     ORDER BY e.id + 0 DESC
     LIMIT %(text_scan_limit)s)
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
)

-- recall_scoring() --
-- each candidate's tsvector and vector detoasted here, once: a value stored out of line or
-- compressed stays a pointer in the materialised CTEs below and would be fetched and
-- expanded again at every use (the cosine, BM25, the supersession and copy comparisons).
-- setweight(.., 'D') is the identity on these columns (to_tsvector weighs every lexeme D)
-- and vector(.., -1, true) is pgvector's dimension check with none to make: both return
-- the value expanded.
candidates AS (
    SELECT 'fact'::text AS kind, v.id, v.namespace_id, setweight(v.search, 'D') AS search,
           vector(v.embedding, -1, true) AS embedding, NULL::timestamptz AS occurred_at, NULL::jsonb AS metadata
    FROM fact_vec v
    UNION ALL
    SELECT 'fact'::text, f.id, f.namespace_id, setweight(f.search, 'D'), vector(f.embedding, -1, true), NULL, NULL
    FROM facts f
    WHERE f.id IN (SELECT id FROM text_top WHERE kind = 'fact') AND f.id NOT IN (SELECT id FROM fact_vec)
    UNION ALL
    SELECT 'episode'::text, v.id, v.namespace_id, setweight(v.search, 'D'), vector(v.embedding, -1, true),
           v.occurred_at, v.metadata
    FROM episode_vec v
    UNION ALL
    SELECT 'episode'::text, e.id, e.namespace_id, setweight(e.search, 'D'), vector(e.embedding, -1, true),
           e.occurred_at, e.metadata
    FROM episodes e
    WHERE e.id IN (SELECT id FROM text_top WHERE kind = 'episode') AND e.id NOT IN (SELECT id FROM episode_vec)
),
-- MATERIALIZED: every score is computed once per candidate, however often it is used
scored AS MATERIALIZED (
    SELECT c.kind, c.id, c.namespace_id, c.occurred_at, c.metadata, c.embedding,
           CASE WHEN %(use_vector)s THEN 1 - (c.embedding <=> (SELECT v FROM query_vector)) END AS cosine,
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
           * CASE WHEN stale.derived > 0 AND stale.current = 0 THEN %(stale_factor)s::float8 ELSE 1 END AS score,
           copy.restates
    FROM scored s
    CROSS JOIN tq
    -- the episode's derived facts, and how many are current: one read of the lineage's
    -- parent index per episode candidate. Not EXISTS / NOT EXISTS: under the generic plan
    -- (thousands of candidates estimated) those became hashed subplans that read every
    -- fact's lineage and every fact on each recall (38 ms of server CPU at 20,000 facts
    -- with two sources each); an aggregate per row cannot be hashed
    CROSS JOIN LATERAL (
        SELECT count(*) AS derived,
               count(*) FILTER (WHERE f.id IS NOT NULL AND fact_visible(f, NULL, NULL, false)) AS current
        FROM lineage l LEFT JOIN facts f ON f.id = l.child_id
        WHERE s.kind = 'episode' AND %(as_of)s::timestamptz IS NULL AND %(known_at)s::timestamptz IS NULL
          AND NOT %(include_history)s
          AND l.parent_kind = 'episode' AND l.parent_id = s.id AND l.child_kind = 'fact'
          -- only facts in scope count: a withdrawal elsewhere (a parent namespace's fact
          -- citing this episode) must not show in this recall's scores
          AND (%(all_namespaces)s OR f.namespace_id = ANY((SELECT ids FROM scope)::bigint[]))
    ) stale
    -- restates: a fact whose embedding is at least copy_similarity (cosine) like one of its
    -- source episodes' says what that episode says in its words: it takes no fact weight
    -- (ranked; the weight is for facts that restate turns in plain words; a copy lifted by
    -- it outranks episodes that match the query better, with no evidence of its own to
    -- show for it). One read of the lineage's primary key per fact candidate, its vector
    -- the one scored holds (an aggregate per row: an EXISTS may become a hashed subplan
    -- reading every fact's lineage)
    CROSS JOIN LATERAL (
        SELECT count(*) > 0 AS restates
        FROM lineage l JOIN episodes e ON e.id = l.parent_id
        WHERE s.kind = 'fact' AND l.child_kind = 'fact' AND l.child_id = s.id AND l.parent_kind = 'episode'
          AND 1 - (s.embedding <=> e.embedding) >= %(copy_similarity)s
    ) copy
),
-- supersession by recency: the best score among each episode's newer near-duplicates
-- (same namespace, later occurred_at, cosine >= supersede_similarity, matching every
-- query lexeme the older one matches). Only the best supersede_pool candidates are checked
-- (a demotion only lowers a score, so one ranked below them cannot reach the results);
-- that bounds the pairs compared.
fused AS (
    SELECT j.kind, j.id, j.namespace_id, j.occurred_at, j.metadata, j.cosine, j.bm25, j.coverage, j.restates,
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
)

-- recall_context() --
pool AS (
    SELECT f.* FROM fused f WHERE f.kind = 'episode' ORDER BY f.score DESC, f.id DESC LIMIT %(context_pool)s
),
-- (the turns either side, read by the (namespace_id, id) index from the hit's entry:
-- "namespace_id >= hit's AND (namespace_id, id) < hit's" is "same namespace, older",
-- written so that only that index can take it and the row comparison places the scan. By
-- the primary key (the generic plan's choice for "namespace_id = AND id <") the first or
-- last turn of a small namespace walked every older or newer row of the others; with the
-- equality the index scan started at the namespace's end and walked to the hit; needs
-- enable_incremental_sort off, recall_search_params)
neighbours AS (
    SELECT n.id, max(p.score) AS score
    FROM pool p
    CROSS JOIN LATERAL (
        (SELECT e.id, e.occurred_at, e.created_at, e.metadata FROM episodes e
         WHERE e.namespace_id >= p.namespace_id AND (e.namespace_id, e.id) < (p.namespace_id, p.id)
           AND e.deleted_at IS NULL
         ORDER BY e.namespace_id DESC, e.id DESC LIMIT %(context_window)s)
        UNION ALL
        (SELECT e.id, e.occurred_at, e.created_at, e.metadata FROM episodes e
         WHERE e.namespace_id <= p.namespace_id AND (e.namespace_id, e.id) > (p.namespace_id, p.id)
           AND e.deleted_at IS NULL
         ORDER BY e.namespace_id, e.id LIMIT %(context_window)s)
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
    SELECT 'episode'::text AS kind, e.id, 1 - (e.embedding <=> (SELECT v FROM query_vector)) AS cosine,
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
    SELECT f.kind, f.id, f.cosine, f.bm25, f.coverage, f.score, f.restates FROM fused f
    UNION ALL
    -- (neighbours exist in hybrid mode only, so this is the hybrid formula)
    SELECT x.kind, x.id, x.cosine, x.bm25, x.bm25 / NULLIF(tq.full_match, 0),
           %(w_vector)s * GREATEST(x.cosine, 0)
           + (1 - %(w_vector)s) * LEAST(COALESCE(x.bm25 / NULLIF(tq.full_match, 0), 0), 1),
           false
    FROM extra x, tq
),
-- a fact that restates its source (judged) takes no fact weight; nor does a fact below
-- weight_min_cosine to the query (matched on a stray word) unless the entity leg reaches it
-- (below: the query names its subject)
ranked AS (
    SELECT x.* FROM (
        SELECT o.kind, o.id, o.cosine, o.bm25, o.coverage, o.score AS own_score,
               %(neighbour_weight)s::float8 * nb.score AS context_score,
               o.score + %(neighbour_weight)s::float8 * COALESCE(nb.score, 0) AS score,
               o.restates
        FROM own o LEFT JOIN neighbours nb ON o.kind = 'episode' AND nb.id = o.id
    ) x
    ORDER BY x.score * CASE WHEN x.kind = 'fact' AND NOT x.restates AND COALESCE(x.cosine, 1) >= %(weight_min_cosine)s
                            THEN %(fact_weight)s::float8 ELSE 1 END DESC,
             x.kind, x.id DESC
    LIMIT %(fetch_limit)s
)

-- recall_entity_leg() --
-- the entity leg (memory/entity_recall.py): the entities the query's phrases name by an
-- alias (MATERIALIZED: found by the (namespace_id, normalised) index, never by walking an
-- entity_id index in order for the LIMIT), with the aliases that matched; written once for
-- all namespaces and once for the scope, as the text leg's reads are: under the generic
-- plan "all OR in scope" read the whole alias index (17 ms with 2,000 namespaces of 30
-- aliases, against 0.03 ms for the scope's (namespace, alias) pairs)
entity_matched AS MATERIALIZED (
    SELECT a.entity_id, a.alias
    FROM entity_aliases a
    WHERE %(all_namespaces)s AND a.normalised = ANY(%(phrases)s::text[]) AND (SELECT ready FROM query_vector)
    UNION ALL
    SELECT a.entity_id, a.alias
    FROM entity_aliases a
    WHERE NOT %(all_namespaces)s AND a.namespace_id = ANY((SELECT ids FROM scope)::bigint[])
      AND a.normalised = ANY(%(phrases)s::text[]) AND (SELECT ready FROM query_vector)
),
entity_named AS MATERIALIZED (
    SELECT m.entity_id, string_agg(m.alias, ' ' ORDER BY m.alias) AS aliases
    FROM entity_matched m
    GROUP BY m.entity_id
    ORDER BY m.entity_id
    LIMIT %(max_named)s
),
-- the query words each named entity's matched aliases account for
entity_words AS (
    SELECT m.entity_id,
           ARRAY(SELECT w.lexeme FROM weights w
                 WHERE w.lexeme = ANY(tsvector_to_array(to_tsvector('english', m.aliases)))) AS words
    FROM entity_named m
),
-- per named entity its newest visible relationships each way (its source fact visible
-- too), by the (entity id, id) indexes
entity_links AS (
    SELECT l.id, l.entity_id, m.entity_id AS named_id
    FROM entity_named m
    CROSS JOIN LATERAL (
        (SELECT r.id, r.to_entity_id AS entity_id FROM relationships r JOIN facts s ON s.id = r.source_fact_id
         WHERE r.from_entity_id = m.entity_id AND r.to_entity_id IS NOT NULL
           AND relationship_visible(r, %(as_of)s, %(known_at)s, %(include_history)s)
           AND fact_visible(s, %(as_of)s, %(known_at)s, %(include_history)s)
         ORDER BY r.id DESC LIMIT %(links_per_entity)s)
        UNION ALL
        (SELECT r.id, r.from_entity_id FROM relationships r JOIN facts s ON s.id = r.source_fact_id
         WHERE r.to_entity_id = m.entity_id AND r.from_entity_id IS NOT NULL
           AND relationship_visible(r, %(as_of)s, %(known_at)s, %(include_history)s)
           AND fact_visible(s, %(as_of)s, %(known_at)s, %(include_history)s)
         ORDER BY r.id DESC LIMIT %(links_per_entity)s)
    ) l
),
-- (named_id: the named entity it was reached from, by its newest link)
entity_neighbours AS (
    SELECT l.entity_id, (array_agg(l.named_id ORDER BY l.id DESC))[1] AS named_id
    FROM entity_links l
    WHERE l.entity_id NOT IN (SELECT entity_id FROM entity_named)
    GROUP BY l.entity_id
    ORDER BY max(l.id) DESC
    LIMIT %(max_neighbours)s
),
entity_reached AS (
    SELECT x.hop, x.named_id, f.id
    FROM (SELECT entity_id, 0 AS hop, entity_id AS named_id FROM entity_named
          UNION ALL
          SELECT nb.entity_id, 1, nb.named_id FROM entity_neighbours nb) x
    CROSS JOIN LATERAL (
        SELECT f.id FROM facts f
        WHERE f.entity_id = x.entity_id
          AND (%(all_namespaces)s OR f.namespace_id = ANY((SELECT ids FROM scope)::bigint[]))
          AND fact_visible(f, %(as_of)s, %(known_at)s, %(include_history)s)
        ORDER BY f.valid_from DESC, f.id DESC
        LIMIT %(facts_per_entity)s
    ) f
),
-- each reached fact once, at its nearest hop, with the named entity whose words it is
-- credited (MATERIALIZED, grouped by hashing: a sorted
-- DISTINCT under recall's settings walked the whole facts primary key to avoid a sort)
entity_facts AS MATERIALIZED (
    SELECT r.id, min(r.hop) AS hop, (array_agg(r.named_id ORDER BY r.hop, r.named_id))[1] AS named_id
    FROM entity_reached r
    GROUP BY r.id
),
-- (MATERIALIZED: each score once per fact; inlined, entity_ranked computed the BM25 and
-- the missing words' subqueries three times each)
entity_scored AS MATERIALIZED (
    SELECT r.id, r.hop, 1 - (f.embedding <=> (SELECT v FROM query_vector)) AS cosine,
           COALESCE((
               SELECT sum(w.idf * tf.n * (%(k1)s + 1)
                          / (tf.n + %(k1)s * (1 - %(b)s + %(b)s * length(f.search) / co.average_length)))
               FROM unnest(f.search) AS u
               JOIN weights w ON w.lexeme = u.lexeme
               CROSS JOIN LATERAL (SELECT COALESCE(array_length(u.positions, 1), 1)::float8 AS n) tf), 0) AS bm25,
           COALESCE((SELECT sum(w.idf) FROM weights w
                     WHERE w.lexeme = ANY(r.words) AND NOT w.lexeme = ANY(tsvector_to_array(f.search))), 0) AS missing
    FROM (SELECT t.id, t.hop, m.words FROM entity_facts t JOIN entity_words m ON m.entity_id = t.named_id) r
    CROSS JOIN LATERAL (SELECT x.embedding, x.search FROM facts x WHERE x.id = r.id) f
    CROSS JOIN corpus co
),
entity_ranked AS (
    SELECT c.id, c.cosine, c.bm25, c.coverage,
           %(w_vector)s * GREATEST(c.cosine, 0) + (1 - %(w_vector)s) * LEAST(COALESCE(c.coverage, 0), 1) AS score
    FROM (SELECT s.id, s.cosine, s.bm25,
                 (s.bm25 + CASE WHEN s.missing > 0
                                THEN power(%(hop_factor)s::float8, s.hop)
                                     * GREATEST(%(entity_credit)s::float8 * s.missing, %(entity_match)s::float8 * tq.full_match)
                                ELSE 0 END) / NULLIF(tq.full_match, 0) AS coverage
          FROM entity_scored s, tq) c
    ORDER BY score DESC, c.id DESC
    LIMIT %(max_facts)s
),
-- the leg's facts that restate a source (as restates above)
entity_copies AS MATERIALIZED (
    SELECT DISTINCT x.id
    FROM entity_ranked x
    JOIN lineage l ON l.child_kind = 'fact' AND l.child_id = x.id AND l.parent_kind = 'episode'
    JOIN facts f ON f.id = x.id
    JOIN episodes e ON e.id = l.parent_id
    WHERE 1 - (f.embedding <=> e.embedding) >= %(copy_similarity)s
)

-- recall_fusion() --
-- fusion with the entity leg: a fact found by both keeps its hybrid row (text and context
-- parts) with the higher score, entity_score the leg's; then the best %(fetch_limit)s by
-- rank (the score times the row's weight: fact_weight on a fact, subject_weight too on
-- one the leg reached, none on a fact that restates its source or, not reached by the
-- leg, is below weight_min_cosine), and with
-- %(entity_pool)s every fact the leg found as well
both_legs AS (
    SELECT r.kind, r.id, r.cosine, r.bm25, r.coverage, r.own_score, r.context_score, r.score,
           NULL::float8 AS entity_score, 0 AS leg, r.restates
    FROM ranked r
    UNION ALL
    SELECT 'fact'::text, x.id, x.cosine, x.bm25, x.coverage, x.score, NULL::float8, x.score, x.score, 1,
           x.id IN (SELECT id FROM entity_copies)
    FROM entity_ranked x
),
fused_legs AS (
    SELECT DISTINCT ON (b.kind, b.id) b.kind, b.id, b.cosine, b.bm25, b.coverage, b.own_score, b.context_score,
           b.restates,
           max(b.score) OVER (PARTITION BY b.kind, b.id) AS score,
           max(b.entity_score) OVER (PARTITION BY b.kind, b.id) AS entity_score
    FROM both_legs b
    ORDER BY b.kind, b.id, b.leg
),
weighed AS (
    SELECT t.*, w.weight, row_number() OVER (ORDER BY t.score * w.weight DESC, t.kind, t.id DESC) AS place
    FROM fused_legs t
    CROSS JOIN LATERAL (
        SELECT CASE WHEN t.kind <> 'fact' OR t.restates THEN 1
                    WHEN t.entity_score IS NOT NULL THEN %(fact_weight)s::float8 * %(subject_weight)s::float8
                    WHEN COALESCE(t.cosine, 1) < %(weight_min_cosine)s THEN 1
                    ELSE %(fact_weight)s::float8 END AS weight) w
),
top AS (
    SELECT t.* FROM weighed t
    WHERE t.place <= %(fetch_limit)s OR (%(entity_pool)s AND t.entity_score IS NOT NULL)
)

-- recall_result() --
SELECT r.kind, r.id, r.score, r.weight, r.cosine, r.bm25, r.coverage, r.own_score, r.context_score, r.entity_score,
       n.slug AS namespace, COALESCE(f.content, e.content) AS content,
       f.confidence, f.valid_from, f.valid_until, f.withdrawn_at,
       CASE WHEN r.kind = 'fact' THEN fact_visible(f, NULL, NULL, false) END AS current,
       CASE WHEN r.kind = 'fact' THEN
           ARRAY(SELECT l.parent_id FROM lineage l
                 WHERE l.child_kind = 'fact' AND l.child_id = f.id AND l.parent_kind = 'episode'
                 ORDER BY l.parent_id)
       END AS source_episode_ids,
       -- a fact's source turns, compactly (memory/recall_grouping.py, with %(excerpt_chars)s
       -- set): when each occurred, its session marks and its first excerpt_chars characters
       -- (one more, so the caller can tell the text was cut); forgotten ones (as known at
       -- known_at, now by default) are left out, as recall leaves them out
       CASE WHEN r.kind = 'fact' AND %(excerpt_chars)s::int IS NOT NULL THEN ARRAY(
           SELECT jsonb_build_object('id', s.id, 'occurred_at', s.occurred_at, 'metadata', s.metadata,
                                     'content', left(s.content, %(excerpt_chars)s::int + 1))
           FROM lineage l JOIN episodes s ON s.id = l.parent_id
           WHERE l.child_kind = 'fact' AND l.child_id = f.id AND l.parent_kind = 'episode'
             AND (CASE WHEN %(known_at)s::timestamptz IS NULL THEN s.deleted_at IS NULL
                       ELSE s.created_at <= %(known_at)s::timestamptz
                            AND (s.deleted_at IS NULL OR s.deleted_at > %(known_at)s::timestamptz) END)
           ORDER BY s.id) END AS sources,
       e.metadata, e.occurred_at,
       -- the result's context: up to %(context)s turns on each side of an episode hit, in
       -- its namespace and session (the same given occurred_at, or the same
       -- metadata.session or metadata.thread), not forgotten, and with as_of or known_at
       -- stored by known_at and occurred by as_of (episode_visible's rule: a turn no
       -- result could be then is no context either). The window is read as without the
       -- times (the partial (namespace_id, id) index, at most %(context)s rows a side) and
       -- the turns not visible then dropped from it: a filter inside the LIMIT would walk
       -- every later turn of the namespace. Those that are results or a fact result's
       -- sources are left out after grouping (memory/recall_grouping.py)
       CASE WHEN r.kind = 'episode' AND %(context)s > 0 THEN ARRAY(
           SELECT jsonb_build_object('id', c.id, 'content', c.content)
           FROM (
               (SELECT x.id, x.content, x.occurred_at, x.created_at, x.metadata FROM episodes x
                WHERE x.namespace_id >= e.namespace_id AND (x.namespace_id, x.id) < (e.namespace_id, e.id)
                  AND x.deleted_at IS NULL
                ORDER BY x.namespace_id DESC, x.id DESC LIMIT %(context)s)
               UNION ALL
               (SELECT x.id, x.content, x.occurred_at, x.created_at, x.metadata FROM episodes x
                WHERE x.namespace_id <= e.namespace_id AND (x.namespace_id, x.id) > (e.namespace_id, e.id)
                  AND x.deleted_at IS NULL
                ORDER BY x.namespace_id, x.id LIMIT %(context)s)
           ) c
           WHERE ((c.occurred_at = e.occurred_at AND c.occurred_at <> c.created_at)
                  OR c.metadata ->> 'session' = e.metadata ->> 'session'
                  OR c.metadata ->> 'thread' = e.metadata ->> 'thread')
             AND (%(as_of)s::timestamptz IS NULL AND %(known_at)s::timestamptz IS NULL
                  OR c.created_at <= COALESCE(%(known_at)s::timestamptz, now())
                     AND c.occurred_at <= COALESCE(%(as_of)s::timestamptz, now()))
           ORDER BY c.id) END AS context
FROM top r
LEFT JOIN facts f ON r.kind = 'fact' AND f.id = r.id
LEFT JOIN episodes e ON r.kind = 'episode' AND e.id = r.id
JOIN namespaces n ON n.id = COALESCE(f.namespace_id, e.namespace_id)
ORDER BY r.place

-- recall_facts_first_facts --
-- The reference's recall, step 1 (benchmark baseline): nearest non-withdrawn facts by raw
-- cosine, with no validity filter (the reference ignored valid_until); read by the
-- half-precision key's index (0019), as recall's candidates are.
SELECT 'fact'::text AS kind, f.id, n.slug AS namespace, f.content, f.confidence, f.valid_from,
       f.valid_until, f.created_at, 1 - (f.embedding <=> %(embedding)s::vector) AS similarity
FROM facts f JOIN namespaces n ON n.id = f.namespace_id
WHERE f.withdrawn_at IS NULL AND (%(all_namespaces)s OR f.namespace_id = ANY(%(namespace_ids)s))
ORDER BY embedding_key(f.embedding) <=> embedding_key(%(embedding)s::vector)
LIMIT %(limit)s

-- recall_facts_first_episodes --
-- The reference's recall, step 2: the remaining slots go to the nearest episodes.
SELECT 'episode'::text AS kind, e.id, n.slug AS namespace, e.content, e.metadata, e.occurred_at,
       e.created_at, 1 - (e.embedding <=> %(embedding)s::vector) AS similarity
FROM episodes e JOIN namespaces n ON n.id = e.namespace_id
WHERE e.deleted_at IS NULL AND e.embedding IS NOT NULL
  AND (%(all_namespaces)s OR e.namespace_id = ANY(%(namespace_ids)s))
ORDER BY embedding_key(e.embedding) <=> embedding_key(%(embedding)s::vector)
LIMIT %(limit)s
