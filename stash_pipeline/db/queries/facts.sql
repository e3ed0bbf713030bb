-- fact_insert --
-- Insert one fact and return it (no vector) with its namespace slug. Event time: the
-- given valid_from (now when null) and valid_until, which is also the interval end as
-- first recorded; stated_valid_until is the end the statement itself gave (the timeline
-- may end it earlier, at the next known value).
WITH ins AS (
    INSERT INTO facts (namespace_id, content, entity, property, value, confidence, origin,
                       embedding, embedding_model, rationale, valid_from, valid_until, recorded_valid_until,
                       stated_valid_until)
    VALUES (%(namespace_id)s, %(content)s, %(entity)s, %(property)s, %(value)s, %(confidence)s,
            %(origin)s, %(embedding)s, %(embedding_model)s, %(rationale)s,
            COALESCE(%(valid_from)s::timestamptz, now()), %(valid_until)s, %(valid_until)s,
            %(stated_valid_until)s)
    RETURNING id, namespace_id, content, entity, property, value, confidence, origin, valid_from,
              valid_until, superseded_by, withdrawn_at, withdrawn_reason, needs_recheck,
              reinforcements, rationale, created_at, updated_at, recorded_at, retired_at,
              recorded_valid_until
)
SELECT ins.*, n.slug AS namespace
FROM ins JOIN namespaces n ON n.id = ins.namespace_id

-- fact_event_start_of_sources --
-- The event time a derived fact holds from: the earliest time of its sources (parent
-- facts' valid_from, parent episodes' occurred_at, parent failures' creation), never
-- later than now.
SELECT LEAST((SELECT min(valid_from) FROM facts WHERE id = ANY(%(fact_ids)s::bigint[])),
             (SELECT min(occurred_at) FROM episodes WHERE id = ANY(%(episode_ids)s::bigint[])),
             (SELECT min(created_at) FROM failures WHERE id = ANY(%(failure_ids)s::bigint[])),
             now()) AS valid_from

-- fact_get --
-- One fact by id (any state) with its namespace, source episodes and current flag:
-- current = visible at as_of as known at known_at (both default to now; fact_visible).
SELECT f.id, f.namespace_id, n.slug AS namespace, f.content, f.entity, f.property, f.value,
       f.confidence, f.origin, f.valid_from,
       -- the interval end (and replacement) as Stash believed them at known_at: the end
       -- first recorded, and no replacement, before the fact was retired (migrations 0012, 0013)
       fact_valid_until(f, %(known_at)s::timestamptz) AS valid_until,
       fact_superseded_by(f, %(known_at)s::timestamptz) AS superseded_by, f.withdrawn_at,
       f.withdrawn_reason, f.needs_recheck, f.reinforcements, f.rationale, f.created_at, f.updated_at,
       f.recorded_at, f.retired_at, f.recorded_valid_until,
       ARRAY(SELECT l.parent_id FROM lineage l
             WHERE l.child_kind = 'fact' AND l.child_id = f.id AND l.parent_kind = 'episode'
             ORDER BY l.parent_id) AS source_episode_ids,
       fact_visible(f, %(as_of)s::timestamptz, %(known_at)s::timestamptz, false) AS current
FROM facts f JOIN namespaces n ON n.id = f.namespace_id
WHERE f.id = %(id)s

-- fact_episodes_in_tree --
-- Which of the given (non-deleted) episode ids live in the given namespaces.
SELECT id FROM episodes
WHERE id = ANY(%(ids)s) AND namespace_id = ANY(%(namespace_ids)s) AND deleted_at IS NULL

-- fact_same_key_overlapping --
-- Facts of a namespace about the same entity (the same name, case-insensitive, or the
-- same resolved entity %(entity_id)s under another alias) and property whose event
-- interval overlaps [valid_from, valid_until) (an open end is unbounded), not withdrawn:
-- the candidates of the structured conflict check. Locked, oldest first.
SELECT id, entity, property, value, confidence, valid_from, valid_until
FROM facts
WHERE namespace_id = %(namespace_id)s
  AND entity IS NOT NULL AND (lower(entity) = lower(%(entity)s) OR entity_id = %(entity_id)s::bigint)
  AND lower(property) = lower(%(property)s)
  AND withdrawn_at IS NULL AND id <> %(exclude_id)s
  AND (valid_until IS NULL OR valid_until > %(valid_from)s)
  AND (%(valid_until)s::timestamptz IS NULL OR valid_from < %(valid_until)s::timestamptz)
ORDER BY id
FOR UPDATE

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
-- Facts in namespaces with optional filters; current only unless history, as_of or known_at is asked.
SELECT f.id, f.namespace_id, n.slug AS namespace, f.content, f.entity, f.property, f.value,
       f.confidence, f.origin, f.valid_from,
       -- the interval end (and replacement) as Stash believed them at known_at: the end
       -- first recorded, and no replacement, before the fact was retired (migrations 0012, 0013)
       fact_valid_until(f, %(known_at)s::timestamptz) AS valid_until,
       fact_superseded_by(f, %(known_at)s::timestamptz) AS superseded_by, f.withdrawn_at,
       f.withdrawn_reason, f.needs_recheck, f.reinforcements, f.rationale, f.created_at, f.updated_at,
       f.recorded_at, f.retired_at, f.recorded_valid_until,
       ARRAY(SELECT l.parent_id FROM lineage l
             WHERE l.child_kind = 'fact' AND l.child_id = f.id AND l.parent_kind = 'episode'
             ORDER BY l.parent_id) AS source_episode_ids,
       fact_visible(f, %(as_of)s::timestamptz, %(known_at)s::timestamptz, false) AS current
FROM facts f JOIN namespaces n ON n.id = f.namespace_id
WHERE (%(all_namespaces)s OR f.namespace_id = ANY(%(namespace_ids)s))
  AND (%(entity)s::text IS NULL OR lower(f.entity) = lower(%(entity)s::text))
  AND (%(property)s::text IS NULL OR lower(f.property) = lower(%(property)s::text))
  AND (%(origin)s::text IS NULL OR f.origin = %(origin)s::text)
  AND (%(since)s::timestamptz IS NULL OR f.valid_from >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR f.valid_from < %(until)s::timestamptz)
  -- valid at as_of (event time) as Stash knew it at known_at (system time), both now by
  -- default; every fact with include_history (fact_visible, migration 0012)
  AND fact_visible(f, %(as_of)s::timestamptz, %(known_at)s::timestamptz, %(include_history)s)
ORDER BY f.id DESC
LIMIT %(limit)s OFFSET %(offset)s

-- fact_withdraw --
-- Withdraw one fact by hand.
UPDATE facts SET withdrawn_at = now(), withdrawn_reason = %(reason)s, updated_at = now(),
                 retired_at = COALESCE(retired_at, now())
WHERE id = %(id)s AND withdrawn_at IS NULL
RETURNING id

