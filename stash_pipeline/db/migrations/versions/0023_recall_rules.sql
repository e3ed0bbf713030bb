-- Rules recall's statements (stash_pipeline/recall/queries/) apply in several places,
-- written once. Every function here is inlined by the planner, as the visibility functions
-- are (0012): a scalar one is SQL with a single expression as body; a set-returning one is
-- SQL, STABLE, not STRICT, with no SET clause, called in FROM with arguments that hold no
-- sub-SELECT. A plan is then the rule written out, node for node what the statements gave
-- with the rules written in them (tests/integration/test_recall_plan.py: no function name
-- in a plan).

-- "names": namespace slug n is path p or below it (resolve_namespace_tree's rule); p's
-- LIKE wildcards match only themselves.
CREATE FUNCTION namespace_within(n text, p text)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT n = p OR n LIKE replace(replace(replace(p, '\', '\\'), '%', '\%'), '_', '\_') || '/%'
$$;

-- "matched": a row's tsvector cut to the query's lexemes, in C: setweight marks them 'A' and
-- ts_filter keeps those (to_tsvector gives every lexeme weight D), so the row's other words
-- are never unnested.
CREATE FUNCTION lexemes_matched(search tsvector, lexemes text[])
RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ts_filter(setweight(search, 'A', lexemes), '{a}')
$$;

-- BM25 of one lexeme of a row: idf its inverse document frequency, n its term frequency
-- (its positions), length the row's distinct lexemes; k1 and b the usual constants.
CREATE FUNCTION bm25_term(idf float8, n float8, length float8, average_length float8, k1 float8, b float8)
RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT idf * n * (k1 + 1) / (n + k1 * (1 - b + b * length / average_length))
$$;

-- The hybrid score: w_vector times the cosine (at least 0) plus the rest times the coverage
-- (at most 1), a missing part 0 (recall sends w_vector 1 in vector mode, 0 in text mode).
CREATE FUNCTION hybrid_score(w_vector float8, cosine float8, coverage float8)
RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT w_vector * GREATEST(cosine, 0) + (1 - w_vector) * LEAST(COALESCE(coverage, 0), 1)
$$;

-- "restates": a fact (when is_fact) at least min_similarity (cosine) like one of its
-- source episodes says what that episode says. A count on the lineage key, not an EXISTS
-- (a hashed subplan under the generic plan, reading every fact's lineage).
CREATE FUNCTION fact_restates(is_fact boolean, fact_id bigint, fact_embedding vector, min_similarity float8)
RETURNS TABLE (restates boolean) LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT count(*) > 0 FROM lineage l JOIN episodes e ON e.id = l.parent_id
    WHERE is_fact AND l.child_kind = 'fact' AND l.child_id = fact_id AND l.parent_kind = 'episode'
      AND 1 - (fact_embedding <=> e.embedding) >= min_similarity
$$;

-- The turns beside a hit: up to `turns` before and after episode hit_id in its namespace,
-- not forgotten, read by the (namespace_id, id) index from the hit's entry: "namespace_id >=
-- the hit's AND (namespace_id, id) < the hit's" is "same namespace, older" written so that
-- only that index can take it and the row comparison places the scan (for "namespace_id =
-- AND id <" the generic plan walks the primary key through the other namespaces' rows;
-- needs incremental sorts off). Callers filter by time after the LIMIT: inside it, it would
-- walk every later turn.
CREATE FUNCTION episode_turns_beside(hit_namespace bigint, hit_id bigint, turns bigint)
RETURNS TABLE (id bigint, content text, occurred_at timestamptz, created_at timestamptz, metadata jsonb)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    (SELECT e.id, e.content, e.occurred_at, e.created_at, e.metadata FROM episodes e
     WHERE e.namespace_id >= hit_namespace AND e.deleted_at IS NULL
       AND (e.namespace_id, e.id) < (hit_namespace, hit_id)
     ORDER BY e.namespace_id DESC, e.id DESC LIMIT turns)
    UNION ALL
    (SELECT e.id, e.content, e.occurred_at, e.created_at, e.metadata FROM episodes e
     WHERE e.namespace_id <= hit_namespace AND e.deleted_at IS NULL
       AND (e.namespace_id, e.id) > (hit_namespace, hit_id)
     ORDER BY e.namespace_id ASC, e.id ASC LIMIT turns)
$$;

-- "same session": a turn (occurred_at, created_at, metadata) and a hit's (hit_occurred_at,
-- hit_metadata) share the same given occurred_at (episodes written without one in one
-- transaction share now()), or the same metadata.session or metadata.thread.
CREATE FUNCTION same_session(occurred_at timestamptz, created_at timestamptz, metadata jsonb,
                             hit_occurred_at timestamptz, hit_metadata jsonb)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (occurred_at = hit_occurred_at AND occurred_at <> created_at)
        OR metadata ->> 'session' = hit_metadata ->> 'session'
        OR metadata ->> 'thread' = hit_metadata ->> 'thread'
$$;

-- An entity's newest `links` relationships each way visible at as_of and known_at, whose
-- source fact is visible too: each one's id and the entity at its other end.
CREATE FUNCTION entity_newest_links(named_entity bigint, as_of timestamptz, known_at timestamptz,
                                    include_history boolean, links bigint)
RETURNS TABLE (id bigint, entity_id bigint) LANGUAGE sql STABLE PARALLEL SAFE AS $$
    (SELECT r.id, r.to_entity_id AS entity_id FROM relationships r JOIN facts s ON s.id = r.source_fact_id
     WHERE r.from_entity_id = named_entity AND r.to_entity_id IS NOT NULL
       AND relationship_visible(r, as_of, known_at, include_history)
       AND fact_visible(s, as_of, known_at, include_history)
     ORDER BY r.id DESC LIMIT links)
    UNION ALL
    (SELECT r.id, r.from_entity_id AS entity_id FROM relationships r JOIN facts s ON s.id = r.source_fact_id
     WHERE r.to_entity_id = named_entity AND r.from_entity_id IS NOT NULL
       AND relationship_visible(r, as_of, known_at, include_history)
       AND fact_visible(s, as_of, known_at, include_history)
     ORDER BY r.id DESC LIMIT links)
$$;
