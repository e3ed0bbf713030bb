-- Table import (memory/restore.py).

-- interchange_insert_rows --
-- Insert a chunk of rows (a JSON array) into one table through interchange_insert, in
-- array order; each result is the inserted row (NULL when a unique key already held it).
SELECT x.n, interchange_insert(%(table)s::regclass, x.r) AS row
  FROM jsonb_array_elements(%(rows)s) WITH ORDINALITY AS x(r, n)

-- interchange_defer_goals_parent_id --
-- Point imported goals at their (imported) parent goals, once all goals exist.
UPDATE goals g SET parent_id = p.ref
  FROM jsonb_to_recordset(%(pairs)s) AS p(id bigint, ref bigint)
 WHERE g.id = p.id

-- interchange_defer_facts_superseded_by --
-- Point imported facts at their (imported) replacements, once all facts exist.
UPDATE facts f SET superseded_by = p.ref
  FROM jsonb_to_recordset(%(pairs)s) AS p(id bigint, ref bigint)
 WHERE f.id = p.id

-- interchange_defer_entities_merged_into --
-- Point imported merged entities at the (imported) entities they were merged into.
UPDATE entities e SET merged_into = p.ref
  FROM jsonb_to_recordset(%(pairs)s) AS p(id bigint, ref bigint)
 WHERE e.id = p.id
