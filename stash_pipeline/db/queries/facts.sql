-- fact_insert --
-- Insert one fact and return it (no vector) with its namespace slug.
WITH ins AS (
    INSERT INTO facts (namespace_id, content, entity, property, value, confidence, origin,
                       embedding, embedding_model, rationale)
    VALUES (%(namespace_id)s, %(content)s, %(entity)s, %(property)s, %(value)s, %(confidence)s,
            %(origin)s, %(embedding)s, %(embedding_model)s, %(rationale)s)
    RETURNING id, namespace_id, content, entity, property, value, confidence, origin, valid_from,
              valid_until, superseded_by, withdrawn_at, withdrawn_reason, needs_recheck,
              reinforcements, rationale, created_at, updated_at
)
SELECT ins.*, n.slug AS namespace
FROM ins JOIN namespaces n ON n.id = ins.namespace_id

-- fact_get --
-- One fact by id (any state) with its namespace, source episodes and current flag.
SELECT f.id, f.namespace_id, n.slug AS namespace, f.content, f.entity, f.property, f.value,
       f.confidence, f.origin, f.valid_from, f.valid_until, f.superseded_by, f.withdrawn_at,
       f.withdrawn_reason, f.needs_recheck, f.reinforcements, f.rationale, f.created_at, f.updated_at,
       ARRAY(SELECT l.parent_id FROM lineage l
             WHERE l.child_kind = 'fact' AND l.child_id = f.id AND l.parent_kind = 'episode'
             ORDER BY l.parent_id) AS source_episode_ids,
       (f.withdrawn_at IS NULL AND f.valid_from <= now()
        AND (f.valid_until IS NULL OR f.valid_until > now())) AS current
FROM facts f JOIN namespaces n ON n.id = f.namespace_id
WHERE f.id = %(id)s

-- fact_episodes_in_tree --
-- Which of the given (non-deleted) episode ids live in the given namespaces.
SELECT id FROM episodes
WHERE id = ANY(%(ids)s) AND namespace_id = ANY(%(namespace_ids)s) AND deleted_at IS NULL

-- fact_current_same_key --
-- Current facts of a namespace about the same entity and property (structured conflict check).
SELECT id, entity, property, value, confidence
FROM facts
WHERE namespace_id = %(namespace_id)s
  AND entity IS NOT NULL AND lower(entity) = lower(%(entity)s) AND lower(property) = lower(%(property)s)
  AND withdrawn_at IS NULL AND valid_until IS NULL AND valid_from <= now()
  AND id <> %(exclude_id)s
ORDER BY id
FOR UPDATE

-- fact_supersede --
-- Retire an old fact in favour of a new one of the same namespace, if it is still
-- current (not withdrawn, not retired). Used by assert_fact and the contradiction check.
UPDATE facts
   SET valid_until = GREATEST(now(), valid_from), superseded_by = %(new_id)s, updated_at = now()
 WHERE id = %(old_id)s AND withdrawn_at IS NULL AND valid_until IS NULL
   AND namespace_id = (SELECT n.namespace_id FROM facts n WHERE n.id = %(new_id)s)
RETURNING id

-- contradiction_insert --
-- Record a contradiction between two facts (duplicates of the same pair are ignored).
-- Used by assert_fact and the consolidation stages' contradiction check.
WITH ins AS (
    INSERT INTO contradictions (namespace_id, old_fact_id, new_fact_id, entity, property, old_value,
                                new_value, classification, confidence, explanation, method,
                                resolved, resolution, resolved_at)
    VALUES (%(namespace_id)s, %(old_fact_id)s, %(new_fact_id)s, %(entity)s, %(property)s, %(old_value)s,
            %(new_value)s, %(classification)s, %(confidence)s, %(explanation)s, %(method)s,
            %(resolved)s, %(resolution)s, CASE WHEN %(resolved)s THEN now() END)
    ON CONFLICT (old_fact_id, new_fact_id) DO NOTHING
    RETURNING *
)
SELECT ins.*, n.slug AS namespace FROM ins JOIN namespaces n ON n.id = ins.namespace_id

-- facts_query --
-- Facts in namespaces with optional filters; current only unless history/as_of is asked.
SELECT f.id, f.namespace_id, n.slug AS namespace, f.content, f.entity, f.property, f.value,
       f.confidence, f.origin, f.valid_from, f.valid_until, f.superseded_by, f.withdrawn_at,
       f.withdrawn_reason, f.needs_recheck, f.reinforcements, f.rationale, f.created_at, f.updated_at,
       ARRAY(SELECT l.parent_id FROM lineage l
             WHERE l.child_kind = 'fact' AND l.child_id = f.id AND l.parent_kind = 'episode'
             ORDER BY l.parent_id) AS source_episode_ids,
       (f.withdrawn_at IS NULL AND f.valid_from <= now()
        AND (f.valid_until IS NULL OR f.valid_until > now())) AS current
FROM facts f JOIN namespaces n ON n.id = f.namespace_id
WHERE (%(all_namespaces)s OR f.namespace_id = ANY(%(namespace_ids)s))
  AND (%(entity)s::text IS NULL OR lower(f.entity) = lower(%(entity)s::text))
  AND (%(property)s::text IS NULL OR lower(f.property) = lower(%(property)s::text))
  AND (%(origin)s::text IS NULL OR f.origin = %(origin)s::text)
  AND (%(since)s::timestamptz IS NULL OR f.valid_from >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR f.valid_from < %(until)s::timestamptz)
  AND (%(include_history)s OR %(as_of)s::timestamptz IS NOT NULL
       OR (f.withdrawn_at IS NULL AND f.valid_from <= now() AND (f.valid_until IS NULL OR f.valid_until > now())))
  AND (%(as_of)s::timestamptz IS NULL
       OR (f.created_at <= %(as_of)s::timestamptz AND f.valid_from <= %(as_of)s::timestamptz
           AND (f.valid_until IS NULL OR f.valid_until > %(as_of)s::timestamptz)
           AND (f.withdrawn_at IS NULL OR f.withdrawn_at > %(as_of)s::timestamptz)))
ORDER BY f.id DESC
LIMIT %(limit)s OFFSET %(offset)s

-- fact_withdraw --
-- Withdraw one fact by hand.
UPDATE facts SET withdrawn_at = now(), withdrawn_reason = %(reason)s, updated_at = now()
WHERE id = %(id)s AND withdrawn_at IS NULL
RETURNING id

-- fact_dependents_for_purge --
-- Rows the foreign keys will delete together with a fact (their lineage must go too).
SELECT 'relationship' AS kind, id FROM relationships WHERE source_fact_id = %(id)s
UNION ALL
SELECT 'causal_link', id FROM causal_links WHERE cause_fact_id = %(id)s OR effect_fact_id = %(id)s
UNION ALL
SELECT 'contradiction', id FROM contradictions WHERE old_fact_id = %(id)s OR new_fact_id = %(id)s

-- fact_hard_delete --
-- Hard-delete one fact (purge).
DELETE FROM facts WHERE id = %(id)s RETURNING id
