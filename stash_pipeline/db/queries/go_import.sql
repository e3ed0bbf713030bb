-- migrate-from-go (interchange/go_import.py): reading a Go Stash database, and the ledger of
-- what was imported from it. The go_* reads run on the Go database's connection.

-- go_count_estimate --
-- About how many rows a Go table holds (the planner's estimate: for progress only, no scan).
SELECT GREATEST(reltuples, 0)::bigint FROM pg_class WHERE oid = to_regclass(%(table)s)

-- go_table_exists --
-- Whether the Go database has this table (older Go versions lack some).
SELECT to_regclass(%(table)s) IS NOT NULL AS exists

-- go_rows_namespaces --
-- Every Go namespaces row, all columns (they vary across Go versions), in id order.
SELECT * FROM namespaces ORDER BY id

-- go_rows_episodes --
-- Every Go episodes row, all columns (they vary across Go versions), in id order.
SELECT * FROM episodes ORDER BY id

-- go_rows_goals --
-- Every Go goals row, all columns (they vary across Go versions), in id order.
SELECT * FROM goals ORDER BY id

-- go_rows_failures --
-- Every Go failures row, all columns (they vary across Go versions), in id order.
SELECT * FROM failures ORDER BY id

-- go_rows_facts --
-- Every Go facts row, all columns (they vary across Go versions), in id order.
SELECT * FROM facts ORDER BY id

-- go_rows_fact_sources --
-- Every Go fact_sources row, all columns (they vary across Go versions), in id order.
SELECT * FROM fact_sources ORDER BY fact_id, episode_id

-- go_rows_relationships --
-- Every Go relationships row, all columns (they vary across Go versions), in id order.
SELECT * FROM relationships ORDER BY id

-- go_rows_causal_links --
-- Every Go causal_links row, all columns (they vary across Go versions), in id order.
SELECT * FROM causal_links ORDER BY id

-- go_rows_patterns --
-- Every Go patterns row, all columns (they vary across Go versions), in id order.
SELECT * FROM patterns ORDER BY id

-- go_rows_contradictions --
-- Every Go contradictions row, all columns (they vary across Go versions), in id order.
SELECT * FROM contradictions ORDER BY id

-- go_rows_hypotheses --
-- Every Go hypotheses row, all columns (they vary across Go versions), in id order.
SELECT * FROM hypotheses ORDER BY id

-- go_rows_contexts --
-- Every Go contexts row, all columns (they vary across Go versions), in id order.
SELECT * FROM contexts ORDER BY namespace_id

-- go_rows_embedding_cache --
-- Every Go embedding_cache row, all columns (they vary across Go versions), in id order.
SELECT * FROM embedding_cache ORDER BY text_hash, model

-- go_rows_consolidation_progress --
-- Every Go consolidation_progress row, all columns (they vary across Go versions), in id order.
SELECT * FROM consolidation_progress ORDER BY namespace_id

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

-- go_import_supersede --
-- Point facts Go replaced automatically at their replacement.
UPDATE facts f SET superseded_by = p.ref
  FROM jsonb_to_recordset(%(pairs)s) AS p(id bigint, ref bigint)
 WHERE f.id = p.id AND f.superseded_by IS NULL

-- go_identity --
-- The Go database's identity: its cluster's system identifier and the database's oid and name.
SELECT s.system_identifier, d.oid, d.datname
  FROM pg_control_system() s, pg_database d
 WHERE d.datname = current_database()
