-- Inputs and outputs of the profiles stage (stash_pipeline/stages/profiles.py).

-- stage_profiles_touched --
-- The next facts after the stage's cursor (every state, profiles aside: a retired fact's
-- entity has lost a member) as the entities they are about, and the last id read.
WITH next AS (
    SELECT id, entity_id FROM facts
     WHERE namespace_id = %(namespace_id)s AND id > %(cursor)s AND origin <> 'profile'
     ORDER BY id
     LIMIT %(limit)s
)
SELECT (SELECT max(id) FROM next) AS last_id,
       ARRAY(SELECT DISTINCT entity_id FROM next WHERE entity_id IS NOT NULL ORDER BY entity_id) AS entity_ids

-- stage_profiles_members --
-- The current facts (profiles aside) about the entities: what their profiles gather, with
-- each fact's vector and source episodes.
SELECT f.id, f.entity_id, f.entity, f.content, f.confidence, f.embedding, f.valid_from, f.valid_until,
       ARRAY(SELECT l.parent_id FROM lineage l
              WHERE l.child_kind = 'fact' AND l.child_id = f.id AND l.parent_kind = 'episode'
              ORDER BY l.parent_id) AS episode_ids
  FROM facts f
 WHERE f.namespace_id = %(namespace_id)s AND f.entity_id = ANY(%(entity_ids)s::bigint[])
   AND f.origin <> 'profile' AND f.withdrawn_at IS NULL AND f.valid_from <= now()
   AND (f.valid_until IS NULL OR f.valid_until > now())
 ORDER BY f.id

-- stage_profiles_lock_members --
-- Of the members read before the batch, those still current, share-locked until it commits:
-- a member retired meanwhile keeps its profile out, and one retiring later waits for the
-- commit, so its trigger sees the new profile's lineage and withdraws it.
SELECT id FROM facts
 WHERE id = ANY(%(ids)s::bigint[]) AND withdrawn_at IS NULL AND valid_from <= now()
   AND (valid_until IS NULL OR valid_until > now())
   FOR SHARE

-- stage_profiles_current --
-- The current profiles of the entities.
SELECT id, entity_id, content
  FROM facts
 WHERE namespace_id = %(namespace_id)s AND entity_id = ANY(%(entity_ids)s::bigint[])
   AND origin = 'profile' AND withdrawn_at IS NULL AND valid_from <= now()
   AND (valid_until IS NULL OR valid_until > now())

-- stage_profiles_withdraw --
-- Withdraw profiles the entity's facts no longer give (rewritten or left with one member).
UPDATE facts
   SET withdrawn_at = now(), withdrawn_reason = 'profile rewritten', updated_at = now(),
       retired_at = COALESCE(retired_at, now())
 WHERE id = ANY(%(ids)s::bigint[]) AND origin = 'profile' AND withdrawn_at IS NULL

-- stage_profiles_requests --
-- The entities whose profiles were withdrawn (a member retired, a source forgotten), to
-- gather again: the request ids (the stage's aux cursor) and the entities, after the id
-- %(after)s and up to %(upto)s (what waited when the run began; later ones are the next run's).
SELECT id, entity_id FROM profile_requests
 WHERE namespace_id = %(namespace_id)s AND id > %(after)s AND id <= %(upto)s
 ORDER BY id
 LIMIT %(limit)s

-- stage_profiles_requests_head --
-- The newest request id of the namespace (0: none waits).
SELECT COALESCE(max(id), 0) AS id FROM profile_requests WHERE namespace_id = %(namespace_id)s

-- stage_profiles_requests_done --
-- Delete the requests handled (by id: one asked again since has a new id and stays).
DELETE FROM profile_requests WHERE id = ANY(%(ids)s::bigint[])

-- stage_profiles_request --
-- Ask again for the entities' profiles (a member retired while the batch was written).
INSERT INTO profile_requests (namespace_id, entity_id)
SELECT %(namespace_id)s, unnest(%(entity_ids)s::bigint[])
    ON CONFLICT (namespace_id, entity_id)
    DO UPDATE SET id = nextval(pg_get_serial_sequence('profile_requests', 'id')), requested_at = now()
