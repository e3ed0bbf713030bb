-- Imports: one generic insert, so a column added to a table later (a second time axis on
-- facts, say) travels through export and import without code changes; and the ledger of
-- rows brought over from another system, which makes re-running such an import a no-op.

-- Insert one row given as JSON into a table: every key that names a stored (not
-- generated) column is written, the rest of the columns take their defaults. Column
-- names come from the catalog and are quoted with %I, values are bound, never spliced.
-- A row that collides with a unique constraint is not inserted: the result is NULL.
-- Returns the inserted row's id and namespace_id (those the table has) as JSON; building
-- the whole row as JSON would turn every vector into text only to drop it.
CREATE FUNCTION interchange_insert(target regclass, record jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    columns text;
    returned text;
    inserted jsonb;
BEGIN
    SELECT string_agg(format('%I', a.attname), ', ' ORDER BY a.attnum) INTO columns
      FROM pg_attribute a
     WHERE a.attrelid = target AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
       AND record ? a.attname;
    IF columns IS NULL THEN
        RAISE EXCEPTION 'no column of % in the imported row', target;
    END IF;
    SELECT string_agg(format('%L, t.%I', a.attname, a.attname), ', ') INTO returned
      FROM pg_attribute a
     WHERE a.attrelid = target AND a.attname IN ('id', 'namespace_id') AND NOT a.attisdropped;
    EXECUTE format(
        'INSERT INTO %s AS t (%s) SELECT %s FROM jsonb_populate_record(NULL::%s, $1) '
        'ON CONFLICT DO NOTHING RETURNING jsonb_build_object(%s)',
        target, columns, columns, target, coalesce(returned, ''))
      INTO inserted USING record;
    RETURN inserted;
END $$;

-- One row per row imported from another system (a Go Stash database): where it came
-- from and the Stash row it became (NULL when it was skipped on purpose, with why).
CREATE TABLE imported_rows (
    source       text NOT NULL,          -- the source system's identity, e.g. go-stash:<system id>/<db>
    source_table text NOT NULL,
    source_id    text NOT NULL,
    kind         text NOT NULL,          -- the Stash table the row went to
    stash_id     bigint,
    skipped      text,                   -- why the row was not imported, when it was not
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, source_table, source_id)
);
CREATE INDEX imported_rows_stash_idx ON imported_rows (kind, stash_id);
