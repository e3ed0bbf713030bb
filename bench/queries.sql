-- Bench-only SQL (loaded by bench/common.py with the library's parser): fills, probes and
-- the reference's statements. Earlier versions of the product's statements are not kept
-- here: a bench's baseline is an older revision (--baseline-rev, bench/common.py). Every
-- HNSW read orders by embedding_key (the only vector indexes since migration 0019 are on it).

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
    FROM unnest(tsvector_to_array(stash_lexemes(%(query)s))) AS l) x

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

-- bench_episode_lexemes --
-- Every live episode's lexemes with their counts, as Postgres full text tokenises them (the
-- Python BM25 baseline ranks the same tokens the database does).
SELECT e.id, n.slug AS namespace, u.lexeme, COALESCE(array_length(u.positions, 1), 1) AS n
FROM episodes e JOIN namespaces n ON n.id = e.namespace_id, unnest(e.search) AS u
WHERE e.deleted_at IS NULL

-- bench_text_lexemes --
-- The lexemes (with counts) of a text, tokenised like the stored rows.
SELECT u.lexeme, COALESCE(array_length(u.positions, 1), 1) AS n
FROM unnest(stash_lexemes(%(text)s)) AS u

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
-- neither the fill nor the import maintains them (the writer is what is measured).
SELECT indexname FROM pg_indexes
 WHERE schemaname = 'public' AND tablename IN ('episodes', 'facts')
   AND (indexdef ILIKE '%%using hnsw%%' OR indexdef ILIKE '%%using gin%%')
