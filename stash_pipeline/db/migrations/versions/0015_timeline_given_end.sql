-- A fact's end given from outside its key's timeline, so that the timeline of a
-- single-valued (entity, property) can be recomputed from its live statements
-- (stash_pipeline.memory.timeline.settle) without losing it.
--
-- facts.given_valid_until: the decay stage's expiry, or the fact's own start when a
-- contradiction's resolution rejected it (an empty interval: no value). The timeline ends
-- a fact at the earliest of its stated end (stated_valid_until), this given end and the
-- start of the next live value.
--
-- Backfill: every end the timeline rule does not explain is kept as given: a live fact
-- whose end is neither its stated end nor the start of another value of its key that
-- began after it (or at the same time and arrived later). That is exactly the expired
-- and rejected facts of earlier versions, and leaves the data as it is.
ALTER TABLE facts ADD COLUMN given_valid_until timestamptz;
ALTER TABLE facts ADD CONSTRAINT facts_given_valid_until_in_range CHECK (
    given_valid_until >= '1000-01-01 00:00:00+00'::timestamptz
    AND given_valid_until < '9000-01-01 00:00:00+00'::timestamptz);

UPDATE facts f
   SET given_valid_until = f.valid_until
 WHERE f.withdrawn_at IS NULL AND f.valid_until IS NOT NULL
   AND f.valid_until IS DISTINCT FROM f.stated_valid_until
   AND NOT EXISTS (
       SELECT 1 FROM facts g
        WHERE g.namespace_id = f.namespace_id AND g.id <> f.id AND g.withdrawn_at IS NULL
          AND (lower(g.entity) = lower(f.entity) OR g.entity_id = f.entity_id)
          AND lower(g.property) = lower(f.property)
          AND g.valid_from = f.valid_until
          AND (g.valid_from > f.valid_from OR g.id > f.id)
          AND lower(regexp_replace(btrim(g.value), '\s+', ' ', 'g'))
              <> lower(regexp_replace(btrim(f.value), '\s+', ' ', 'g')));
