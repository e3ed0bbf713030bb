-- Two time axes for facts, relationships and causal links.
--
-- Event time (valid_from, valid_until): when the statement was true in the world.
-- System time (recorded_at, retired_at): when Stash learned it, and when Stash revised
-- or dropped that belief (the row was superseded, expired or withdrawn).
-- recorded_valid_until (facts): valid_until as first recorded. Superseding a fact closes
-- valid_until later; a read "as known at" a time before retired_at uses this column, so
-- it sees the interval Stash believed then (open-ended until the supersession).
--
-- Backfill, for rows stored before this version:
--   * facts: valid_from becomes the earliest occurred_at of the source episodes (lineage)
--     when that is earlier than the insert time it held; a superseded fact's interval
--     ends where its replacement's begins; recorded_at = created_at; retired_at = when
--     the fact was superseded or expired (the valid_until it held, which was that
--     moment) or withdrawn; recorded_valid_until stays null (every fact was recorded
--     open-ended: the insert never set valid_until).
--   * relationships: event time of the source fact; causal links: from the later of the
--     cause's and the effect's valid_from, open-ended; recorded_at = created_at,
--     retired_at = withdrawn_at.
ALTER TABLE facts
    ADD COLUMN recorded_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN retired_at timestamptz,
    ADD COLUMN recorded_valid_until timestamptz;

ALTER TABLE relationships
    ADD COLUMN valid_from timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN valid_until timestamptz,
    ADD COLUMN recorded_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN retired_at timestamptz;

ALTER TABLE causal_links
    ADD COLUMN valid_from timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN valid_until timestamptz,
    ADD COLUMN recorded_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN retired_at timestamptz;

-- system time first: retired_at reads the valid_until a retired fact held before the
-- backfill rewrites it into event time
UPDATE facts
   SET recorded_at = created_at,
       retired_at = CASE WHEN withdrawn_at IS NOT NULL AND (valid_until IS NULL OR withdrawn_at < valid_until)
                         THEN withdrawn_at ELSE valid_until END;

UPDATE facts f
   SET valid_from = LEAST(f.valid_from, e.first_occurred)
  FROM (SELECT l.child_id AS fact_id, min(e.occurred_at) AS first_occurred
          FROM lineage l JOIN episodes e ON e.id = l.parent_id
         WHERE l.child_kind = 'fact' AND l.parent_kind = 'episode'
         GROUP BY l.child_id) e
 WHERE e.fact_id = f.id AND e.first_occurred < f.valid_from;

-- a superseded fact was true until its replacement became true (never before its own start)
UPDATE facts f
   SET valid_until = GREATEST(f.valid_from, LEAST(f.valid_until, r.valid_from))
  FROM facts r
 WHERE r.id = f.superseded_by AND f.valid_until IS NOT NULL;

UPDATE relationships r
   SET valid_from = f.valid_from, valid_until = f.valid_until,
       recorded_at = r.created_at, retired_at = r.withdrawn_at
  FROM facts f
 WHERE f.id = r.source_fact_id;

UPDATE causal_links c
   SET valid_from = GREATEST((SELECT x.valid_from FROM facts x WHERE x.id = c.cause_fact_id),
                             (SELECT x.valid_from FROM facts x WHERE x.id = c.effect_fact_id),
                             (SELECT y.created_at FROM failures y WHERE y.id = c.effect_failure_id)),
       recorded_at = c.created_at, retired_at = c.withdrawn_at;

ALTER TABLE relationships ADD CHECK (valid_until IS NULL OR valid_until >= valid_from);
ALTER TABLE causal_links ADD CHECK (valid_until IS NULL OR valid_until >= valid_from);
ALTER TABLE facts ADD CHECK (recorded_valid_until IS NULL OR recorded_valid_until >= valid_from);

-- the same bounds as every other timestamp (0006)
DO $$
DECLARE
    col record;
BEGIN
    FOR col IN
        SELECT * FROM (VALUES ('facts', 'recorded_at'), ('facts', 'retired_at'), ('facts', 'recorded_valid_until'),
                              ('relationships', 'valid_from'), ('relationships', 'valid_until'),
                              ('relationships', 'recorded_at'), ('relationships', 'retired_at'),
                              ('causal_links', 'valid_from'), ('causal_links', 'valid_until'),
                              ('causal_links', 'recorded_at'), ('causal_links', 'retired_at')) AS v(table_name, column_name)
    LOOP
        EXECUTE format(
            'ALTER TABLE %1$I ADD CONSTRAINT %2$I CHECK ('
            '%3$I >= ''1000-01-01 00:00:00+00''::timestamptz AND %3$I < ''9000-01-01 00:00:00+00''::timestamptz)',
            col.table_name, left(col.table_name || '_' || col.column_name || '_in_range', 63), col.column_name
        );
    END LOOP;
END
$$;
