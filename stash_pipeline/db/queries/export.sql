-- Table and JSONL export (interchange/export.py): per table, the row count and every row of a namespace
-- tree, all stored columns (SELECT *: a column added later travels without code changes),
-- in an order an import can replay (ids ascending: parents before children).

-- interchange_columns --
-- The stored (not generated) columns of a table and their types, in table order.
SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type
  FROM pg_attribute a
 WHERE a.attrelid = %(table)s::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
 ORDER BY a.attnum

-- interchange_count_namespaces --
-- How many namespaces rows the tree holds.
SELECT count(*) FROM namespaces t WHERE t.id = ANY(%(ids)s)

-- interchange_rows_namespaces --
-- Every namespaces row of the tree (read through a server-side cursor).
SELECT t.* FROM namespaces t WHERE t.id = ANY(%(ids)s) ORDER BY t.slug

-- interchange_count_episodes --
-- How many episodes rows the tree holds.
SELECT count(*) FROM episodes t WHERE t.namespace_id = ANY(%(ids)s)

-- interchange_rows_episodes --
-- Every episodes row of the tree (read through a server-side cursor).
SELECT t.* FROM episodes t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_count_goals --
-- How many goals rows the tree holds.
SELECT count(*) FROM goals t WHERE t.namespace_id = ANY(%(ids)s)

-- interchange_rows_goals --
-- Every goals row of the tree (read through a server-side cursor).
SELECT t.* FROM goals t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_count_failures --
-- How many failures rows the tree holds.
SELECT count(*) FROM failures t WHERE t.namespace_id = ANY(%(ids)s)

-- interchange_rows_failures --
-- Every failures row of the tree (read through a server-side cursor).
SELECT t.* FROM failures t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_count_entities --
-- How many entities rows the tree holds.
SELECT count(*) FROM entities t WHERE t.namespace_id = ANY(%(ids)s)

-- interchange_rows_entities --
-- Every entities row of the tree (read through a server-side cursor).
SELECT t.* FROM entities t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_count_entity_aliases --
-- How many entity_aliases rows the tree holds.
SELECT count(*) FROM entity_aliases t WHERE t.namespace_id = ANY(%(ids)s)

-- interchange_rows_entity_aliases --
-- Every entity_aliases row of the tree (read through a server-side cursor).
SELECT t.* FROM entity_aliases t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.entity_id, t.normalised

-- interchange_count_entity_corrections --
-- How many entity_corrections rows the tree holds.
SELECT count(*) FROM entity_corrections t WHERE t.namespace_id = ANY(%(ids)s)

-- interchange_rows_entity_corrections --
-- Every entity_corrections row of the tree (read through a server-side cursor).
SELECT t.* FROM entity_corrections t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_count_facts --
-- How many facts rows the tree holds.
SELECT count(*) FROM facts t WHERE t.namespace_id = ANY(%(ids)s)

-- interchange_rows_facts --
-- Every facts row of the tree (read through a server-side cursor).
SELECT t.* FROM facts t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_count_relationships --
-- How many relationships rows the tree holds.
SELECT count(*) FROM relationships t WHERE t.namespace_id = ANY(%(ids)s)

-- interchange_rows_relationships --
-- Every relationships row of the tree (read through a server-side cursor).
SELECT t.* FROM relationships t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_count_causal_links --
-- How many causal_links rows the tree holds.
SELECT count(*) FROM causal_links t WHERE t.namespace_id = ANY(%(ids)s)

-- interchange_rows_causal_links --
-- Every causal_links row of the tree (read through a server-side cursor).
SELECT t.* FROM causal_links t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_count_patterns --
-- How many patterns rows the tree holds.
SELECT count(*) FROM patterns t WHERE t.namespace_id = ANY(%(ids)s)

-- interchange_rows_patterns --
-- Every patterns row of the tree (read through a server-side cursor).
SELECT t.* FROM patterns t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_count_contradictions --
-- How many contradictions rows the tree holds.
SELECT count(*) FROM contradictions t WHERE t.namespace_id = ANY(%(ids)s)

-- interchange_rows_contradictions --
-- Every contradictions row of the tree (read through a server-side cursor).
SELECT t.* FROM contradictions t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_count_hypotheses --
-- How many hypotheses rows the tree holds.
SELECT count(*) FROM hypotheses t WHERE t.namespace_id = ANY(%(ids)s)

-- interchange_rows_hypotheses --
-- Every hypotheses row of the tree (read through a server-side cursor).
SELECT t.* FROM hypotheses t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_count_hypothesis_evidence --
-- How many hypothesis_evidence rows the tree holds.
SELECT count(*) FROM hypothesis_evidence t WHERE t.namespace_id = ANY(%(ids)s)

-- interchange_rows_hypothesis_evidence --
-- Every hypothesis_evidence row of the tree (read through a server-side cursor).
SELECT t.* FROM hypothesis_evidence t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_count_goal_notes --
-- How many goal_notes rows the tree holds.
SELECT count(*) FROM goal_notes t WHERE t.namespace_id = ANY(%(ids)s)

-- interchange_rows_goal_notes --
-- Every goal_notes row of the tree (read through a server-side cursor).
SELECT t.* FROM goal_notes t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id

-- interchange_count_contexts --
-- How many contexts rows the tree holds.
SELECT count(*) FROM contexts t WHERE t.namespace_id = ANY(%(ids)s)

-- interchange_rows_contexts --
-- Every contexts row of the tree (read through a server-side cursor).
SELECT t.* FROM contexts t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY (SELECT slug FROM namespaces n WHERE n.id = t.namespace_id)

-- interchange_count_lineage --
-- How many lineage rows the tree holds.
SELECT count(*) FROM lineage t WHERE t.namespace_id = ANY(%(ids)s)

-- interchange_rows_lineage --
-- Every lineage row of the tree (read through a server-side cursor).
SELECT t.* FROM lineage t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.child_kind, t.child_id, t.parent_kind, t.parent_id

-- interchange_count_dead_letters --
-- How many dead_letters rows the tree holds.
SELECT count(*) FROM dead_letters t WHERE t.namespace_id = ANY(%(ids)s)

-- interchange_rows_dead_letters --
-- Every dead_letters row of the tree (read through a server-side cursor).
SELECT t.* FROM dead_letters t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY t.id
