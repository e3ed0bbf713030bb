-- Visibility on the two time axes (0008) for the rest of the graph, completing 0012's one
-- definition: which causal links a read sees at event time as_of as Stash knew it at
-- system time known_at (each NULL = now), or, with include_history and neither time,
-- every link; and which replacement of a fact Stash knew of at known_at.
--
-- Like 0012's, the functions are plain SQL, STABLE (now()) and not STRICT, with a single
-- expression as body, so the planner inlines them and the calling query's plan is the one
-- of the predicate written out. tests/integration/test_recall_plan.py checks the inlining
-- in the graph and entity reads.

-- A causal link is visible as a relationship is (relationship_visible), from its own
-- columns: recorded by known_at, not withdrawn then, and as_of inside its event interval
-- as Stash believed it then (a link is recorded open-ended: an end set later, when it was
-- retired, is not known before retired_at). include_history without either time: every
-- link, which is what the graph's lists show when asked for no time (every state).
CREATE FUNCTION causal_link_visible(c causal_links, as_of timestamptz, known_at timestamptz,
                                    include_history boolean)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT (include_history AND as_of IS NULL AND known_at IS NULL)
        OR (c.recorded_at <= COALESCE(known_at, now())
            AND (c.withdrawn_at IS NULL OR c.withdrawn_at > COALESCE(known_at, now()))
            AND c.valid_from <= COALESCE(as_of, now())
            AND COALESCE(CASE WHEN c.retired_at > COALESCE(known_at, now()) THEN NULL
                              ELSE c.valid_until END, 'infinity') > COALESCE(as_of, now()))
$$;

-- A fact's replacement as Stash knew it at known_at: none before the fact was retired
-- (the companion of fact_valid_until, which gives the end believed then).
CREATE FUNCTION fact_superseded_by(f facts, known_at timestamptz)
RETURNS bigint LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN f.retired_at > COALESCE(known_at, now()) THEN NULL ELSE f.superseded_by END
$$;

-- get_entity finds an entity's causal links from its facts, by either end: the cause end
-- reads causal_links_uidx (cause_fact_id first); the effect end needs its own index, as
-- causal_links_effect_idx leads with the namespace, which a link need not share with its
-- effect.
CREATE INDEX causal_links_effect_fact_idx ON causal_links (effect_fact_id) WHERE deleted_at IS NULL;
