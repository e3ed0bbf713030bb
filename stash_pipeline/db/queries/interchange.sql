-- Imports (stash_pipeline/interchange/writer.py): every chunk of rows goes in through the
-- set-based interchange_insert_set function (migration 0014); the rest create namespaces,
-- fill in self-references, find where a reference points, and record an export as imported.

-- interchange_import_namespace --
-- Create (or find) a namespace of an imported tree; existing ones keep their name.
WITH ins AS (
    INSERT INTO namespaces (slug, name, description, created_at, updated_at)
    SELECT %(slug)s, COALESCE(r.name, ''), COALESCE(r.description, ''), COALESCE(r.created_at, now()),
           COALESCE(r.updated_at, now())
    FROM jsonb_populate_record(NULL::namespaces, %(row)s) r
    ON CONFLICT (slug) DO NOTHING
    RETURNING id
)
SELECT id FROM ins UNION ALL SELECT id FROM namespaces WHERE slug = %(slug)s AND NOT EXISTS (SELECT 1 FROM ins)

-- interchange_insert_set --
-- Insert a chunk of rows (a JSON array, every element with the same keys) into one table
-- in one INSERT … SELECT, their vectors (or NULL) as a binary vector[] in the same order;
-- one result per written row: its 1-based position in the array and its id and
-- namespace_id (a row a unique key already held has no result).
SELECT n, inserted FROM interchange_insert_set(%(table)s::regclass, %(rows)s, %(vectors)b::vector[])

-- interchange_defer --
-- Point imported rows' self-reference ({column} of {table}: a goal's parent, a fact's
-- replacement, a merged entity's target) at the (imported) row, once all rows of the table
-- exist; one already set (a Go row imported by an earlier run) keeps its value.
UPDATE {table} t SET {column} = p.ref
  FROM jsonb_to_recordset(%(pairs)s) AS p(id bigint, ref bigint)
 WHERE t.id = p.id AND p.ref IS NOT NULL AND t.{column} IS NULL

-- interchange_importing --
-- For the rest of this transaction the history triggers (migration 0016) keep no change:
-- an import's own updates (interchange_defer) complete rows it wrote with their history.
SELECT set_config('stash.importing', 'on', true)

-- interchange_namespace_slug --
-- The path of a namespace (where an imported reference points).
SELECT slug FROM namespaces WHERE id = %(id)s

-- interchange_namespace_of --
-- The namespace of a row ({table}: its table) a Go migration imported in an earlier run.
SELECT namespace_id FROM {table} WHERE id = %(id)s

-- interchange_export_imported --
-- When this export (by its identity) was already imported under this root.
SELECT created_at FROM imported_rows
 WHERE source = %(source)s AND source_table = 'export' AND source_id = %(target)s

-- interchange_export_record --
-- Record an export as imported under a root (in the import's own transaction).
INSERT INTO imported_rows (source, source_table, source_id, kind, stash_id)
VALUES (%(source)s, 'export', %(target)s, 'namespaces', %(namespace_id)s)
ON CONFLICT DO NOTHING
