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

-- fact_supersede --
-- Retire an old fact in favour of a new one of the same namespace when the old one's
-- interval holds at the new one's start (it began no later and ends after that start;
-- open-ended or not) and it is not withdrawn: its event interval closes where the new
-- fact's begins, retired_at records when Stash changed its mind, and relationships drawn
-- from it close with it. Used by assert_fact and the contradiction check
-- (stash_pipeline.memory.timeline).
WITH old AS (
    UPDATE facts o
       SET valid_until = n.valid_from, superseded_by = n.id, retired_at = now(), updated_at = now()
      FROM facts n
     WHERE o.id = %(old_id)s AND n.id = %(new_id)s AND n.namespace_id = o.namespace_id
       AND o.withdrawn_at IS NULL AND o.valid_from <= n.valid_from
       AND (o.valid_until IS NULL OR o.valid_until > n.valid_from)
    RETURNING o.id, o.valid_until
), closed AS (
    UPDATE relationships r
       SET valid_until = GREATEST(r.valid_from, old.valid_until), retired_at = now()
      FROM old
     WHERE r.source_fact_id = old.id AND r.withdrawn_at IS NULL
       AND (r.valid_until IS NULL OR r.valid_until > GREATEST(r.valid_from, old.valid_until))
    RETURNING r.id
)
SELECT id FROM old

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

-- fact_close_as_history --
-- Store a fact as history: its interval (and the end as first recorded) closes where a
-- newer current fact on the same key begins.
UPDATE facts
   SET valid_until = %(valid_until)s, recorded_valid_until = %(valid_until)s, updated_at = now()
 WHERE id = %(id)s
RETURNING valid_until

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

-- timeline_reopen --
-- Give back the time gone facts (%(ids)s: withdrawn, about to be purged, or rejected by a
-- contradiction's resolution) took on their
-- keys: a live fact of the key with
-- another value that ended exactly where a gone fact began, because of it (superseded by
-- it, or closed as history before it), ends again at the next live value after it (by
-- valid_from, then arrival; an empty interval is no value) or at its stated end,
-- whichever is earlier (so a fact no value ever cut, e.g. of a multi-valued property,
-- keeps its stated end). Superseded_by names that next value when it ends the fact;
-- retired_at is now (a read known at an earlier time sees the end as first recorded)
-- unless the fact is back to exactly what was first recorded, open-ended. Returns the
-- changed facts.
WITH gone AS (
    SELECT id, namespace_id, entity, entity_id, property, value, valid_from, superseded_by
      FROM facts
     WHERE id = ANY(%(ids)s) AND entity IS NOT NULL AND property IS NOT NULL AND value IS NOT NULL
), cut AS (
    SELECT DISTINCT f.id, f.namespace_id, f.entity, f.entity_id, f.property, f.value, f.valid_from,
           f.stated_valid_until, f.recorded_valid_until, f.superseded_by
      FROM facts f
      JOIN gone g ON g.namespace_id = f.namespace_id
                 AND (lower(f.entity) = lower(g.entity) OR f.entity_id = g.entity_id)
                 AND lower(f.property) = lower(g.property)
     WHERE f.id <> ALL(%(ids)s) AND f.withdrawn_at IS NULL
       AND f.valid_until = g.valid_from AND f.valid_from <= g.valid_from
       -- superseded by the gone fact (a later arrival), or closed as history before it;
       -- a fact retired in favour of an earlier one (keep_old) was rejected and stays so
       AND ((f.superseded_by = g.id AND g.id > f.id) OR f.superseded_by IS NULL)
       -- a fact corrected at its own start by a gone fact that was itself corrected by a later
       -- statement (%(keep_corrections)s: emptied, not withdrawn) stays corrected: the
       -- correction still stands, only its value was replaced
       AND NOT (%(keep_corrections)s AND f.valid_from = g.valid_from AND g.superseded_by > g.id)
       AND lower(regexp_replace(btrim(f.value), '\s+', ' ', 'g'))
           <> lower(regexp_replace(btrim(g.value), '\s+', ' ', 'g'))
), placed AS (
    SELECT c.id, c.recorded_valid_until, c.superseded_by, nx.id AS next_id,
           CASE WHEN nx.valid_from IS NULL THEN c.stated_valid_until
                WHEN c.stated_valid_until IS NULL THEN nx.valid_from
                ELSE LEAST(c.stated_valid_until, nx.valid_from) END AS new_end,
           nx.valid_from AS next_from
      FROM cut c
      LEFT JOIN LATERAL (
          SELECT n.id, n.valid_from
            FROM facts n
           WHERE n.namespace_id = c.namespace_id
             AND (lower(n.entity) = lower(c.entity) OR n.entity_id = c.entity_id)
             AND lower(n.property) = lower(c.property)
             AND n.withdrawn_at IS NULL AND n.id <> ALL(%(ids)s) AND n.id <> c.id
             AND n.valid_until IS DISTINCT FROM n.valid_from
             AND lower(regexp_replace(btrim(n.value), '\s+', ' ', 'g'))
                 <> lower(regexp_replace(btrim(c.value), '\s+', ' ', 'g'))
             AND (n.valid_from > c.valid_from OR (n.valid_from = c.valid_from AND n.id > c.id))
           ORDER BY n.valid_from, n.id
           LIMIT 1) nx ON true
)
UPDATE facts f
   SET valid_until = p.new_end,
       superseded_by = CASE WHEN p.superseded_by IS NOT NULL AND p.next_from IS NOT NULL
                             AND p.new_end = p.next_from THEN p.next_id END,
       retired_at = CASE WHEN p.new_end IS NULL AND p.recorded_valid_until IS NULL THEN NULL ELSE now() END,
       updated_at = now()
  FROM placed p
 WHERE p.id = f.id AND f.valid_until IS DISTINCT FROM p.new_end
RETURNING f.id

-- timeline_recut --
-- After facts were reopened (%(ids)s), close any live fact of the same key with another
-- value that began earlier and still runs past a reopened fact's start: it ends where the
-- reopened value begins (each value ends where the next known one begins), superseded by
-- it. Returns the facts it closed.
WITH reopened AS (
    SELECT id, namespace_id, entity, entity_id, property, value, valid_from
      FROM facts
     WHERE id = ANY(%(ids)s) AND withdrawn_at IS NULL AND valid_until IS DISTINCT FROM valid_from
), hit AS (
    SELECT DISTINCT ON (f.id) f.id, r.id AS by_id, r.valid_from AS new_end
      FROM facts f
      JOIN reopened r ON r.namespace_id = f.namespace_id
                     AND (lower(f.entity) = lower(r.entity) OR f.entity_id = r.entity_id)
                     AND lower(f.property) = lower(r.property)
     WHERE f.id <> ALL(%(ids)s) AND f.withdrawn_at IS NULL
       AND f.valid_from < r.valid_from
       AND (f.valid_until IS NULL OR f.valid_until > r.valid_from)
       AND lower(regexp_replace(btrim(f.value), '\s+', ' ', 'g'))
           <> lower(regexp_replace(btrim(r.value), '\s+', ' ', 'g'))
     ORDER BY f.id, r.valid_from
)
UPDATE facts f
   SET valid_until = h.new_end, superseded_by = h.by_id, retired_at = now(), updated_at = now()
  FROM hit h
 WHERE f.id = h.id
RETURNING f.id

-- timeline_empty_of --
-- Which of the given facts now have an empty event interval (valid_until = valid_from).
SELECT id FROM facts WHERE id = ANY(%(ids)s) AND valid_until = valid_from

-- timeline_relationships_follow --
-- Relationships hold over their source fact's interval: re-align the live relationships
-- of the given facts (closing or reopening them); retired_at records the change, and is
-- cleared when a relationship is open-ended again.
UPDATE relationships r
   SET valid_until = CASE WHEN f.valid_until IS NULL THEN NULL ELSE GREATEST(r.valid_from, f.valid_until) END,
       retired_at = CASE WHEN f.valid_until IS NULL THEN NULL ELSE now() END
  FROM facts f
 WHERE f.id = r.source_fact_id AND f.id = ANY(%(ids)s) AND r.withdrawn_at IS NULL
   AND r.valid_until IS DISTINCT FROM
       (CASE WHEN f.valid_until IS NULL THEN NULL ELSE GREATEST(r.valid_from, f.valid_until) END)

-- timeline_contradictions_of_gone --
-- Open contradictions on withdrawn or purged facts have nothing left to decide: resolved
-- as 'withdrawn'.
UPDATE contradictions
   SET resolved = true, resolution = 'withdrawn', resolved_at = now(),
       resolution_note = COALESCE(resolution_note, 'a fact of the pair was withdrawn')
 WHERE NOT resolved AND (old_fact_id = ANY(%(ids)s) OR new_fact_id = ANY(%(ids)s))
