-- Bench-only SQL for bench/text_index.py: pg_textsearch's BM25 index as recall's text leg.

-- text_index_extension --
-- The extension (needs pg_textsearch in shared_preload_libraries).
CREATE EXTENSION IF NOT EXISTS pg_textsearch

-- text_index_available --
-- Whether this server can load pg_textsearch at all.
SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_textsearch') AS available

-- text_index_episodes --
-- BM25 over episode content, the same text search configuration as episodes.search.
CREATE INDEX IF NOT EXISTS episodes_content_bm25 ON episodes USING bm25 (content) WITH (text_config = 'english')

-- text_index_facts --
-- BM25 over fact content.
CREATE INDEX IF NOT EXISTS facts_content_bm25 ON facts USING bm25 (content) WITH (text_config = 'english')

-- text_index_drop --
-- Both BM25 indexes (the write-cost comparison's "without" half).
DROP INDEX IF EXISTS episodes_content_bm25, facts_content_bm25

-- text_index_sizes --
-- Sizes of the text leg's structures today (GIN, term statistics) and the BM25 indexes.
SELECT c.relname AS name, pg_relation_size(c.oid) AS bytes
FROM pg_class c
WHERE c.relname IN ('episodes_search_gin', 'facts_search_gin', 'recall_term_stats', 'recall_term_stats_pkey',
                    'recall_term_stats_lexeme_idx', 'episodes_content_bm25', 'facts_content_bm25')
ORDER BY c.relname

-- text_index_text_top --
-- Replaces recall_hybrid's fact_text, episode_text and text_top CTEs: the best
-- %(text_candidates)s facts and the best %(text_candidates)s episodes by the BM25 index
-- (ordered top-k, Block-Max WAND), under the same scope and validity filters; of those
-- the best %(text_candidates)s by recall's own BM25 (namespace statistics, as text_top
-- ranks today), so as many candidates join as today. (Selecting the index's score
-- instead evaluates it outside the index scan: about 1.5 ms more per recall.)
text_hits AS (
    (SELECT 'fact'::text AS kind, f.id, f.search FROM facts f
     WHERE %(use_text)s
       AND (%(all_namespaces)s OR f.namespace_id = ANY(%(namespace_ids)s))
       AND ((%(include_history)s AND %(as_of)s::timestamptz IS NULL AND %(known_at)s::timestamptz IS NULL)
            OR (f.recorded_at <= COALESCE(%(known_at)s::timestamptz, now())
                AND (f.withdrawn_at IS NULL OR f.withdrawn_at > COALESCE(%(known_at)s::timestamptz, now()))
                AND f.valid_from <= COALESCE(%(as_of)s::timestamptz, now())
                AND COALESCE(CASE WHEN f.retired_at > COALESCE(%(known_at)s::timestamptz, now())
                                  THEN f.recorded_valid_until ELSE f.valid_until END, 'infinity')
                    > COALESCE(%(as_of)s::timestamptz, now())))
     ORDER BY f.content <@> to_bm25query(%(query)s, 'facts_content_bm25')
     LIMIT %(text_candidates)s)
    UNION ALL
    (SELECT 'episode'::text, e.id, e.search FROM episodes e
     WHERE %(use_text)s
       AND (%(all_namespaces)s OR e.namespace_id = ANY(%(namespace_ids)s))
       AND (CASE WHEN %(as_of)s::timestamptz IS NULL AND %(known_at)s::timestamptz IS NULL THEN e.deleted_at IS NULL
                 ELSE e.created_at <= COALESCE(%(known_at)s::timestamptz, now())
                      AND (e.deleted_at IS NULL OR e.deleted_at > COALESCE(%(known_at)s::timestamptz, now()))
                      AND e.occurred_at <= COALESCE(%(as_of)s::timestamptz, now()) END)
     ORDER BY e.content <@> to_bm25query(%(query)s, 'episodes_content_bm25')
     LIMIT %(text_candidates)s)
),
text_top AS (
    SELECT m.kind, m.id
    FROM (SELECT kind, id, search, length(search) AS doc_length FROM text_hits) m
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
