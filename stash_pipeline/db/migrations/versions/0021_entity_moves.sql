-- A fact moved to another entity (merge_entities, split_entity) changes what each entity's
-- profiles gather, though no end of the fact changes: the profiles of both entities are
-- retired and both entities asked for again (profile_requests), so no profile keeps listing
-- as current a fact that is no longer its entity's, and the next run gathers each anew.
-- A profile itself moved with its entity is retired the same way. A fact's first entity
-- (a link, not a move) is the stage's ordinary input, read after its cursor.
CREATE FUNCTION facts_entity_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE facts p
       SET withdrawn_at = now(), withdrawn_reason = 'its entity changed',
           updated_at = now(), retired_at = COALESCE(p.retired_at, now())
     WHERE p.withdrawn_at IS NULL AND p.origin = 'profile'
       AND (p.id = NEW.id
            OR p.id IN (SELECT l.child_id FROM lineage l
                         WHERE l.parent_kind = 'fact' AND l.parent_id = NEW.id AND l.child_kind = 'fact'));
    INSERT INTO profile_requests (namespace_id, entity_id)
    SELECT NEW.namespace_id, e.id
      FROM entities e
     WHERE e.id IN (OLD.entity_id, NEW.entity_id)
    ON CONFLICT (namespace_id, entity_id)
    DO UPDATE SET id = nextval(pg_get_serial_sequence('profile_requests', 'id')), requested_at = now();
    RETURN NULL;
END $$;

CREATE TRIGGER facts_entity_moved AFTER UPDATE OF entity_id ON facts
    FOR EACH ROW
    WHEN (OLD.entity_id IS NOT NULL AND NEW.entity_id IS NOT NULL AND OLD.entity_id <> NEW.entity_id)
    EXECUTE FUNCTION facts_entity_moved();
