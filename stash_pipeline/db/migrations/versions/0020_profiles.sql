-- The profiles stage writes one fact per (entity, aspect) gathering the entity's current
-- facts on that aspect across sessions ("Evan's hobbies and interests: ..."), origin
-- 'profile', with lineage to each member fact and its source episodes.
--
-- A profile lists its members as current, so it must not outlive any of them. The
-- lineage cascade withdraws a profile when any parent dies (forget, purge, withdraw);
-- the first trigger covers the changes that do not go through the cascade: a member
-- superseded or expired (its valid_until set) or withdrawn directly.
--
-- A profile withdrawn for any reason but the stage's own rewrite asks for its entity's
-- profiles to be written again (profile_requests, one row per entity, a new id each time
-- it is asked again); the stage watches the table as its second source and deletes the
-- requests it handled, so the remaining facts are gathered again without waiting for the
-- entity's next fact.
ALTER TABLE facts DROP CONSTRAINT IF EXISTS facts_origin_check;
ALTER TABLE facts ADD CONSTRAINT facts_origin_check
    CHECK (origin IN ('synthesis', 'hypothesis', 'failure_pattern', 'asserted', 'profile'));

CREATE FUNCTION facts_retire_profiles() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE facts p
       SET withdrawn_at = now(), withdrawn_reason = 'a member fact was retired',
           updated_at = now(), retired_at = COALESCE(p.retired_at, now())
      FROM lineage l
     WHERE l.parent_kind = 'fact' AND l.parent_id = NEW.id AND l.child_kind = 'fact'
       AND p.id = l.child_id AND p.origin = 'profile' AND p.withdrawn_at IS NULL;
    RETURN NULL;
END $$;

CREATE TRIGGER facts_retire_profiles AFTER UPDATE OF valid_until, withdrawn_at ON facts
    FOR EACH ROW
    WHEN (NEW.origin <> 'profile'
          AND (NEW.valid_until IS DISTINCT FROM OLD.valid_until
               OR NEW.withdrawn_at IS DISTINCT FROM OLD.withdrawn_at))
    EXECUTE FUNCTION facts_retire_profiles();

CREATE TABLE profile_requests (
    id           bigserial PRIMARY KEY,
    namespace_id bigint NOT NULL REFERENCES namespaces(id) ON DELETE CASCADE,
    entity_id    bigint NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    requested_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (namespace_id, entity_id)
);

CREATE FUNCTION facts_request_profiles() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO profile_requests (namespace_id, entity_id)
    VALUES (NEW.namespace_id, NEW.entity_id)
    ON CONFLICT (namespace_id, entity_id)
    DO UPDATE SET id = nextval(pg_get_serial_sequence('profile_requests', 'id')), requested_at = now();
    RETURN NULL;
END $$;

CREATE TRIGGER facts_request_profiles AFTER UPDATE OF withdrawn_at ON facts
    FOR EACH ROW
    WHEN (NEW.origin = 'profile' AND NEW.entity_id IS NOT NULL
          AND OLD.withdrawn_at IS NULL AND NEW.withdrawn_at IS NOT NULL
          AND NEW.withdrawn_reason IS DISTINCT FROM 'profile rewritten')
    EXECUTE FUNCTION facts_request_profiles();
