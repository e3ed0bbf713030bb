-- Recall's own statement, plain SQL: what PostgreSQL runs is what is written here and in
-- the functions it calls, which the planner inlines (migration 0023: rules written once;
-- 0025: the reads of each leg and kind). It runs after recall_search_params and recall_check
-- (recall_before.sql). "In scope": namespace_id = ANY(scope.ids); "present": %(as_of)s and
-- %(known_at)s both NULL (a read of now). A row's weight in the ranking: fact_weight on a
-- fact, subject_weight too on one the entity leg reached; none on one that restates its
-- source or, not reached, lies below weight_min_cosine to the query (matched on a stray word).

-- recall --
-- Recall in one statement; grouping (stash_pipeline/recall/grouping.py) folds its rows into
-- the %(limit)s results.
WITH
-- query_vector: the vector given, else the cached one, so a query asked before needs no
-- embedding round trip; with neither, nothing below finds anything (ready is false) and
-- recall embeds the query and runs again.
query_vector AS MATERIALIZED (
    SELECT v, (v IS NOT NULL OR NOT %(use_vector)s) AS ready
    FROM (SELECT COALESCE(%(embedding)s::vector,
                          (SELECT c.embedding FROM embedding_cache c
                           WHERE c.text_hash = %(text_hash)s AND c.model = %(embedding_model)s
                             AND c.endpoint = %(embedding_endpoint)s)) AS v) q
),
-- scope: the namespaces %(paths)s name, unless %(all_namespaces)s. A read by a namespace
-- index has a form for each behind one-time tests: an "all OR in scope" uses no namespace
-- index under the generic plan.
scope AS MATERIALIZED (
    SELECT COALESCE(array_agg(n.id), '{}')::bigint[] AS ids FROM namespaces n WHERE NOT %(all_namespaces)s
      AND EXISTS (SELECT 1 FROM unnest(%(paths)s::text[]) AS p(slug) WHERE namespace_within(n.slug, p.slug))
),
-- The query's lexemes with document frequency and idf over the scope (recall_term_stats,
-- recall_text_stats: kept by triggers). Every lexeme counts, seen or not: a word no row
-- holds is information the query asks for and no row has. full_match, their summed idf, is
-- what a row holding each once at average length scores. q_rare: the lexemes by ascending
-- frequency while their summed frequency fits %(text_scan_limit)s (at least the rarest), so
-- the rows matched are bounded by construction; q_pair: when even the rarest is in more
-- rows, it and the next rarest together. terms: a lookup per word (a join let the planner
-- scan the whole table), materialised since weights reads df five times.
query_lexemes AS (
    SELECT DISTINCT l AS lexeme FROM unnest(tsvector_to_array(stash_lexemes(%(query)s))) AS l
    WHERE (SELECT ready FROM query_vector)
), corpus AS (
    SELECT c.* FROM scope s, LATERAL text_corpus(%(all_namespaces)s, s.ids) c
), terms AS MATERIALIZED (
    SELECT q.lexeme, t.df FROM query_lexemes q, scope s, LATERAL term_documents(q.lexeme, %(all_namespaces)s, s.ids) t
    WHERE %(use_text)s
), weights AS (
    SELECT t.lexeme, t.df, ln(1 + (c.documents - t.df + 0.5) / (t.df + 0.5)) AS idf,
           sum(t.df) OVER (ORDER BY t.df, t.lexeme) AS cumulative_df,
           row_number() OVER (PARTITION BY t.df > 0 ORDER BY t.df, t.lexeme) AS rarity,
           row_number() OVER (ORDER BY t.df, t.lexeme) AS place
    FROM terms t, corpus c
), tq AS (
    SELECT (SELECT string_agg('''' || replace(replace(w.lexeme, '\', '\\'), '''', '''''') || '''', ' | ')
            FROM weights w
            WHERE w.df > 0 AND (w.cumulative_df <= %(text_scan_limit)s OR w.rarity = 1))::tsquery AS q_rare,
           (SELECT CASE WHEN count(*) = 2 AND min(w.df) > %(text_scan_limit)s
                        THEN string_agg('''' || replace(replace(w.lexeme, '\', '\\'), '''', '''''') || '''', ' & ') END
            FROM weights w WHERE w.df > 0 AND w.rarity <= 2)::tsquery AS q_pair,
           (SELECT sum(w.idf) FROM weights w) AS full_match, ARRAY(SELECT w.lexeme FROM weights w) AS lexemes
),
-- exact.small: a scope of at most %(exact_scan_limit)s live memories is read exactly, row by
-- row from the namespace index: the HNSW walk filters by namespace as it goes, so beside a
-- large namespace it passes mostly others' rows before it has enough of a small one's; and
-- a word rare in a small scope may be common beside it, so its rows are tested for words.
exact AS MATERIALIZED (SELECT NOT %(all_namespaces)s AND c.documents <= %(exact_scan_limit)s AS small FROM corpus c),
-- The legs read each kind through the functions of migration 0025, given what was computed
-- once above as columns (so the functions are inlined). The vector leg: the nearest
-- %(candidates)s rows of each kind (fact_nearest, episode_nearest).
fact_vec AS (
    SELECT n.* FROM query_vector q, scope s, exact x,
    LATERAL fact_nearest(q.v, %(use_vector)s AND q.ready, %(all_namespaces)s, x.small, s.ids,
                         %(as_of)s, %(known_at)s, %(include_history)s, %(candidates)s::bigint) n
), episode_vec AS (
    SELECT n.* FROM query_vector q, scope s, exact x,
    LATERAL episode_nearest(q.v, %(use_vector)s AND q.ready, %(all_namespaces)s, x.small, s.ids,
                            %(as_of)s, %(known_at)s, %(candidates)s::bigint) n
),
-- The text leg, per kind (fact_matches, episode_matches: the newest %(text_scan_limit)s
-- visible rows holding the words): the rows holding both rarest lexemes (<kind>_pair,
-- q_pair: the word index intersects their lists, far fewer rows than every match of the
-- rarest); then, only when fewer than %(text_pair_min)s rows hold the pair, the rare
-- lexemes' (q_rare). No older row is dropped for a newer one while the rare words fit.
fact_pair AS (
    SELECT m.* FROM tq, scope s, exact x,
    LATERAL fact_matches(tq.q_pair, '{}', %(all_namespaces)s, x.small, s.ids, %(as_of)s, %(known_at)s,
                         %(include_history)s, %(text_scan_limit)s::bigint) m WHERE %(use_text)s
), fact_text AS (
    SELECT id, search FROM fact_pair
    UNION ALL
    SELECT m.* FROM tq, scope s, exact x, (SELECT count(*) AS n, COALESCE(array_agg(id), '{}') AS ids FROM fact_pair) p,
    LATERAL fact_matches(CASE WHEN p.n < %(text_pair_min)s THEN tq.q_rare END, p.ids, %(all_namespaces)s, x.small,
                         s.ids, %(as_of)s, %(known_at)s, %(include_history)s, %(text_scan_limit)s::bigint) m
    WHERE %(use_text)s
), episode_pair AS (
    SELECT m.* FROM tq, scope s, exact x,
    LATERAL episode_matches(tq.q_pair, '{}', %(all_namespaces)s, x.small, s.ids, %(as_of)s, %(known_at)s,
                            %(text_scan_limit)s::bigint) m WHERE %(use_text)s
), episode_text AS (
    SELECT id, search FROM episode_pair
    UNION ALL
    SELECT m.* FROM tq, scope s, exact x, (SELECT count(*) AS n, COALESCE(array_agg(id), '{}') AS ids FROM episode_pair) p,
    LATERAL episode_matches(CASE WHEN p.n < %(text_pair_min)s THEN tq.q_rare END, p.ids, %(all_namespaces)s, x.small,
                            s.ids, %(as_of)s, %(known_at)s, %(text_scan_limit)s::bigint) m
    WHERE %(use_text)s
),
-- text_top: the best %(text_candidates)s text matches of both kinds by BM25, ties by id
-- then kind so the list is the same on every run, each scored in one pass (its matched
-- lexemes unnested once and one join with weights, not a subquery per match), with the
-- lexemes it matched; they join the vector candidates with that BM25, and cosine is computed
-- only for this short list. Every BM25 sum of the hybrid legs (text_top, vec_text, extra)
-- adds a row's terms in weights' order (place), so a row scores the same whichever leg
-- brought it.
text_top AS (
    SELECT m.kind, m.id, sum(bm25_term(w.idf, COALESCE(array_length((m.u).positions, 1), 1), m.doc_length,
                                       co.average_length, %(k1)s, %(b)s) ORDER BY w.place) AS bm25,
           array_agg(w.lexeme ORDER BY w.place) AS matched
    FROM (SELECT m.kind, m.id, m.doc_length, unnest(lexemes_matched(m.search, tq.lexemes)) AS u
          FROM (SELECT 'fact'::text AS kind, id, search, length(search) AS doc_length FROM fact_text
                UNION ALL SELECT 'episode'::text, id, search, length(search) FROM episode_text) m, tq) m
    CROSS JOIN corpus co JOIN weights w ON w.lexeme = (m.u).lexeme
    GROUP BY m.id, m.kind
    ORDER BY bm25 DESC, m.id DESC, m.kind
    LIMIT %(text_candidates)s
),
-- Every candidate of both legs scored once: cosine to the query, BM25 and coverage, BM25 /
-- full_match: the share of the query's information the row matches, comparable across
-- queries. The score is the hybrid score (an episode with no vector yet ranks by text
-- alone). A text match keeps text_top's BM25 and matched lexemes; a vector candidate's are
-- computed the same way (vec_text). candidates detoasts each vector once: vector(.., -1,
-- true) returns it expanded, otherwise unchanged (a pointer in a materialised CTE is fetched
-- again at every use).
candidates AS (
    SELECT 'fact'::text AS kind, v.id, v.namespace_id, vector(v.embedding, -1, true) AS embedding, v.occurred_at,
           v.metadata, NULL::float8 AS bm25, NULL::text[] AS matched FROM fact_vec v
    UNION ALL
    SELECT 'fact'::text, f.id, f.namespace_id, vector(f.embedding, -1, true), NULL::timestamptz AS occurred_at,
           NULL::jsonb AS metadata, t.bm25, t.matched FROM text_top t JOIN facts f ON f.id = t.id
    WHERE t.kind = 'fact' AND f.id NOT IN (SELECT id FROM fact_vec)
    UNION ALL
    SELECT 'episode'::text AS kind, v.id, v.namespace_id, vector(v.embedding, -1, true) AS embedding, v.occurred_at,
           v.metadata, NULL::float8, NULL::text[] FROM episode_vec v
    UNION ALL
    SELECT 'episode'::text, e.id, e.namespace_id, vector(e.embedding, -1, true), e.occurred_at, e.metadata,
           t.bm25, t.matched FROM text_top t JOIN episodes e ON e.id = t.id
    WHERE t.kind = 'episode' AND e.id NOT IN (SELECT id FROM episode_vec)
), vec_text AS (
    SELECT m.kind, m.id, sum(bm25_term(w.idf, COALESCE(array_length((m.u).positions, 1), 1), m.doc_length,
                                       co.average_length, %(k1)s, %(b)s) ORDER BY w.place) AS bm25,
           array_agg(w.lexeme ORDER BY w.place) AS matched
    FROM (SELECT m.kind, m.id, length(m.search) AS doc_length, unnest(lexemes_matched(m.search, tq.lexemes)) AS u
          FROM (SELECT 'fact'::text AS kind, id, search FROM fact_vec
                UNION ALL SELECT 'episode'::text, id, search FROM episode_vec) m, tq) m
    CROSS JOIN corpus co JOIN weights w ON w.lexeme = (m.u).lexeme
    GROUP BY m.id, m.kind
), scored AS MATERIALIZED (
    SELECT c.kind, c.id, c.namespace_id, c.occurred_at, c.metadata, c.embedding,
           CASE WHEN %(use_vector)s THEN 1 - (c.embedding <=> (SELECT v FROM query_vector)) END AS cosine,
           CASE WHEN %(use_text)s THEN COALESCE(c.bm25, b.bm25, 0) END AS bm25,
           COALESCE(c.matched, b.matched, '{}') AS matched
    FROM candidates c LEFT JOIN vec_text b ON b.kind = c.kind AND b.id = c.id
),
-- stale: an episode whose derived facts in scope are all retired scores stale_factor times,
-- so its correction outranks it: a count per row on a lineage index, as fact_restates.
judged AS MATERIALIZED (
    SELECT s.*, s.bm25 / NULLIF(tq.full_match, 0) AS coverage,
           hybrid_score(%(w_vector)s, s.cosine, s.bm25 / NULLIF(tq.full_match, 0))
           * CASE WHEN stale.derived > 0 AND stale.current = 0 THEN %(stale_factor)s::float8 ELSE 1 END AS score,
           copy.restates
    FROM scored s CROSS JOIN tq
    CROSS JOIN LATERAL (
        SELECT count(*) AS derived,
               count(*) FILTER (WHERE f.id IS NOT NULL AND fact_visible(f, NULL, NULL, false)) AS current
        FROM lineage l LEFT JOIN facts f ON f.id = l.child_id
        WHERE s.kind = 'episode' AND %(as_of)s::timestamptz IS NULL AND %(known_at)s::timestamptz IS NULL
          AND NOT %(include_history)s AND l.parent_kind = 'episode'
          AND l.parent_id = s.id AND l.child_kind = 'fact'
          AND (%(all_namespaces)s OR f.namespace_id = ANY((SELECT ids FROM scope)::bigint[]))) stale
    CROSS JOIN LATERAL fact_restates(s.kind = 'fact', s.id, s.embedding, %(copy_similarity)s) copy
),
-- newer (when supersede): an episode among the best supersede_pool with a newer episode
-- candidate in its namespace (cosine >= supersede_similarity, matching every query lexeme it
-- matches) scores supersede_margin times that one's score but at least superseded_factor
-- times its own, just below its restatement; a demotion only lowers a score, so the best
-- supersede_pool bound the pairs.
fused AS (
    SELECT j.kind, j.id, j.namespace_id, j.occurred_at, j.metadata, j.cosine, j.bm25, j.coverage, j.restates,
           CASE WHEN newer.score IS NULL THEN j.score
                ELSE GREATEST(%(superseded_factor)s::float8 * j.score,
                              LEAST(j.score, %(supersede_margin)s::float8 * newer.score)) END AS score
    FROM (SELECT x.*, row_number() OVER (ORDER BY x.score DESC, x.id DESC, x.kind) AS place FROM judged x) j
    LEFT JOIN LATERAL (
        SELECT max(n.score) AS score FROM judged n
        WHERE %(supersede)s AND j.place <= %(supersede_pool)s AND j.kind = 'episode' AND n.kind = 'episode'
          AND %(as_of)s::timestamptz IS NULL AND %(known_at)s::timestamptz IS NULL AND NOT %(include_history)s
          AND n.namespace_id = j.namespace_id AND n.occurred_at > j.occurred_at
          AND n.matched @> j.matched AND 1 - (n.embedding <=> j.embedding) >= %(supersede_similarity)s) newer ON true
),
-- Context (hybrid mode, present): an episode within context_window turns of one of the best
-- context_pool episodes, in the same session, gains neighbour_weight times that hit's score;
-- a neighbour that was no candidate is scored here too, the same way (a handful of rows,
-- extra_rows), so a reply that shares little with the query but follows a strong hit can
-- rank. Then the best %(fetch_limit)s by score times the ranking weight (subject_weight
-- aside).
pool AS (SELECT f.* FROM fused f WHERE f.kind = 'episode' ORDER BY f.score DESC, f.id DESC LIMIT %(context_pool)s),
neighbours AS (
    SELECT n.id, max(p.score) AS score
    FROM pool p CROSS JOIN LATERAL episode_turns_beside(p.namespace_id, p.id, %(context_window)s) n
    WHERE %(neighbour_weight)s::float8 > 0 AND %(as_of)s::timestamptz IS NULL AND %(known_at)s::timestamptz IS NULL
      AND same_session(n.occurred_at, n.created_at, n.metadata, p.occurred_at, p.metadata)
    GROUP BY n.id
), extra_rows AS MATERIALIZED (
    SELECT e.id, e.embedding, e.search FROM episodes e
    WHERE e.id IN (SELECT n.id FROM neighbours n) AND e.id NOT IN (SELECT f.id FROM fused f WHERE f.kind = 'episode')
), extra AS MATERIALIZED (
    SELECT 'episode'::text AS kind, e.id, 1 - (e.embedding <=> (SELECT v FROM query_vector)) AS cosine,
           COALESCE(b.bm25, 0) AS bm25
    FROM extra_rows e LEFT JOIN (
        SELECT m.id, sum(bm25_term(w.idf, COALESCE(array_length((m.u).positions, 1), 1), m.doc_length,
                                   co.average_length, %(k1)s, %(b)s) ORDER BY w.place) AS bm25
        FROM (SELECT e.id, length(e.search) AS doc_length, unnest(lexemes_matched(e.search, tq.lexemes)) AS u
              FROM extra_rows e, tq) m
        CROSS JOIN corpus co JOIN weights w ON w.lexeme = (m.u).lexeme
        GROUP BY m.id) b ON b.id = e.id
), own AS (
    SELECT f.kind, f.id, f.cosine, f.bm25, f.coverage, f.score, f.restates FROM fused f
    UNION ALL
    SELECT x.kind, x.id, x.cosine, x.bm25, x.bm25 / NULLIF(tq.full_match, 0),
           hybrid_score(%(w_vector)s, x.cosine, x.bm25 / NULLIF(tq.full_match, 0)), false
    FROM extra x, tq
), ranked AS (
    SELECT x.* FROM (
        SELECT o.kind, o.id, o.cosine, o.bm25, o.coverage, o.score AS own_score,
               %(neighbour_weight)s::float8 * nb.score AS context_score,
               o.score + %(neighbour_weight)s::float8 * COALESCE(nb.score, 0) AS score, o.restates
        FROM own o LEFT JOIN neighbours nb ON o.kind = 'episode' AND nb.id = o.id) x
    ORDER BY x.score * CASE WHEN x.kind <> 'fact' OR x.restates THEN 1
                            WHEN COALESCE(x.cosine, 1) < %(weight_min_cosine)s THEN 1
                            ELSE %(fact_weight)s::float8 END DESC,
             x.kind, x.id DESC
    LIMIT %(fetch_limit)s
),
-- The entity leg (hybrid mode; stash_pipeline/recall/entities.py makes %(phrases)s): the
-- facts of the entities the query's phrases name and of their neighbours (entity_leg_facts),
-- the best %(max_facts)s by score. A fact scores as in scoring, except that the query words
-- of the alias that named its entity count as matched when the fact lacks them:
-- entity_credit times their idf but at least entity_match of full_match, times hop_factor
-- one hop away; a fact that spells the name scores as without the leg. MATERIALIZED so that
-- no score is computed several times.
entity_facts AS MATERIALIZED (
    SELECT r.* FROM query_vector q, scope s,
    LATERAL entity_leg_facts(%(phrases)s, q.v, %(all_namespaces)s, s.ids, %(as_of)s, %(known_at)s,
                             %(include_history)s, %(max_named)s::bigint, %(links_per_entity)s::bigint,
                             %(max_neighbours)s::bigint, %(entity_scan)s::bigint, %(facts_per_entity)s::bigint) r
    WHERE q.ready
), entity_scored AS MATERIALIZED (
    SELECT r.id, r.hop, 1 - (f.embedding <=> (SELECT v FROM query_vector)) AS cosine,
           COALESCE((
               SELECT sum(bm25_term(w.idf, COALESCE(array_length(u.positions, 1), 1), length(f.search),
                                    co.average_length, %(k1)s, %(b)s))
               FROM unnest(lexemes_matched(f.search, tq.lexemes)) AS u JOIN weights w ON w.lexeme = u.lexeme), 0) AS bm25,
           COALESCE((SELECT sum(w.idf) FROM weights w
                     WHERE w.lexeme = ANY(tsvector_to_array(stash_lexemes(r.aliases)))
                       AND NOT w.lexeme = ANY(tsvector_to_array(f.search))), 0) AS missing
    FROM entity_facts r
    CROSS JOIN LATERAL (SELECT x.embedding, x.search FROM facts x WHERE x.id = r.id) f
    CROSS JOIN corpus co CROSS JOIN tq
), entity_ranked AS (
    SELECT c.id, c.cosine, c.bm25, c.coverage, hybrid_score(%(w_vector)s, c.cosine, c.coverage) AS score
    FROM (SELECT s.id, s.cosine, s.bm25,
                 (s.bm25 + CASE WHEN s.missing > 0
                                THEN power(%(hop_factor)s::float8, s.hop)
                                     * GREATEST(%(entity_credit)s::float8 * s.missing,
                                                %(entity_match)s::float8 * tq.full_match)
                                ELSE 0 END) / NULLIF(tq.full_match, 0) AS coverage
          FROM entity_scored s, tq) c
    ORDER BY score DESC, c.id DESC LIMIT %(max_facts)s
),
-- Fusion: the hybrid rows and the entity leg's; a fact found by both keeps its hybrid row
-- (text and context parts) with the higher score, entity_score the leg's; then the best
-- %(fetch_limit)s by score times weight, and with %(entity_pool)s every fact the leg found.
both_legs AS (
    SELECT r.kind, r.id, r.cosine, r.bm25, r.coverage, r.own_score, r.context_score, r.score,
           NULL::float8 AS entity_score, 0 AS leg, r.restates FROM ranked r
    UNION ALL
    SELECT 'fact'::text, x.id, x.cosine, x.bm25, x.coverage, x.score, NULL::float8, x.score, x.score, 1, copy.restates
    FROM entity_ranked x JOIN facts f ON f.id = x.id
    CROSS JOIN LATERAL fact_restates(true, x.id, f.embedding, %(copy_similarity)s) copy
), fused_legs AS (
    SELECT DISTINCT ON (b.kind, b.id) b.kind, b.id, b.cosine, b.bm25, b.coverage, b.own_score, b.context_score,
           b.restates, max(b.score) OVER (PARTITION BY b.kind, b.id) AS score,
           max(b.entity_score) OVER (PARTITION BY b.kind, b.id) AS entity_score
    FROM both_legs b ORDER BY b.kind, b.id, b.leg
), weighed AS (
    SELECT t.*, w.weight, row_number() OVER (ORDER BY t.score * w.weight DESC, t.kind, t.id DESC) AS place
    FROM fused_legs t
    CROSS JOIN LATERAL (
        SELECT CASE WHEN t.kind <> 'fact' OR t.restates THEN 1
                    WHEN t.entity_score IS NOT NULL THEN %(fact_weight)s::float8 * %(subject_weight)s::float8
                    WHEN COALESCE(t.cosine, 1) < %(weight_min_cosine)s THEN 1
                    ELSE %(fact_weight)s::float8 END AS weight) w
), top AS (
    SELECT t.* FROM weighed t WHERE t.place <= %(fetch_limit)s OR (%(entity_pool)s AND t.entity_score IS NOT NULL)
)
-- The rows in rank order with what grouping and shaping need: a fact's source episode ids,
-- a profile's member facts, and, with %(excerpt_chars)s set, its source turns
-- (fact_source_turns; none for a profile, whose content already gathers what its members
-- say: its ids suffice); the better-placed facts of its namespace a fact says again (cosine
-- at least %(repeat_similarity)s, profiles aside: grouping folds it into them); an episode hit's
-- context: up to %(context)s turns each side in its session (episode_context).
SELECT r.kind, r.id, r.score, r.weight, r.cosine, r.bm25, r.coverage, r.own_score, r.context_score, r.entity_score,
       n.slug AS namespace, COALESCE(f.content, e.content) AS content, f.confidence, f.valid_from, f.valid_until,
       f.withdrawn_at, CASE WHEN r.kind = 'fact' THEN fact_visible(f, NULL, NULL, false) END AS current,
       CASE WHEN r.kind = 'fact' THEN COALESCE(p.episode_ids, '{}') END AS source_episode_ids,
       CASE WHEN f.origin = 'profile' THEN COALESCE(p.fact_ids, '{}') END AS member_fact_ids,
       CASE WHEN r.kind = 'fact' AND f.origin <> 'profile' AND %(excerpt_chars)s::int IS NOT NULL THEN ARRAY(
           SELECT t.turn FROM fact_source_turns(f.id, %(excerpt_chars)s::int, %(known_at)s::timestamptz) t
           ORDER BY t.id) END AS sources,
       CASE WHEN r.kind = 'fact' AND f.origin <> 'profile' THEN ARRAY(
           SELECT o.id FROM top o JOIN facts g ON g.id = o.id
           WHERE o.kind = 'fact' AND o.place < r.place AND g.origin <> 'profile'
             AND g.namespace_id = f.namespace_id AND 1 - (g.embedding <=> f.embedding) >= %(repeat_similarity)s
           ORDER BY o.place) END AS repeats,
       e.metadata, e.occurred_at,
       CASE WHEN r.kind = 'episode' AND %(context)s > 0 THEN ARRAY(
           SELECT t.turn FROM episode_context(e, %(context)s, %(as_of)s::timestamptz, %(known_at)s::timestamptz) t
           ORDER BY t.id) END AS context
FROM top r
LEFT JOIN facts f ON r.kind = 'fact' AND f.id = r.id
LEFT JOIN episodes e ON r.kind = 'episode' AND e.id = r.id
LEFT JOIN LATERAL (  -- a fact's parents, read once by the lineage key
    SELECT array_agg(l.parent_id ORDER BY l.parent_id) FILTER (WHERE l.parent_kind = 'episode') AS episode_ids,
           array_agg(l.parent_id ORDER BY l.parent_id) FILTER (WHERE l.parent_kind = 'fact') AS fact_ids
    FROM lineage l WHERE l.child_kind = 'fact' AND l.child_id = f.id) p ON true
JOIN namespaces n ON n.id = COALESCE(f.namespace_id, e.namespace_id)
ORDER BY r.place
