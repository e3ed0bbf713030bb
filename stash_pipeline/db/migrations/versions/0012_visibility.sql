-- Visibility on the two time axes (0008), defined once for every read: which facts,
-- episodes and relationships a read sees at event time as_of as Stash knew it at system
-- time known_at (each NULL = now), or, with include_history and neither time, every row.
--
-- The functions are plain SQL, STABLE (now()) and not STRICT, with a single expression
-- as body: the planner inlines them into the calling query, so a filter written with them
-- is the same expression tree as the predicate written out, and index use (HNSW with
-- iterative scans, GIN, the btree indexes) does not change. A whole-row argument (f, e, r)
-- costs nothing once inlined: a field of a whole-row Var simplifies to the column.
-- tests/integration/test_recall_plan.py checks both the inlining and the index use.

-- A fact's interval end as Stash believed it at known_at: the end first recorded when the
-- fact was retired (superseded, expired, withdrawn) only later, else the current one.
CREATE FUNCTION fact_valid_until(f facts, known_at timestamptz)
RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN f.retired_at > COALESCE(known_at, now()) THEN f.recorded_valid_until ELSE f.valid_until END
$$;

-- A fact is visible when it was recorded by known_at, not withdrawn then, and as_of lies in
-- the interval Stash believed then. include_history without either time: every fact.
CREATE FUNCTION fact_visible(f facts, as_of timestamptz, known_at timestamptz, include_history boolean)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT (include_history AND as_of IS NULL AND known_at IS NULL)
        OR (f.recorded_at <= COALESCE(known_at, now())
            AND (f.withdrawn_at IS NULL OR f.withdrawn_at > COALESCE(known_at, now()))
            AND f.valid_from <= COALESCE(as_of, now())
            AND COALESCE(fact_valid_until(f, known_at), 'infinity') > COALESCE(as_of, now()))
$$;

-- An episode is visible when not forgotten; with as_of or known_at: stored by known_at,
-- not forgotten then, and occurred by as_of.
CREATE FUNCTION episode_visible(e episodes, as_of timestamptz, known_at timestamptz)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN as_of IS NULL AND known_at IS NULL THEN e.deleted_at IS NULL
                ELSE e.created_at <= COALESCE(known_at, now())
                     AND (e.deleted_at IS NULL OR e.deleted_at > COALESCE(known_at, now()))
                     AND e.occurred_at <= COALESCE(as_of, now()) END
$$;

-- A relationship is visible as a fact is, from its own columns: recorded by known_at, not
-- withdrawn then, and as_of inside its event interval as Stash believed it then (a link
-- retired only after known_at was still open-ended then).
CREATE FUNCTION relationship_visible(r relationships, as_of timestamptz, known_at timestamptz,
                                     include_history boolean)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT (include_history AND as_of IS NULL AND known_at IS NULL)
        OR (r.recorded_at <= COALESCE(known_at, now())
            AND (r.withdrawn_at IS NULL OR r.withdrawn_at > COALESCE(known_at, now()))
            AND r.valid_from <= COALESCE(as_of, now())
            AND COALESCE(CASE WHEN r.retired_at > COALESCE(known_at, now()) THEN NULL
                              ELSE r.valid_until END, 'infinity') > COALESCE(as_of, now()))
$$;

-- The entity leg of recall reads each entity's newest links and newest facts under
-- recall's planner settings (no sorts): with the order in the index, that is an index
-- range read per entity, never a walk of a whole primary key backwards to avoid a sort.
-- Each replaces the narrower index it extends.
DROP INDEX relationships_from_entity_id_idx;
DROP INDEX relationships_to_entity_id_idx;
DROP INDEX facts_entity_id_idx;
CREATE INDEX relationships_from_entity_id_idx ON relationships (from_entity_id, id) WHERE from_entity_id IS NOT NULL;
CREATE INDEX relationships_to_entity_id_idx ON relationships (to_entity_id, id) WHERE to_entity_id IS NOT NULL;
CREATE INDEX facts_entity_id_idx ON facts (entity_id, valid_from, id) WHERE entity_id IS NOT NULL;
