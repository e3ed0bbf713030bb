-- A history of ends, so that a read "as known at" any system time is exact.
--
-- A fact's end (valid_until) changes after it is recorded whenever its key's timeline is
-- recomputed (a later value, a late statement, a withdrawal or rejection giving time
-- back, a correction), when decay expires it, when a resolution rejects it. A
-- relationship's end follows its source fact, and a relationship or causal link is
-- withdrawn by a cascade and brought back when a stage derives it again. Until this
-- version each row kept one earlier end (facts.recorded_valid_until, as first recorded)
-- and the time of its latest change (retired_at), so a read between two changes was
-- approximate.
--
-- fact_ends, relationship_ends, causal_link_ends: one row per change, the state the row
-- held *until* replaced_at (the system time of the change, the changing transaction's
-- now()): for a fact its end (valid_until) and its replacement (superseded_by: a restore
-- clears it, a later supersession sets another), for a relationship or causal link its
-- end and its withdrawal (withdrawn_since: the withdrawn_at it had, null when live).
-- The state at known_at is then the one held until the first change after known_at, or
-- the row's own columns when nothing changed after it. Several changes in one
-- transaction are one change (the first state is kept: the primary key). A change made
-- in the transaction that recorded the row is not kept: no read sees the row before then.
-- Nor is one made by an import (the transaction-local setting stash.importing = on): it
-- writes rows in their final state, some columns (a fact's replacement) only once every
-- row is in, and brings their history along.
--
-- Written by triggers on every UPDATE of the columns (BEFORE, per row, only when a value
-- changes), so no write path (the timeline, resolutions, decay, the lineage cascade,
-- rebuilds, the graph stages, a repair by hand) can change an end without its history.
-- The interchange catalog exports these tables.
--
-- Reads: fact_valid_until (and so fact_visible), fact_superseded_by, relationship_visible
-- and causal_link_visible keep their signatures and stay inlinable (one CASE expression),
-- and relationship_live is new (a relationship's withdrawal alone, for the graph lists
-- that read its interval through its source fact).
-- Without known_at they are the current columns exactly as before, with no lookup. With
-- known_at, one index probe per row (fact_end_at, fact_replacement_at, relationship_held_at,
-- causal_link_held_at: plain SQL, not inlined, reached only in that branch; COST 1 so
-- that the planner's estimate of the default read, which sums every branch of a CASE,
-- does not move), for a fact only when it was updated after known_at.
--
-- Backfill: rows retired before this version get the one change the old columns
-- describe (a fact: its end as first recorded, and no replacement, until retired_at; a
-- relationship: open-ended until retired_at), so reads of old data answer as they did.
-- The functions fall back to that same old rule for a row without history (a row imported
-- from a file written before this version, or from Go Stash).

CREATE TABLE fact_ends (
    fact_id      bigint NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
    namespace_id bigint NOT NULL REFERENCES namespaces(id) ON DELETE CASCADE,
    valid_until  timestamptz,
    -- no foreign key: a purge clears the replacement of the facts it replaced (ON DELETE
    -- SET NULL), a change kept here while the fact it names is being deleted
    superseded_by bigint,
    replaced_at  timestamptz NOT NULL,
    PRIMARY KEY (fact_id, replaced_at)
);

CREATE TABLE relationship_ends (
    relationship_id bigint NOT NULL REFERENCES relationships(id) ON DELETE CASCADE,
    namespace_id    bigint NOT NULL REFERENCES namespaces(id) ON DELETE CASCADE,
    valid_until     timestamptz,
    withdrawn_since timestamptz,
    replaced_at     timestamptz NOT NULL,
    PRIMARY KEY (relationship_id, replaced_at)
);

CREATE TABLE causal_link_ends (
    causal_link_id bigint NOT NULL REFERENCES causal_links(id) ON DELETE CASCADE,
    namespace_id   bigint NOT NULL REFERENCES namespaces(id) ON DELETE CASCADE,
    valid_until    timestamptz,
    withdrawn_since timestamptz,
    replaced_at    timestamptz NOT NULL,
    PRIMARY KEY (causal_link_id, replaced_at)
);

-- the same bounds as every other timestamp (0006)
DO $$
DECLARE
    col record;
BEGIN
    FOR col IN
        SELECT * FROM (VALUES ('fact_ends', 'valid_until'), ('fact_ends', 'replaced_at'),
                              ('relationship_ends', 'valid_until'), ('relationship_ends', 'withdrawn_since'),
                              ('relationship_ends', 'replaced_at'),
                              ('causal_link_ends', 'valid_until'), ('causal_link_ends', 'withdrawn_since'),
                              ('causal_link_ends', 'replaced_at')) AS v(table_name, column_name)
    LOOP
        EXECUTE format(
            'ALTER TABLE %1$I ADD CONSTRAINT %2$I CHECK ('
            '%3$I >= ''1000-01-01 00:00:00+00''::timestamptz AND %3$I < ''9000-01-01 00:00:00+00''::timestamptz)',
            col.table_name, left(col.table_name || '_' || col.column_name || '_in_range', 63), col.column_name
        );
    END LOOP;
END
$$;

-- (A fact's updated_at is never earlier than its last change of end or replacement: every
-- path sets it, and this makes sure, so a read known at or after updated_at needs no history.)
CREATE FUNCTION keep_fact_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('stash.importing', true) = 'on' THEN
        RETURN NEW;  -- an import completing a row it wrote, history and all
    END IF;
    IF OLD.recorded_at < now() THEN
        INSERT INTO fact_ends (fact_id, namespace_id, valid_until, superseded_by, replaced_at)
        VALUES (OLD.id, OLD.namespace_id, OLD.valid_until, OLD.superseded_by, now())
        ON CONFLICT DO NOTHING;
    END IF;
    NEW.updated_at := GREATEST(NEW.updated_at, now());
    RETURN NEW;
END $$;

CREATE FUNCTION keep_relationship_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('stash.importing', true) = 'on' THEN
        RETURN NEW;  -- an import completing a row it wrote, history and all
    END IF;
    IF OLD.recorded_at < now() THEN
        INSERT INTO relationship_ends (relationship_id, namespace_id, valid_until, withdrawn_since, replaced_at)
        VALUES (OLD.id, OLD.namespace_id, OLD.valid_until, OLD.withdrawn_at, now())
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NEW;
END $$;

CREATE FUNCTION keep_causal_link_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('stash.importing', true) = 'on' THEN
        RETURN NEW;  -- an import completing a row it wrote, history and all
    END IF;
    IF OLD.recorded_at < now() THEN
        INSERT INTO causal_link_ends (causal_link_id, namespace_id, valid_until, withdrawn_since, replaced_at)
        VALUES (OLD.id, OLD.namespace_id, OLD.valid_until, OLD.withdrawn_at, now())
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER facts_keep_end BEFORE UPDATE OF valid_until, superseded_by ON facts
    FOR EACH ROW WHEN (OLD.valid_until IS DISTINCT FROM NEW.valid_until
                       OR OLD.superseded_by IS DISTINCT FROM NEW.superseded_by)
    EXECUTE FUNCTION keep_fact_end();
CREATE TRIGGER relationships_keep_end BEFORE UPDATE OF valid_until, withdrawn_at ON relationships
    FOR EACH ROW WHEN (OLD.valid_until IS DISTINCT FROM NEW.valid_until
                       OR OLD.withdrawn_at IS DISTINCT FROM NEW.withdrawn_at)
    EXECUTE FUNCTION keep_relationship_end();
CREATE TRIGGER causal_links_keep_end BEFORE UPDATE OF valid_until, withdrawn_at ON causal_links
    FOR EACH ROW WHEN (OLD.valid_until IS DISTINCT FROM NEW.valid_until
                       OR OLD.withdrawn_at IS DISTINCT FROM NEW.withdrawn_at)
    EXECUTE FUNCTION keep_causal_link_end();

INSERT INTO fact_ends (fact_id, namespace_id, valid_until, superseded_by, replaced_at)
SELECT id, namespace_id, recorded_valid_until, NULL, retired_at FROM facts
 WHERE retired_at IS NOT NULL AND retired_at > recorded_at
   AND valid_until IS DISTINCT FROM recorded_valid_until;

INSERT INTO relationship_ends (relationship_id, namespace_id, valid_until, withdrawn_since, replaced_at)
SELECT id, namespace_id, NULL, NULL, retired_at FROM relationships
 WHERE retired_at IS NOT NULL AND retired_at > recorded_at AND valid_until IS NOT NULL;

-- The end a fact held at known_at: the one it held until its first change after known_at,
-- else ``otherwise`` (the caller's current end, or the old rule for a row without history).
CREATE FUNCTION fact_end_at(fact bigint, known timestamptz, otherwise timestamptz)
RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE COST 1 AS $$
    SELECT CASE WHEN h.fact_id IS NULL THEN otherwise ELSE h.valid_until END
      FROM (SELECT 1) AS one
      LEFT JOIN LATERAL (SELECT e.fact_id, e.valid_until FROM fact_ends e
                          WHERE e.fact_id = fact AND e.replaced_at > known
                          ORDER BY e.replaced_at LIMIT 1) AS h ON true
$$;

-- The replacement a fact had at known_at: the one it had until its first change after
-- known_at, else ``otherwise`` (the same lookup as fact_end_at).
CREATE FUNCTION fact_replacement_at(fact bigint, known timestamptz, otherwise bigint)
RETURNS bigint LANGUAGE sql STABLE PARALLEL SAFE COST 1 AS $$
    SELECT CASE WHEN h.fact_id IS NULL THEN otherwise ELSE h.superseded_by END
      FROM (SELECT 1) AS one
      LEFT JOIN LATERAL (SELECT e.fact_id, e.superseded_by FROM fact_ends e
                          WHERE e.fact_id = fact AND e.replaced_at > known
                          ORDER BY e.replaced_at LIMIT 1) AS h ON true
$$;

-- Whether a relationship held at event time ``event_at`` as known at ``known``: its end and
-- withdrawal as they were until its first change after ``known`` (else the given ones).
CREATE FUNCTION relationship_held_at(relationship bigint, event_at timestamptz, known timestamptz,
                                     until_now timestamptz, withdrawn_now timestamptz)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE COST 1 AS $$
    SELECT CASE WHEN h.relationship_id IS NULL
                THEN (withdrawn_now IS NULL OR withdrawn_now > known) AND COALESCE(until_now, 'infinity') > event_at
                ELSE (h.withdrawn_since IS NULL OR h.withdrawn_since > known) AND COALESCE(h.valid_until, 'infinity') > event_at END
      FROM (SELECT 1) AS one
      LEFT JOIN LATERAL (SELECT e.relationship_id, e.valid_until, e.withdrawn_since FROM relationship_ends e
                          WHERE e.relationship_id = relationship AND e.replaced_at > known
                          ORDER BY e.replaced_at LIMIT 1) AS h ON true
$$;

-- The same for a causal link.
CREATE FUNCTION causal_link_held_at(link bigint, event_at timestamptz, known timestamptz,
                                    until_now timestamptz, withdrawn_now timestamptz)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE COST 1 AS $$
    SELECT CASE WHEN h.causal_link_id IS NULL
                THEN (withdrawn_now IS NULL OR withdrawn_now > known) AND COALESCE(until_now, 'infinity') > event_at
                ELSE (h.withdrawn_since IS NULL OR h.withdrawn_since > known) AND COALESCE(h.valid_until, 'infinity') > event_at END
      FROM (SELECT 1) AS one
      LEFT JOIN LATERAL (SELECT e.causal_link_id, e.valid_until, e.withdrawn_since FROM causal_link_ends e
                          WHERE e.causal_link_id = link AND e.replaced_at > known
                          ORDER BY e.replaced_at LIMIT 1) AS h ON true
$$;

-- A relationship not withdrawn as known at known_at (now when null): the graph's lists,
-- which read a relationship's interval through its source fact, check only this of it.
CREATE FUNCTION relationship_live(r relationships, known_at timestamptz)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN known_at IS NULL THEN r.withdrawn_at IS NULL OR r.withdrawn_at > now()
                ELSE relationship_held_at(r.id, '-infinity', known_at, NULL, r.withdrawn_at) END
$$;

-- The visibility functions of 0012 and 0013, same signatures and meaning, now exact at
-- any known_at. Without known_at: the current columns, as before.
CREATE OR REPLACE FUNCTION fact_valid_until(f facts, known_at timestamptz)
RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN known_at IS NULL THEN f.valid_until
                WHEN f.updated_at > known_at
                THEN fact_end_at(f.id, known_at, CASE WHEN f.retired_at > known_at THEN f.recorded_valid_until
                                                      ELSE f.valid_until END)
                -- not updated since known_at: no change of end since, no lookup (the same answer)
                WHEN f.retired_at > known_at THEN f.recorded_valid_until ELSE f.valid_until END
$$;

-- A fact's replacement as known at known_at, the companion of fact_valid_until: without
-- known_at 0013's rule (the current column); else the one held at known_at. With no
-- change after known_at, the current one, unless the fact was retired since with another
-- end than first recorded: only a row without history can be (older data, retired by its
-- supersession), and it had none then (0013's rule).
CREATE OR REPLACE FUNCTION fact_superseded_by(f facts, known_at timestamptz)
RETURNS bigint LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN known_at IS NULL THEN CASE WHEN f.retired_at > now() THEN NULL ELSE f.superseded_by END
                WHEN f.updated_at > known_at
                THEN fact_replacement_at(f.id, known_at,
                                         CASE WHEN f.retired_at > known_at
                                                   AND f.valid_until IS DISTINCT FROM f.recorded_valid_until
                                              THEN NULL ELSE f.superseded_by END)
                WHEN f.retired_at > known_at AND f.valid_until IS DISTINCT FROM f.recorded_valid_until THEN NULL
                ELSE f.superseded_by END
$$;

CREATE OR REPLACE FUNCTION relationship_visible(r relationships, as_of timestamptz, known_at timestamptz,
                                                include_history boolean)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT (include_history AND as_of IS NULL AND known_at IS NULL)
        OR (r.recorded_at <= COALESCE(known_at, now())
            AND r.valid_from <= COALESCE(as_of, now())
            AND CASE WHEN known_at IS NULL
                     THEN (r.withdrawn_at IS NULL OR r.withdrawn_at > now())
                          AND COALESCE(r.valid_until, 'infinity') > COALESCE(as_of, now())
                     ELSE relationship_held_at(r.id, COALESCE(as_of, now()), known_at,
                                               CASE WHEN r.retired_at > known_at THEN NULL ELSE r.valid_until END,
                                               r.withdrawn_at) END)
$$;

CREATE OR REPLACE FUNCTION causal_link_visible(c causal_links, as_of timestamptz, known_at timestamptz,
                                               include_history boolean)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT (include_history AND as_of IS NULL AND known_at IS NULL)
        OR (c.recorded_at <= COALESCE(known_at, now())
            AND c.valid_from <= COALESCE(as_of, now())
            AND CASE WHEN known_at IS NULL
                     THEN (c.withdrawn_at IS NULL OR c.withdrawn_at > now())
                          AND COALESCE(c.valid_until, 'infinity') > COALESCE(as_of, now())
                     ELSE causal_link_held_at(c.id, COALESCE(as_of, now()), known_at,
                                              CASE WHEN c.retired_at > known_at THEN NULL ELSE c.valid_until END,
                                              c.withdrawn_at) END)
$$;
