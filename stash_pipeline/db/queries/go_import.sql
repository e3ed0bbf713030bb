-- migrate-from-go (interchange/go_import.py): reading a Go Stash database, and the ledger of
-- what was imported from it. The go_* reads run on the Go database's connection.

-- go_table_exists --
-- Whether the Go database has this table (older Go versions lack some), and about how many
-- rows it holds (the planner's estimate: for progress only, no scan).
SELECT to_regclass(%(table)s) IS NOT NULL AS exists,
       (SELECT GREATEST(reltuples, 0)::bigint FROM pg_class WHERE oid = to_regclass(%(table)s)) AS estimate

-- go_rows --
-- Every row of one Go table ({table}), all columns (they vary across Go versions), in key order ({key}).
SELECT * FROM {table} ORDER BY {key}

-- go_fact_sources --
-- Every fact_sources edge in key order, with its fact's namespace (the lineage edge's).
SELECT s.*, f.namespace_id FROM fact_sources s JOIN facts f ON f.id = s.fact_id ORDER BY s.fact_id, s.episode_id

-- go_import_ledger --
-- Every Go row already imported from this source (or skipped on purpose).
SELECT source_table, source_id, stash_id FROM imported_rows WHERE source = %(source)s

-- go_import_record --
-- Record a chunk of Go rows as imported (their Stash id) or skipped (why).
INSERT INTO imported_rows (source, source_table, source_id, kind, stash_id, skipped)
SELECT %(source)s, r.source_table, r.source_id, r.kind, r.stash_id, r.skipped
  FROM jsonb_to_recordset(%(rows)s) AS r(source_table text, source_id text, kind text, stash_id bigint,
                                         skipped text)
ON CONFLICT DO NOTHING

-- go_import_checkpoint --
-- Move a stage's cursors forward to where Go's consolidation had got (never back).
INSERT INTO stage_checkpoints (namespace_id, stage, cursor, aux_cursor)
VALUES (%(namespace_id)s, %(stage)s, %(cursor)s, %(aux_cursor)s)
ON CONFLICT (namespace_id, stage) DO UPDATE
   SET cursor = GREATEST(stage_checkpoints.cursor, EXCLUDED.cursor),
       aux_cursor = GREATEST(stage_checkpoints.aux_cursor, EXCLUDED.aux_cursor), updated_at = now()
 WHERE stage_checkpoints.cursor < EXCLUDED.cursor OR stage_checkpoints.aux_cursor < EXCLUDED.aux_cursor

-- go_identity --
-- The Go database's identity: its cluster's system identifier and the database's oid and name.
SELECT s.system_identifier, d.oid, d.datname
  FROM pg_control_system() s, pg_database d
 WHERE d.datname = current_database()

-- go_legacy_sources --
-- Ledger sources written before the ledger was keyed on the Go database's identity: keyed
-- on the DSN's host, port and database name ('go-stash:HOST:PORT/DB'), for a database of
-- this name, when the current identity has no ledger yet.
SELECT DISTINCT source FROM imported_rows
 WHERE source LIKE 'go-stash:%%' AND source !~ '^go-stash:[0-9]+/[0-9]+:'
   AND right(source, length(%(datname)s) + 1) = '/' || %(datname)s
   AND NOT EXISTS (SELECT 1 FROM imported_rows WHERE source = %(source)s)

-- go_legacy_sample --
-- Up to ten imported rows per table (namespaces, episodes, facts) of a ledger source, with
-- what Stash holds for them now (the path, the content): the fingerprint a Go database
-- must match for that ledger to be its own.
SELECT source_table, source_id, value FROM (
    SELECT r.source_table, r.source_id, COALESCE(n.slug, e.content, f.content) AS value,
           row_number() OVER (PARTITION BY r.source_table ORDER BY r.stash_id) AS k
      FROM imported_rows r
      LEFT JOIN namespaces n ON r.source_table = 'namespaces' AND n.id = r.stash_id
      LEFT JOIN episodes e ON r.source_table = 'episodes' AND e.id = r.stash_id
      LEFT JOIN facts f ON r.source_table = 'facts' AND f.id = r.stash_id
     WHERE r.source = %(source)s AND r.source_table IN ('namespaces', 'episodes', 'facts')
       AND r.stash_id IS NOT NULL) s
 WHERE k <= 10 AND value IS NOT NULL

-- go_ledger_rekey --
-- Move a ledger to the Go database's identity (once its fingerprint matched).
UPDATE imported_rows SET source = %(source)s WHERE source = %(legacy)s

-- go_fingerprint --
-- (Go side) the path or content of some rows by id, to compare with an old ledger's.
SELECT 'namespaces' AS source_table, id::text AS source_id, slug AS value FROM namespaces
 WHERE id::text = ANY(%(namespaces)s)
UNION ALL SELECT 'episodes', id::text, content FROM episodes WHERE id::text = ANY(%(episodes)s)
UNION ALL SELECT 'facts', id::text, content FROM facts WHERE id::text = ANY(%(facts)s)
