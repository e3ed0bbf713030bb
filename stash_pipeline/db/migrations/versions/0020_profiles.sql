-- The profiles stage writes one fact per (entity, aspect) gathering the entity's current
-- facts on that aspect across sessions ("Evan's hobbies and interests: ..."), origin
-- 'profile', with lineage to each member fact and its source episodes.
--
-- A profile lists its members as current, so it must not outlive any of them. The
-- lineage cascade withdraws a profile when any parent dies (forget, purge, withdraw);
-- this trigger covers the changes that do not go through the cascade: a member
-- superseded or expired (its valid_until set) or withdrawn directly. The stage writes
-- the entity's profiles again from the facts current then.
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
