-- The statements that run before recall's own (recall.sql), plain SQL.
--
-- A recall pipelines recall_search_params, recall_check and recall as one transaction
-- (stash_pipeline/recall/statement.py); a hybrid query may first run recall_names. Rows are
-- seen through fact_visible, episode_visible and relationship_visible (migration 0012), the
-- one definition of visibility; rules applied in several places are functions the planner
-- inlines (migration 0023: namespace_within, lexemes_matched, bm25_term, hybrid_score,
-- fact_restates, episode_turns_beside, same_session, entity_newest_links), and so are the
-- reads of each leg and kind (migration 0025: fact_nearest, episode_nearest, fact_matches,
-- episode_matches, entity_leg_facts, fact_source_turns, episode_context). The parameters
-- come from stash_pipeline/recall/parameters.py.

-- recall_search_params --
-- Per-transaction settings for recall and the other HNSW reads: a wider HNSW beam and
-- iterative scans, so the filters applied during the scan still leave enough candidates; a
-- generic plan once prepared (planning costs about as much as running, and the best plan
-- does not depend on the values); no sequential scan or avoidable sort (plain or
-- incremental): at a few thousand rows the planner would otherwise read a whole table and
-- sort it by distance instead of asking the HNSW index (each ordered read has an index
-- giving its order, so no plan walks a whole index to avoid a sort); no parallel workers,
-- dearer to start than a recall's few hundred rows are to read.
SELECT set_config(s.name, s.value, true) AS value
FROM (VALUES ('hnsw.ef_search', %(ef_search)s), ('hnsw.iterative_scan', 'relaxed_order'),
             ('plan_cache_mode', 'force_generic_plan'), ('enable_seqscan', 'off'), ('enable_sort', 'off'),
             ('enable_incremental_sort', 'off'), ('max_parallel_workers_per_gather', '0')) AS s(name, value)

-- recall_check --
-- Pipelined with recall_search_params and recall (one round trip): which %(paths)s name no
-- namespace (NamespaceNotFound), whether the query's vector is still to compute (no
-- vector given, none in the embedding cache for the query's text, model and endpoint), and
-- how many live episodes in the trees still wait for their vector (pending, counted up to
-- 1000 on the small partial index episodes_pending_vector): the vector legs cannot see them.
SELECT (SELECT count(*) FROM (
            SELECT 1 FROM episodes e JOIN namespaces n ON n.id = e.namespace_id
            WHERE e.embedding IS NULL AND e.deleted_at IS NULL
              AND (%(all_namespaces)s
                   OR EXISTS (SELECT 1 FROM unnest(%(paths)s::text[]) AS p(slug) WHERE namespace_within(n.slug, p.slug)))
            LIMIT 1000) waiting) AS pending,
       ARRAY(SELECT p.slug FROM unnest(%(paths)s::text[]) AS p(slug)
             WHERE p.slug <> '/' AND NOT EXISTS (SELECT 1 FROM namespaces n WHERE namespace_within(n.slug, p.slug)))
         AS missing,
       (%(use_vector)s AND %(embedding)s::vector IS NULL
        AND NOT EXISTS (SELECT 1 FROM embedding_cache c
                        WHERE c.text_hash = %(text_hash)s AND c.model = %(embedding_model)s
                          AND c.endpoint = %(embedding_endpoint)s)) AS needs_vector

-- recall_names --
-- Before a hybrid recall embeds its query: which of its %(phrases)s name an entity in the trees
-- %(paths)s so often that the name tells their rows little apart, each of its words in at
-- least %(mask_share)s of them (a speaker's name on every turn they spoke). Recall masks
-- those out of the text its vector is made from; a rarer name (a project, a service) is what
-- the query is about.
WITH scope AS MATERIALIZED (
    SELECT array_agg(n.id) AS ids, COALESCE(sum(s.documents), 0) AS documents
    FROM namespaces n LEFT JOIN recall_text_stats s ON s.namespace_id = n.id
    WHERE %(all_namespaces)s
       OR EXISTS (SELECT 1 FROM unnest(%(paths)s::text[]) AS p(slug) WHERE namespace_within(n.slug, p.slug))
)
SELECT DISTINCT a.normalised FROM entity_aliases a, scope
WHERE a.normalised = ANY(%(phrases)s::text[]) AND a.namespace_id = ANY(scope.ids)
  AND %(mask_share)s * scope.documents <= (
      SELECT min((SELECT COALESCE(sum(t.documents), 0)::float8 FROM recall_term_stats t
                  WHERE t.namespace_id = ANY(scope.ids) AND t.lexeme = l))
      FROM unnest(tsvector_to_array(stash_lexemes(a.normalised))) l)
