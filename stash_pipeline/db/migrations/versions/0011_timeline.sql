-- One timeline per (entity, property) for single-valued properties.
--
-- facts.stated_valid_until: the end the statement itself gave (null: open-ended). The
-- timeline may end a fact earlier (at the next known value); when that value goes away
-- (withdrawn, purged) the fact ends again at the next value or at this stated end.
-- Backfill: the end as first recorded, unless that end was a history close (a different
-- value of the same key begins exactly there): then nothing was stated.
--
-- Repair: before this version a late statement was closed at the start of the *current*
-- value only, so it could overlap an older closed value (Initech valid 2019-2023 over
-- Acme 2020-2023). Such a history fact now ends where the next different value begins.
-- Properties that hold several values at once (the built-in default list of that time,
-- copied here so replaying this migration gives the same data) are left alone.
--
-- contradictions.resolution 'withdrawn': an open contradiction one of whose facts was
-- withdrawn is resolved as such (nothing is left to decide).
ALTER TABLE facts ADD COLUMN stated_valid_until timestamptz;
ALTER TABLE facts ADD CONSTRAINT facts_stated_valid_until_in_range CHECK (
    stated_valid_until >= '1000-01-01 00:00:00+00'::timestamptz
    AND stated_valid_until < '9000-01-01 00:00:00+00'::timestamptz);

UPDATE facts f
   SET stated_valid_until = f.recorded_valid_until
 WHERE f.recorded_valid_until IS NOT NULL
   AND NOT EXISTS (
       SELECT 1 FROM facts g
        WHERE g.namespace_id = f.namespace_id AND g.id <> f.id
          AND lower(g.entity) = lower(f.entity) AND lower(g.property) = lower(f.property)
          AND g.valid_from = f.recorded_valid_until
          AND lower(regexp_replace(btrim(g.value), '\s+', ' ', 'g'))
              <> lower(regexp_replace(btrim(f.value), '\s+', ' ', 'g')));

WITH repair AS (
    SELECT f.id, min(g.valid_from) AS next_from
      FROM facts f
      JOIN facts g ON g.namespace_id = f.namespace_id AND g.id <> f.id
                  AND lower(g.entity) = lower(f.entity) AND lower(g.property) = lower(f.property)
                  AND g.withdrawn_at IS NULL
                  AND lower(regexp_replace(btrim(g.value), '\s+', ' ', 'g'))
                      <> lower(regexp_replace(btrim(f.value), '\s+', ' ', 'g'))
                  AND g.valid_from > f.valid_from AND g.valid_from < f.valid_until
     WHERE f.withdrawn_at IS NULL AND f.superseded_by IS NULL AND f.valid_until IS NOT NULL
       AND f.entity IS NOT NULL AND f.value IS NOT NULL
       AND lower(f.property) <> ALL (ARRAY['likes', 'dislikes', 'loves', 'hates', 'knows', 'friends', 'speaks',
                                          'skills', 'hobbies', 'interests', 'member_of', 'tags', 'visited',
                                          'owns', 'uses'])
     GROUP BY f.id
)
UPDATE facts f
   SET valid_until = r.next_from,
       recorded_valid_until = CASE WHEN f.recorded_valid_until = f.valid_until THEN r.next_from
                                   ELSE f.recorded_valid_until END,
       updated_at = now()
  FROM repair r
 WHERE r.id = f.id;

-- relationships hold over their source fact's interval
UPDATE relationships r
   SET valid_until = GREATEST(r.valid_from, f.valid_until)
  FROM facts f
 WHERE f.id = r.source_fact_id AND r.withdrawn_at IS NULL AND f.valid_until IS NOT NULL
   AND (r.valid_until IS NULL OR r.valid_until > GREATEST(r.valid_from, f.valid_until));

ALTER TABLE contradictions DROP CONSTRAINT IF EXISTS contradictions_resolution_check;
ALTER TABLE contradictions ADD CONSTRAINT contradictions_resolution_check
    CHECK (resolution IN ('superseded', 'keep_old', 'keep_new', 'keep_both', 'neither', 'withdrawn'));

-- an open contradiction on a fact that is already withdrawn has nothing left to decide
UPDATE contradictions c
   SET resolved = true, resolution = 'withdrawn', resolved_at = now(),
       resolution_note = COALESCE(c.resolution_note, 'a fact of the pair was withdrawn')
 WHERE NOT c.resolved
   AND EXISTS (SELECT 1 FROM facts f WHERE f.id IN (c.old_fact_id, c.new_fact_id) AND f.withdrawn_at IS NOT NULL);
