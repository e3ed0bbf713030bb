-- Table and JSONL export (interchange/export.py): per table the row count and every row of a namespace
-- tree, all stored columns (SELECT *: a column added later travels without code changes),
-- in an order an import can replay (ids ascending: parents before children).

-- interchange_columns --
-- The stored (not generated) columns of a table and their types, in table order.
SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type
  FROM pg_attribute a
 WHERE a.attrelid = %(table)s::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
 ORDER BY a.attnum

-- interchange_rows_contexts --
-- Every contexts row of the tree (read through a server-side cursor).
SELECT t.* FROM contexts t WHERE t.namespace_id = ANY(%(ids)s) ORDER BY (SELECT slug FROM namespaces n WHERE n.id = t.namespace_id)

-- interchange_count --
-- How many rows of one table ({table}) the tree holds ({scope}: namespace_id, or id for namespaces).
SELECT count(*) FROM {table} WHERE {scope} = ANY(%(ids)s)

-- interchange_rows --
-- Every row of one table ({table}) of the tree ({scope}: namespace_id, or id for namespaces),
-- ordered by the catalog's order for it ({order}).
SELECT * FROM {table} WHERE {scope} = ANY(%(ids)s) ORDER BY {order}
