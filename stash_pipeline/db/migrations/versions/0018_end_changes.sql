-- When a row's end last changed, so that a read "as known at" skips the history of a row
-- unchanged since.
--
-- A known_at read looks a row's history up (fact_ends, relationship_ends,
-- causal_link_ends: migration 0016), one index probe through a function call per row.
-- For a fact it did so when the fact was updated after known_at, a test that passes on
-- changes the history does not hold: decay's aging of a stale fact's confidence (every
-- fact, once per window), a reinforcement, a recheck flag. On a store a few windows old
-- nearly every fact had moved, so an old known_at read probed the history of nearly every
-- fact for nothing. A relationship or causal link had no such test at all: every row
-- was probed, whatever known_at.
--
-- ends_changed_at (facts, relationships, causal_links): the system time of the row's
-- latest kept change of end (a fact's end or replacement, a relationship's or causal
-- link's end or withdrawal), the replaced_at of its newest history row; null when it has
-- none. Set by the history trigger itself when it keeps a change, and, for history rows
-- written directly (an import brings them along, a repair by hand), by a trigger on the
-- history table, so it never falls behind the history it summarises. It is derived: an
-- export leaves it out and an import recomputes it from the history it writes. A row
-- whose end did not change after known_at reads its current columns, the answer the
-- lookup gives when it finds nothing.
--
-- The lookups behind the reads are one per history table: fact_held_at returns the fact's
-- history row (0016 had fact_end_at and fact_replacement_at, the same probe for one column
-- each), and the rule of a relationship's or causal link's state is written once
-- (end_holds, inlined). Reads without known_at run the same plans as before; a generic
-- plan's estimate of a relationship or causal link predicate counts the written-out
-- fallback too (recall's: +0.02 of about 4,200).
--
-- A purged fact is gone from the history too (fact_purge_from_history): the ends other
-- facts held name it as their replacement no more. Those an earlier purge left are cleared
-- here, and an index finds them for the next.
--
-- A fact's updated_at keeps its meaning (the row's latest change of any column, decay's
-- clock: a fact decays once per window without an update) and its guarantee (never
-- earlier than a change of end: keep_fact_end).

-- the same bounds as every other timestamp (0006)
ALTER TABLE facts ADD COLUMN ends_changed_at timestamptz,
    ADD CONSTRAINT facts_ends_changed_at_in_range
        CHECK (ends_changed_at >= '1000-01-01 00:00:00+00'::timestamptz
               AND ends_changed_at < '9000-01-01 00:00:00+00'::timestamptz);
ALTER TABLE relationships ADD COLUMN ends_changed_at timestamptz,
    ADD CONSTRAINT relationships_ends_changed_at_in_range
        CHECK (ends_changed_at >= '1000-01-01 00:00:00+00'::timestamptz
               AND ends_changed_at < '9000-01-01 00:00:00+00'::timestamptz);
ALTER TABLE causal_links ADD COLUMN ends_changed_at timestamptz,
    ADD CONSTRAINT causal_links_ends_changed_at_in_range
        CHECK (ends_changed_at >= '1000-01-01 00:00:00+00'::timestamptz
               AND ends_changed_at < '9000-01-01 00:00:00+00'::timestamptz);

-- The history kept so far (the backfill of 0016 included): plain updates of a column no
-- history trigger watches.
UPDATE facts f SET ends_changed_at = h.last
  FROM (SELECT fact_id, max(replaced_at) AS last FROM fact_ends GROUP BY fact_id) AS h
 WHERE f.id = h.fact_id;
UPDATE relationships r SET ends_changed_at = h.last
  FROM (SELECT relationship_id, max(replaced_at) AS last FROM relationship_ends GROUP BY relationship_id) AS h
 WHERE r.id = h.relationship_id;
UPDATE causal_links c SET ends_changed_at = h.last
  FROM (SELECT causal_link_id, max(replaced_at) AS last FROM causal_link_ends GROUP BY causal_link_id) AS h
 WHERE c.id = h.causal_link_id;

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

-- History rows written by a statement of their own (not by the keep_*_end triggers, whose
-- insert runs one trigger level down and sets the column on the row they are updating):
-- their rows' ends_changed_at moves up to the newest of them. One function for the three
-- history tables: TG_ARGV names the table the history is of and its id column here (these
-- inserts are rare, an import's or a hand's, so the statement is built per call).
CREATE FUNCTION note_ends() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF pg_trigger_depth() > 1 THEN
        RETURN NULL;  -- kept by the keep_*_end trigger, which sets the column itself
    END IF;
    EXECUTE format(
        'UPDATE %1$I t SET ends_changed_at = a.last
           FROM (SELECT %2$I AS id, max(replaced_at) AS last FROM added GROUP BY %2$I) AS a
          WHERE t.id = a.id AND (t.ends_changed_at IS NULL OR t.ends_changed_at < a.last)',
        TG_ARGV[0], TG_ARGV[1]);
    RETURN NULL;
END $$;

CREATE TRIGGER fact_ends_note AFTER INSERT ON fact_ends
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION note_ends('facts', 'fact_id');
CREATE TRIGGER relationship_ends_note AFTER INSERT ON relationship_ends
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION note_ends('relationships', 'relationship_id');
CREATE TRIGGER causal_link_ends_note AFTER INSERT ON causal_link_ends
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION note_ends('causal_links', 'causal_link_id');

CREATE OR REPLACE FUNCTION keep_relationship_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('stash.importing', true) = 'on' THEN
        RETURN NEW;  -- an import completing a row it wrote, history and all
    END IF;
    IF OLD.recorded_at < now() THEN
        INSERT INTO relationship_ends (relationship_id, namespace_id, valid_until, withdrawn_since, replaced_at)
        VALUES (OLD.id, OLD.namespace_id, OLD.valid_until, OLD.withdrawn_at, now())
        ON CONFLICT DO NOTHING;
        NEW.ends_changed_at := now();
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION keep_causal_link_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('stash.importing', true) = 'on' THEN
        RETURN NEW;  -- an import completing a row it wrote, history and all
    END IF;
    IF OLD.recorded_at < now() THEN
        INSERT INTO causal_link_ends (causal_link_id, namespace_id, valid_until, withdrawn_since, replaced_at)
        VALUES (OLD.id, OLD.namespace_id, OLD.valid_until, OLD.withdrawn_at, now())
        ON CONFLICT DO NOTHING;
        NEW.ends_changed_at := now();
    END IF;
    RETURN NEW;
END $$;


-- The reads of 0016, the same signatures and answers, the history read only for a row
-- whose end changed after known_at (a fact's was: updated after known_at; a relationship's
-- or causal link's: always). Each stays one inlinable expression, and the lookups behind
-- them are one per history table (0016 had two for facts, one per column, and wrote the
-- rule of a relationship's or causal link's state twice in each of its two lookups).

-- Whether an end and withdrawal (as held at ``known``) let a row hold at event time
-- ``event_at``: not withdrawn by then, not ended by event_at. Inlined where it is called.
CREATE FUNCTION end_holds(until timestamptz, withdrawn timestamptz, event_at timestamptz, known timestamptz)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (withdrawn IS NULL OR withdrawn > known) AND COALESCE(until, 'infinity') > event_at
$$;

-- The end and replacement a fact held at known_at: its history row of its first change
-- after known_at, else ``until_now`` and ``by_now`` (the caller's current ones, or the old
-- rule for a row without history). Plain SQL, not inlined, reached only with known_at;
-- COST 1 so that the planner's estimate of the default read, which sums every branch of a
-- CASE, does not move. A caller takes the one column it needs.
CREATE FUNCTION fact_held_at(fact bigint, known timestamptz, until_now timestamptz, by_now bigint)
RETURNS fact_ends LANGUAGE sql STABLE PARALLEL SAFE COST 1 AS $$
    SELECT fact, h.namespace_id, CASE WHEN h.fact_id IS NULL THEN until_now ELSE h.valid_until END,
           CASE WHEN h.fact_id IS NULL THEN by_now ELSE h.superseded_by END, h.replaced_at
      FROM (SELECT 1) AS one
      LEFT JOIN LATERAL (SELECT e.* FROM fact_ends e
                          WHERE e.fact_id = fact AND e.replaced_at > known
                          ORDER BY e.replaced_at LIMIT 1) AS h ON true
$$;

-- Whether a relationship (a causal link) held at event time ``event_at`` as known at
-- ``known``: its end and withdrawal as they were until its first change after ``known``,
-- else the given ones (same signatures as 0016; one lookup each, the rule in end_holds).
CREATE OR REPLACE FUNCTION relationship_held_at(relationship bigint, event_at timestamptz, known timestamptz,
                                                until_now timestamptz, withdrawn_now timestamptz)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE COST 1 AS $$
    SELECT CASE WHEN h.relationship_id IS NULL THEN end_holds(until_now, withdrawn_now, event_at, known)
                ELSE end_holds(h.valid_until, h.withdrawn_since, event_at, known) END
      FROM (SELECT 1) AS one
      LEFT JOIN LATERAL (SELECT e.relationship_id, e.valid_until, e.withdrawn_since FROM relationship_ends e
                          WHERE e.relationship_id = relationship AND e.replaced_at > known
                          ORDER BY e.replaced_at LIMIT 1) AS h ON true
$$;

CREATE OR REPLACE FUNCTION causal_link_held_at(link bigint, event_at timestamptz, known timestamptz,
                                               until_now timestamptz, withdrawn_now timestamptz)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE COST 1 AS $$
    SELECT CASE WHEN h.causal_link_id IS NULL THEN end_holds(until_now, withdrawn_now, event_at, known)
                ELSE end_holds(h.valid_until, h.withdrawn_since, event_at, known) END
      FROM (SELECT 1) AS one
      LEFT JOIN LATERAL (SELECT e.causal_link_id, e.valid_until, e.withdrawn_since FROM causal_link_ends e
                          WHERE e.causal_link_id = link AND e.replaced_at > known
                          ORDER BY e.replaced_at LIMIT 1) AS h ON true
$$;

CREATE OR REPLACE FUNCTION fact_valid_until(f facts, known_at timestamptz)
RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN known_at IS NULL THEN f.valid_until
                WHEN f.ends_changed_at > known_at
                THEN (fact_held_at(f.id, known_at, CASE WHEN f.retired_at > known_at THEN f.recorded_valid_until
                                                        ELSE f.valid_until END, NULL)).valid_until
                -- no change of end since known_at: no lookup (the same answer)
                WHEN f.retired_at > known_at THEN f.recorded_valid_until ELSE f.valid_until END
$$;

CREATE OR REPLACE FUNCTION fact_superseded_by(f facts, known_at timestamptz)
RETURNS bigint LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN known_at IS NULL THEN CASE WHEN f.retired_at > now() THEN NULL ELSE f.superseded_by END
                WHEN f.ends_changed_at > known_at
                THEN (fact_held_at(f.id, known_at, NULL,
                                   CASE WHEN f.retired_at > known_at
                                             AND f.valid_until IS DISTINCT FROM f.recorded_valid_until
                                        THEN NULL ELSE f.superseded_by END)).superseded_by
                WHEN f.retired_at > known_at AND f.valid_until IS DISTINCT FROM f.recorded_valid_until THEN NULL
                ELSE f.superseded_by END
$$;

DROP FUNCTION fact_end_at(bigint, timestamptz, timestamptz);
DROP FUNCTION fact_replacement_at(bigint, timestamptz, bigint);

CREATE OR REPLACE FUNCTION relationship_visible(r relationships, as_of timestamptz, known_at timestamptz,
                                                include_history boolean)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT (include_history AND as_of IS NULL AND known_at IS NULL)
        OR (r.recorded_at <= COALESCE(known_at, now())
            AND r.valid_from <= COALESCE(as_of, now())
            AND CASE WHEN known_at IS NULL
                     THEN (r.withdrawn_at IS NULL OR r.withdrawn_at > now())
                          AND COALESCE(r.valid_until, 'infinity') > COALESCE(as_of, now())
                     WHEN r.ends_changed_at > known_at
                     THEN relationship_held_at(r.id, COALESCE(as_of, now()), known_at,
                                               CASE WHEN r.retired_at > known_at THEN NULL ELSE r.valid_until END,
                                               r.withdrawn_at)
                     -- no change since known_at: what relationship_held_at falls back to
                     ELSE end_holds(CASE WHEN r.retired_at > known_at THEN NULL ELSE r.valid_until END,
                                    r.withdrawn_at, COALESCE(as_of, now()), known_at) END)
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
                     WHEN c.ends_changed_at > known_at
                     THEN causal_link_held_at(c.id, COALESCE(as_of, now()), known_at,
                                              CASE WHEN c.retired_at > known_at THEN NULL ELSE c.valid_until END,
                                              c.withdrawn_at)
                     ELSE end_holds(CASE WHEN c.retired_at > known_at THEN NULL ELSE c.valid_until END,
                                    c.withdrawn_at, COALESCE(as_of, now()), known_at) END)
$$;

CREATE OR REPLACE FUNCTION relationship_live(r relationships, known_at timestamptz)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN known_at IS NULL THEN r.withdrawn_at IS NULL OR r.withdrawn_at > now()
                WHEN r.ends_changed_at > known_at
                THEN relationship_held_at(r.id, '-infinity', known_at, NULL, r.withdrawn_at)
                ELSE r.withdrawn_at IS NULL OR r.withdrawn_at > known_at END
$$;

-- The ends that name a fact as their replacement, for a purge to clear (fact_purge_from_history:
-- fact_ends.superseded_by has no foreign key, see 0016); few rows have one. Those naming a
-- fact purged before this version are cleared now.
CREATE INDEX fact_ends_superseded_by_idx ON fact_ends (superseded_by) WHERE superseded_by IS NOT NULL;
UPDATE fact_ends e SET superseded_by = NULL
 WHERE e.superseded_by IS NOT NULL AND NOT EXISTS (SELECT 1 FROM facts f WHERE f.id = e.superseded_by);
