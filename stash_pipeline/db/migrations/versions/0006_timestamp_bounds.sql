-- Every timestamptz column holds an instant in [1000-01-01, 9000-01-01) UTC, the range
-- stash_pipeline.memory.validate accepts (MIN_TIMESTAMP, MAX_TIMESTAMP).
--
-- Before this, an occurred_at such as 9999-12-31T23:59:59-14:00 was stored as year 10000
-- UTC. PostgreSQL keeps it, but Python's datetime cannot hold it, so every read that
-- returned the row (recall, get_episode, purge) failed with "invalid value" and only
-- manual SQL could remove it.
--
-- 1. Repair what is already stored: an episode's occurred_at outside the range becomes
--    the time it was recorded (created_at); any other value is clamped to the nearest
--    bound (clamping keeps the order of two times in one row, so valid_until >=
--    valid_from still holds).
-- 2. A CHECK constraint per column so no path (a tool, the CLI, an import, plain SQL)
--    can store such a value again.
--
-- Columns are found in the catalogue rather than listed, so every table of the schema
-- is covered; identifiers are quoted with format('%I'), bounds are literals.
DO $$
DECLARE
    col record;
    low  constant timestamptz := '1000-01-01 00:00:00+00';
    high constant timestamptz := '9000-01-01 00:00:00+00';
BEGIN
    UPDATE episodes
       SET occurred_at = created_at
     WHERE (occurred_at < low OR occurred_at >= high)
       AND created_at >= low AND created_at < high;

    FOR col IN
        SELECT c.table_name, c.column_name
          FROM information_schema.columns c
          JOIN information_schema.tables t
            ON t.table_schema = c.table_schema AND t.table_name = c.table_name
         WHERE c.table_schema = current_schema()
           AND t.table_type = 'BASE TABLE'
           AND c.data_type = 'timestamp with time zone'
           AND c.table_name <> 'stash_schema_version'
         ORDER BY c.table_name, c.column_name
    LOOP
        EXECUTE format(
            'UPDATE %1$I SET %2$I = LEAST(GREATEST(%2$I, $1), $2 - interval ''1 microsecond'') '
            'WHERE %2$I < $1 OR %2$I >= $2',
            col.table_name, col.column_name
        ) USING low, high;
        EXECUTE format(
            'ALTER TABLE %1$I ADD CONSTRAINT %2$I CHECK ('
            '%3$I >= ''1000-01-01 00:00:00+00''::timestamptz AND %3$I < ''9000-01-01 00:00:00+00''::timestamptz)',
            col.table_name, left(col.table_name || '_' || col.column_name || '_in_range', 63), col.column_name
        );
    END LOOP;
END
$$;
