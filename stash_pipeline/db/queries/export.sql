-- Table and JSONL export (interchange/export.py): the row count per table and every row of a namespace
-- tree, all stored columns (SELECT *: a column added later travels without code changes),
-- in an order an import can replay (ids ascending: parents before children).

-- interchange_columns --
-- The stored (not generated) columns of a table and their types, in table order.
SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type
  FROM pg_attribute a
 WHERE a.attrelid = %(table)s::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
 ORDER BY a.attnum

-- interchange_counts --
-- How many rows of each table the tree holds (for progress), all in one statement.
SELECT 'namespaces' AS name, count(*) AS rows FROM namespaces WHERE id = ANY(%(ids)s)
UNION ALL SELECT 'episodes', count(*) FROM episodes WHERE namespace_id = ANY(%(ids)s)
UNION ALL SELECT 'goals', count(*) FROM goals WHERE namespace_id = ANY(%(ids)s)
UNION ALL SELECT 'failures', count(*) FROM failures WHERE namespace_id = ANY(%(ids)s)
UNION ALL SELECT 'entities', count(*) FROM entities WHERE namespace_id = ANY(%(ids)s)
UNION ALL SELECT 'entity_aliases', count(*) FROM entity_aliases WHERE namespace_id = ANY(%(ids)s)
UNION ALL SELECT 'entity_corrections', count(*) FROM entity_corrections WHERE namespace_id = ANY(%(ids)s)
UNION ALL SELECT 'facts', count(*) FROM facts WHERE namespace_id = ANY(%(ids)s)
UNION ALL SELECT 'relationships', count(*) FROM relationships WHERE namespace_id = ANY(%(ids)s)
UNION ALL SELECT 'causal_links', count(*) FROM causal_links WHERE namespace_id = ANY(%(ids)s)
UNION ALL SELECT 'patterns', count(*) FROM patterns WHERE namespace_id = ANY(%(ids)s)
UNION ALL SELECT 'contradictions', count(*) FROM contradictions WHERE namespace_id = ANY(%(ids)s)
UNION ALL SELECT 'hypotheses', count(*) FROM hypotheses WHERE namespace_id = ANY(%(ids)s)
UNION ALL SELECT 'hypothesis_evidence', count(*) FROM hypothesis_evidence WHERE namespace_id = ANY(%(ids)s)
UNION ALL SELECT 'goal_notes', count(*) FROM goal_notes WHERE namespace_id = ANY(%(ids)s)
UNION ALL SELECT 'contexts', count(*) FROM contexts WHERE namespace_id = ANY(%(ids)s)
UNION ALL SELECT 'lineage', count(*) FROM lineage WHERE namespace_id = ANY(%(ids)s)
UNION ALL SELECT 'dead_letters', count(*) FROM dead_letters WHERE namespace_id = ANY(%(ids)s)

-- interchange_rows_namespaces --
-- Every namespaces row of the tree (read through a server-side cursor).
SELECT t.* FROM namespaces t WHERE t.id = ANY(%(ids)s) ORDER BY t.slug

-- interchange_rows_episodes --
-- Every episodes row of the tree (read through a server-side cursor).
SELECT t.* FROM episodes t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_rows_goals --
-- Every goals row of the tree (read through a server-side cursor).
SELECT t.* FROM goals t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_rows_failures --
-- Every failures row of the tree (read through a server-side cursor).
SELECT t.* FROM failures t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_rows_entities --
-- Every entities row of the tree (read through a server-side cursor).
SELECT t.* FROM entities t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_rows_entity_aliases --
-- Every entity_aliases row of the tree (read through a server-side cursor).
SELECT t.* FROM entity_aliases t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.entity_id, t.normalised

-- interchange_rows_entity_corrections --
-- Every entity_corrections row of the tree (read through a server-side cursor).
SELECT t.* FROM entity_corrections t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_rows_facts --
-- Every facts row of the tree (read through a server-side cursor).
SELECT t.* FROM facts t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_rows_relationships --
-- Every relationships row of the tree (read through a server-side cursor).
SELECT t.* FROM relationships t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_rows_causal_links --
-- Every causal_links row of the tree (read through a server-side cursor).
SELECT t.* FROM causal_links t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_rows_patterns --
-- Every patterns row of the tree (read through a server-side cursor).
SELECT t.* FROM patterns t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_rows_contradictions --
-- Every contradictions row of the tree (read through a server-side cursor).
SELECT t.* FROM contradictions t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_rows_hypotheses --
-- Every hypotheses row of the tree (read through a server-side cursor).
SELECT t.* FROM hypotheses t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_rows_hypothesis_evidence --
-- Every hypothesis_evidence row of the tree (read through a server-side cursor).
SELECT t.* FROM hypothesis_evidence t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_rows_goal_notes --
-- Every goal_notes row of the tree (read through a server-side cursor).
SELECT t.* FROM goal_notes t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_rows_contexts --
-- Every contexts row of the tree (read through a server-side cursor).
SELECT t.* FROM contexts t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY (SELECT slug FROM namespaces n WHERE n.id = t.namespace_id)

-- interchange_rows_lineage --
-- Every lineage row of the tree (read through a server-side cursor).
SELECT t.* FROM lineage t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.child_kind, t.child_id, t.parent_kind, t.parent_id

-- interchange_rows_dead_letters --
-- Every dead_letters row of the tree (read through a server-side cursor).
SELECT t.* FROM dead_letters t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id
