-- When a row's end last changed, so that a read "as known at" skips the history of a row
-- unchanged since.
--
-- A known_at read of a fact looks its history up (fact_ends, migration 0016) only when the
-- fact may have changed its end or replacement after known_at. Until this version that
-- test was updated_at, which moves on changes the history does not hold: decay's aging of
-- a stale fact's confidence (every fact, once per window), a reinforcement, a recheck
-- flag, a withdrawal. On a store a few windows old nearly every fact had moved, so an old
-- known_at read probed the history of nearly every fact for nothing.
--
-- ends_changed_at (facts): the system time of the fact's latest kept change of end or
-- replacement, the replaced_at of its newest fact_ends row; null when it has none. Set by
-- the history trigger itself when it keeps a change, and, for history rows written
-- directly (an import brings them along, a repair by hand), by a trigger on the history
-- table, so it never falls behind the history it summarises. It is derived: an export
-- leaves it out and an import recomputes it from the history it writes.
--
-- updated_at keeps its meaning (the row's latest change of any column, decay's clock:
-- a fact decays once per window without an update) and its guarantee (never earlier than
-- a change of end: keep_fact_end).

ALTER TABLE facts ADD COLUMN ends_changed_at timestamptz,
    ADD CONSTRAINT facts_ends_changed_at_in_range
        CHECK (ends_changed_at >= '1000-01-01 00:00:00+00'::timestamptz
               AND ends_changed_at < '9000-01-01 00:00:00+00'::timestamptz);

-- A row's history kept so far (the backfill of 0016 included); plain updates of a column no
-- history trigger watches.
UPDATE facts f SET ends_changed_at = h.last
  FROM (SELECT fact_id, max(replaced_at) AS last FROM fact_ends GROUP BY fact_id) AS h
 WHERE f.id = h.fact_id;

CREATE OR REPLACE FUNCTION keep_fact_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('stash.importing', true) = 'on' THEN
        RETURN NEW;  -- an import completing a row it wrote, history and all
    END IF;
    IF OLD.recorded_at < now() THEN
        INSERT INTO fact_ends (fact_id, namespace_id, valid_until, superseded_by, replaced_at)
        VALUES (OLD.id, OLD.namespace_id, OLD.valid_until, OLD.superseded_by, now())
        ON CONFLICT DO NOTHING;
        NEW.ends_changed_at := now();
    END IF;
    NEW.updated_at := GREATEST(NEW.updated_at, now());
    RETURN NEW;
END $$;

-- History rows written by a statement of their own (not by the trigger above, whose insert
-- runs one trigger level down and sets the column on the row it is updating): their rows'
-- ends_changed_at moves up to the newest of them.
CREATE FUNCTION note_fact_ends() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF pg_trigger_depth() > 1 THEN
        RETURN NULL;  -- kept by keep_fact_end, which sets the column itself
    END IF;
    UPDATE facts f SET ends_changed_at = a.last
      FROM (SELECT fact_id, max(replaced_at) AS last FROM added GROUP BY fact_id) AS a
     WHERE f.id = a.fact_id AND (f.ends_changed_at IS NULL OR f.ends_changed_at < a.last);
    RETURN NULL;
END $$;

CREATE TRIGGER fact_ends_note AFTER INSERT ON fact_ends
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION note_fact_ends();

-- fact_valid_until and fact_superseded_by of 0016, the history read only for a fact whose
-- end or replacement changed after known_at (was: updated after known_at).
CREATE OR REPLACE FUNCTION fact_valid_until(f facts, known_at timestamptz)
RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN known_at IS NULL THEN f.valid_until
                WHEN f.ends_changed_at > known_at
                THEN fact_end_at(f.id, known_at, CASE WHEN f.retired_at > known_at THEN f.recorded_valid_until
                                                      ELSE f.valid_until END)
                -- no change of end since known_at: no lookup (the same answer)
                WHEN f.retired_at > known_at THEN f.recorded_valid_until ELSE f.valid_until END
$$;

CREATE OR REPLACE FUNCTION fact_superseded_by(f facts, known_at timestamptz)
RETURNS bigint LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN known_at IS NULL THEN CASE WHEN f.retired_at > now() THEN NULL ELSE f.superseded_by END
                WHEN f.ends_changed_at > known_at
                THEN fact_replacement_at(f.id, known_at,
                                         CASE WHEN f.retired_at > known_at
                                                   AND f.valid_until IS DISTINCT FROM f.recorded_valid_until
                                              THEN NULL ELSE f.superseded_by END)
                WHEN f.retired_at > known_at AND f.valid_until IS DISTINCT FROM f.recorded_valid_until THEN NULL
                ELSE f.superseded_by END
$$;
