-- Imports write a chunk of rows of one table in one INSERT … SELECT, instead of one
-- dynamic statement per row (interchange_insert, 0004, which stays for one-off rows).

-- Insert a chunk of rows given as a JSON array into a table. Every record carries the
-- same keys (the caller groups them so): each key that names a stored (not generated)
-- column is written, the other columns take their defaults, exactly as interchange_insert
-- does for one row. Column names come from the catalog and are quoted with %I, values are
-- bound, never spliced. Rows are written in array order; a row that collides with a unique
-- constraint is not written (ON CONFLICT DO NOTHING). The vectors, when given, are the
-- records' embeddings in array order, sent in binary: formatting 384 decimals per row
-- as text and parsing them back cost more than the rest of an import together.
--
-- Result: one row per written record, its 1-based position in the array and its id and
-- namespace_id (those the table has) as JSON. The id is drawn by the table (a trigger
-- draws commit-ordered ids), so a written row is matched back to its record by the
-- text of the values it was given (vectors left out), duplicates paired in array order.
CREATE FUNCTION interchange_insert_set(target regclass, records jsonb, vectors vector[] DEFAULT NULL)
RETURNS TABLE (n bigint, inserted jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    columns text;
    selected text;
    keyed text;
    returned text;
    built text;
    ordered text;
BEGIN
    IF jsonb_typeof(records) <> 'array' OR jsonb_array_length(records) = 0 THEN
        RETURN;
    END IF;
    SELECT string_agg(format('%I', a.attname), ', ' ORDER BY a.attnum),
           string_agg(format('src.%I', a.attname), ', ' ORDER BY a.attnum),
           string_agg(format('%I', a.attname), ', ' ORDER BY a.attnum)
               FILTER (WHERE a.attname <> 'id' AND format_type(a.atttypid, NULL) <> 'vector')
      INTO columns, selected, keyed
      FROM pg_attribute a
     WHERE a.attrelid = target AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
       AND (records -> 0) ? a.attname;
    IF columns IS NULL THEN
        RAISE EXCEPTION 'no column of % in the imported rows', target;
    END IF;
    IF vectors IS NOT NULL THEN
        columns := columns || ', embedding';
        selected := selected || ', ($2)[src.n::int]';
    END IF;
    SELECT string_agg(format('t.%I', a.attname), ', ' ORDER BY a.attnum),
           string_agg(format('%L, w.%I', a.attname, a.attname), ', ') FILTER (WHERE a.attname IN ('id', 'namespace_id'))
      INTO returned, built
      FROM pg_attribute a
     WHERE a.attrelid = target AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
       AND (a.attname IN ('id', 'namespace_id')
            OR ((records -> 0) ? a.attname AND format_type(a.atttypid, NULL) <> 'vector'));
    ordered := CASE WHEN EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = target AND a.attname = 'id'
                                    AND NOT a.attisdropped) THEN 'w.id' ELSE '1' END;
    RETURN QUERY EXECUTE format(
        'WITH src AS MATERIALIZED ('
        '    SELECT x.n, p.* FROM jsonb_array_elements($1) WITH ORDINALITY AS x(r, n)'
        '    CROSS JOIN LATERAL jsonb_populate_record(NULL::%1$s, x.r) AS p),'
        ' ins AS (INSERT INTO %1$s AS t (%2$s) SELECT %7$s FROM src ORDER BY src.n'
        '    ON CONFLICT DO NOTHING RETURNING %3$s),'
        ' given AS (SELECT s.n, ROW(%4$s)::text AS k,'
        '    row_number() OVER (PARTITION BY ROW(%4$s)::text ORDER BY s.n) AS rn FROM src s),'
        ' written AS (SELECT w.*, ROW(%4$s)::text AS k,'
        '    row_number() OVER (PARTITION BY ROW(%4$s)::text ORDER BY %6$s) AS rn FROM ins w)'
        ' SELECT given.n, jsonb_build_object(%5$s) FROM given JOIN written w USING (k, rn) ORDER BY given.n',
        target, columns, returned, coalesce(keyed, ''), coalesce(built, ''), ordered, selected)
      USING records, vectors;
END $$;
