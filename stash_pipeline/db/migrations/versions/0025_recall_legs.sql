-- Recall's legs: the reads of facts and episodes the recall statement
-- (stash_pipeline/recall/queries/recall.sql) makes per kind, each written once. Inlined by the
-- planner as 0023's functions are (SQL, STABLE, not STRICT, no SET clause, called in FROM
-- with arguments that hold no sub-SELECT): the statement passes what it computed once
-- (the query's vector, the scope, whether the scope is small) as columns of one-row CTEs, so
-- a plan is the read written out, and a test on a boolean argument is a one-time test (a
-- gating Result) as it was in the statement. Arguments shared by the reads:
-- * all_namespaces: every namespace, else those in ids;
-- * small: the scope is read exactly, row by row from the namespace index (recall.sql's
--   "exact": a scope of at most exact_scan_limit live memories);
-- * as_of, known_at, include_history: visibility (0012).

-- The text statistics of the scope (recall_text_stats, kept by triggers): how many live rows
-- it holds and their average length in distinct lexemes (at least 1).
CREATE FUNCTION text_corpus(all_namespaces boolean, ids bigint[])
RETURNS TABLE (documents float8, average_length float8) LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT COALESCE(sum(s.documents), 0)::float8,
           GREATEST(COALESCE(sum(s.total_length), 0)::float8 / NULLIF(sum(s.documents), 0), 1)
    FROM (SELECT * FROM recall_text_stats t WHERE all_namespaces UNION ALL
          SELECT * FROM recall_text_stats t WHERE NOT all_namespaces AND t.namespace_id = ANY(ids)) s
$$;

-- How many live rows of the scope hold lexeme `term` (recall_term_stats, kept by triggers).
CREATE FUNCTION term_documents(term text, all_namespaces boolean, ids bigint[])
RETURNS TABLE (df float8) LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT COALESCE(sum(x.documents), 0)::float8
    FROM (SELECT t.documents FROM recall_term_stats t WHERE all_namespaces AND t.lexeme = term UNION ALL
          SELECT t.documents FROM recall_term_stats t
          WHERE NOT all_namespaces AND t.namespace_id = ANY(ids) AND t.lexeme = term) x
$$;

-- The vector leg of one kind (when go): the nearest `candidates` visible rows to v, by HNSW
-- cosine in the index's order of the half-precision embedding_key (every score recall gives
-- is full precision); in a small scope the scope's rows by full-precision cosine ("+ 0": an
-- order no index gives, so the scope's rows are read and sorted). A row still waiting for
-- its vector is none. The rows carry the columns recall scores them with.
CREATE FUNCTION fact_nearest(v vector, go boolean, all_namespaces boolean, small boolean, ids bigint[],
                             as_of timestamptz, known_at timestamptz, include_history boolean, candidates bigint)
RETURNS TABLE (id bigint, namespace_id bigint, search tsvector, embedding vector, occurred_at timestamptz,
               metadata jsonb)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    (SELECT f.id, f.namespace_id, f.search, f.embedding, NULL::timestamptz, NULL::jsonb
     FROM facts f WHERE go AND f.embedding IS NOT NULL AND NOT small
       AND (all_namespaces OR f.namespace_id = ANY(ids)) AND fact_visible(f, as_of, known_at, include_history)
     ORDER BY embedding_key(f.embedding) <=> embedding_key(v) LIMIT candidates)
    UNION ALL
    (SELECT f.id, f.namespace_id, f.search, f.embedding, NULL::timestamptz, NULL::jsonb
     FROM facts f WHERE go AND f.embedding IS NOT NULL AND small
       AND f.namespace_id = ANY(ids) AND fact_visible(f, as_of, known_at, include_history)
     ORDER BY (f.embedding <=> v) + 0 LIMIT candidates)
$$;

CREATE FUNCTION episode_nearest(v vector, go boolean, all_namespaces boolean, small boolean, ids bigint[],
                                as_of timestamptz, known_at timestamptz, candidates bigint)
RETURNS TABLE (id bigint, namespace_id bigint, search tsvector, embedding vector, occurred_at timestamptz,
               metadata jsonb)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    (SELECT e.id, e.namespace_id, e.search, e.embedding, e.occurred_at, e.metadata
     FROM episodes e WHERE go AND e.embedding IS NOT NULL AND NOT small
       AND (all_namespaces OR e.namespace_id = ANY(ids)) AND episode_visible(e, as_of, known_at)
     ORDER BY embedding_key(e.embedding) <=> embedding_key(v) LIMIT candidates)
    UNION ALL
    (SELECT e.id, e.namespace_id, e.search, e.embedding, e.occurred_at, e.metadata
     FROM episodes e WHERE go AND e.embedding IS NOT NULL AND small
       AND e.namespace_id = ANY(ids) AND episode_visible(e, as_of, known_at)
     ORDER BY (e.embedding <=> v) + 0 LIMIT candidates)
$$;

-- The text leg's read of one kind: the newest `scan_limit` visible rows matching q but
-- those in skip (a NULL q matches nothing), read three ways: all namespaces by the word
-- index; a scope by the word index ANDed with the namespace index; a small scope by the
-- namespace index, each row tested for the words ("IS TRUE" keeps the word index out).
-- "id + 0": the matches are sorted, since walking the primary key backwards and testing
-- each row for the words reads thousands of rows.
CREATE FUNCTION fact_matches(q tsquery, skip bigint[], all_namespaces boolean, small boolean, ids bigint[],
                             as_of timestamptz, known_at timestamptz, include_history boolean, scan_limit bigint)
RETURNS TABLE (id bigint, search tsvector) LANGUAGE sql STABLE PARALLEL SAFE AS $$
    (SELECT f.id, f.search FROM facts f
     WHERE all_namespaces AND f.search @@ q AND NOT f.id = ANY(skip)
       AND fact_visible(f, as_of, known_at, include_history) ORDER BY f.id + 0 DESC LIMIT scan_limit)
    UNION ALL
    (SELECT f.id, f.search FROM facts f
     WHERE NOT all_namespaces AND NOT small AND f.search @@ q AND NOT f.id = ANY(skip)
       AND f.namespace_id = ANY(ids)
       AND fact_visible(f, as_of, known_at, include_history) ORDER BY f.id + 0 DESC LIMIT scan_limit)
    UNION ALL
    (SELECT f.id, f.search FROM facts f
     WHERE small AND (f.search @@ q AND NOT f.id = ANY(skip)) IS TRUE AND f.namespace_id = ANY(ids)
       AND fact_visible(f, as_of, known_at, include_history) ORDER BY f.id + 0 DESC LIMIT scan_limit)
$$;

CREATE FUNCTION episode_matches(q tsquery, skip bigint[], all_namespaces boolean, small boolean, ids bigint[],
                                as_of timestamptz, known_at timestamptz, scan_limit bigint)
RETURNS TABLE (id bigint, search tsvector) LANGUAGE sql STABLE PARALLEL SAFE AS $$
    (SELECT e.id, e.search FROM episodes e
     WHERE all_namespaces AND e.search @@ q AND NOT e.id = ANY(skip)
       AND episode_visible(e, as_of, known_at) ORDER BY e.id + 0 DESC LIMIT scan_limit)
    UNION ALL
    (SELECT e.id, e.search FROM episodes e
     WHERE NOT all_namespaces AND NOT small AND e.search @@ q AND NOT e.id = ANY(skip)
       AND e.namespace_id = ANY(ids)
       AND episode_visible(e, as_of, known_at) ORDER BY e.id + 0 DESC LIMIT scan_limit)
    UNION ALL
    (SELECT e.id, e.search FROM episodes e
     WHERE small AND (e.search @@ q AND NOT e.id = ANY(skip)) IS TRUE AND e.namespace_id = ANY(ids)
       AND episode_visible(e, as_of, known_at) ORDER BY e.id + 0 DESC LIMIT scan_limit)
$$;

-- The entity leg's facts: the entities phrases name by an alias (normalised) in scope (at
-- most max_named), their newest links_per_entity visible relationships each way (source
-- fact visible too) reaching at most max_neighbours neighbours, and per entity, of its
-- newest entity_scan visible facts in scope, the facts_per_entity nearest v (at most
-- entity_scan rows per entity are read and sorted), each once at its nearest hop, with the
-- aliases that named its entity (or the neighbour's named one); a profile only when its own
-- entity is named (one hop away the query asks for one of the neighbour's facts, and the
-- digest of them all would take that fact's place). MATERIALIZED where the planner would
-- otherwise walk an entity_id index for a LIMIT or sort by walking the facts primary key.
CREATE FUNCTION entity_leg_facts(phrases text[], v vector, all_namespaces boolean, ids bigint[],
                                 as_of timestamptz, known_at timestamptz, include_history boolean,
                                 max_named bigint, links_per_entity bigint, max_neighbours bigint,
                                 entity_scan bigint, facts_per_entity bigint)
RETURNS TABLE (id bigint, hop integer, aliases text) LANGUAGE sql STABLE PARALLEL SAFE AS $$
    WITH matched AS MATERIALIZED (
        SELECT a.entity_id, a.alias FROM entity_aliases a WHERE all_namespaces AND a.normalised = ANY(phrases)
        UNION ALL
        SELECT a.entity_id, a.alias FROM entity_aliases a
        WHERE NOT all_namespaces AND a.namespace_id = ANY(ids) AND a.normalised = ANY(phrases)
    ), named AS MATERIALIZED (
        SELECT m.entity_id, string_agg(m.alias, ' ' ORDER BY m.alias) AS aliases
        FROM matched m GROUP BY m.entity_id ORDER BY m.entity_id LIMIT max_named
    ), links AS (
        SELECT l.id, l.entity_id, m.entity_id AS named_id FROM named m
        CROSS JOIN LATERAL entity_newest_links(m.entity_id, as_of, known_at, include_history, links_per_entity) l
    ), neighbours AS (
        SELECT l.entity_id, (array_agg(l.named_id ORDER BY l.id DESC))[1] AS named_id
        FROM links l WHERE l.entity_id NOT IN (SELECT entity_id FROM named)
        GROUP BY l.entity_id ORDER BY max(l.id) DESC LIMIT max_neighbours
    ), reached AS (
        SELECT x.hop, x.named_id, n.id
        FROM (SELECT entity_id, 0 AS hop, entity_id AS named_id FROM named
              UNION ALL SELECT nb.entity_id, 1, nb.named_id FROM neighbours nb) x
        CROSS JOIN LATERAL (
            SELECT n.id FROM (SELECT f.id, f.embedding FROM facts f
                              WHERE f.entity_id = x.entity_id AND (all_namespaces OR f.namespace_id = ANY(ids))
                                AND fact_visible(f, as_of, known_at, include_history)
                                AND (x.hop = 0 OR f.origin <> 'profile')
                              ORDER BY f.valid_from DESC, f.id DESC LIMIT entity_scan) n
            ORDER BY n.embedding <=> v, n.id DESC LIMIT facts_per_entity) n
    ), reached_once AS MATERIALIZED (
        SELECT r.id, min(r.hop) AS hop, (array_agg(r.named_id ORDER BY r.hop, r.named_id))[1] AS named_id
        FROM reached r GROUP BY r.id
    )
    SELECT r.id, r.hop, m.aliases FROM reached_once r JOIN named m ON m.entity_id = r.named_id
$$;

-- A fact's source turns as recall sends them: each one's id, when it occurred, its session
-- marks, and its first `chars` characters and one more (so the caller can tell the text was
-- cut); forgotten ones as known at known_at (now by default) left out.
CREATE FUNCTION fact_source_turns(fact_id bigint, chars integer, known_at timestamptz)
RETURNS TABLE (id bigint, turn jsonb) LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT s.id, jsonb_build_object('id', s.id, 'occurred_at', s.occurred_at, 'metadata', s.metadata,
                                    'content', left(s.content, chars + 1))
    FROM lineage l JOIN episodes s ON s.id = l.parent_id
    WHERE l.child_kind = 'fact' AND l.child_id = fact_id AND l.parent_kind = 'episode'
      AND s.created_at <= COALESCE(known_at, 'infinity')
      AND (s.deleted_at IS NULL OR s.deleted_at > COALESCE(known_at, 'infinity'))
$$;

-- An episode hit's context: up to `turns` turns each side in its session; with as_of or
-- known_at, those stored by known_at and occurred by as_of (episode_visible's rule).
CREATE FUNCTION episode_context(hit episodes, turns bigint, as_of timestamptz, known_at timestamptz)
RETURNS TABLE (id bigint, turn jsonb) LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT c.id, jsonb_build_object('id', c.id, 'content', c.content)
    FROM episode_turns_beside(hit.namespace_id, hit.id, turns) c
    WHERE same_session(c.occurred_at, c.created_at, c.metadata, hit.occurred_at, hit.metadata)
      AND (as_of IS NULL AND known_at IS NULL
           OR c.created_at <= COALESCE(known_at, now()) AND c.occurred_at <= COALESCE(as_of, now()))
$$;
