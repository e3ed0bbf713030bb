-- The timeline of single-valued (entity, property) keys, recomputed from their live
-- statements in one place (stash_pipeline.memory.timeline: the rule, in prose).

-- timeline_key_facts --
-- The live statements (not withdrawn, not in %(gone)s: facts about to be purged) of the
-- keys of the given facts (%(ids)s, in any state: a fact just withdrawn names the key it
-- left), skipping multi-valued properties (%(multi_valued)s: normalised names). A key is
-- the namespace, the property (case-insensitive) and the entity (the same name
-- case-insensitive, or the same resolved entity under another alias). Values come
-- normalised (case and runs of white space aside). Locked: the caller recomputes their
-- intervals (stash_pipeline.memory.timeline.settle).
SELECT f.id, f.namespace_id, lower(f.entity) AS entity, f.entity_id, lower(f.property) AS property,
       lower(regexp_replace(btrim(f.value), '\s+', ' ', 'g')) AS value, f.valid_from, f.valid_until,
       f.stated_valid_until, f.given_valid_until, f.superseded_by
  FROM facts f
 WHERE f.id IN (
       SELECT g.id
         FROM facts s
         JOIN facts g ON g.namespace_id = s.namespace_id AND lower(g.property) = lower(s.property)
                     AND (lower(g.entity) = lower(s.entity) OR g.entity_id = s.entity_id)
        WHERE s.id = ANY(%(ids)s::bigint[]) AND s.entity IS NOT NULL AND s.property IS NOT NULL
          AND s.value IS NOT NULL
          AND lower(regexp_replace(btrim(s.property), '\s+', ' ', 'g')) <> ALL(%(multi_valued)s::text[]))
   AND f.withdrawn_at IS NULL AND f.value IS NOT NULL AND f.id <> ALL(%(gone)s::bigint[])
 ORDER BY f.id
   FOR UPDATE OF f

-- timeline_held_together --
-- Pairs of the given facts that may hold at once: their contradiction is open or was
-- resolved keep_both (neither ends nor corrects the other on the timeline).
SELECT old_fact_id, new_fact_id FROM contradictions
 WHERE old_fact_id = ANY(%(ids)s::bigint[]) AND new_fact_id = ANY(%(ids)s::bigint[])
   AND (NOT resolved OR resolution = 'keep_both')

-- timeline_save --
-- Store recomputed intervals (%(ids)s, %(ends)s, %(bys)s: end and replacement per fact).
-- A fact recorded in this transaction takes its end as first recorded; an older one whose
-- end changed is retired now (retired_at), unless it is back to its end as first
-- recorded, unreplaced (a change of replacement alone keeps retired_at).
UPDATE facts f
   SET valid_until = c.new_end,
       superseded_by = c.new_by,
       recorded_valid_until = CASE WHEN f.recorded_at = now() THEN c.new_end ELSE f.recorded_valid_until END,
       retired_at = CASE WHEN f.recorded_at = now() OR f.valid_until IS NOT DISTINCT FROM c.new_end
                              THEN f.retired_at
                         WHEN c.new_end IS NOT DISTINCT FROM f.recorded_valid_until AND c.new_by IS NULL THEN NULL
                         ELSE now() END,
       updated_at = now()
  FROM unnest(%(ids)s::bigint[], %(ends)s::timestamptz[], %(bys)s::bigint[]) AS c(id, new_end, new_by)
 WHERE f.id = c.id

-- timeline_reject --
-- A resolution rejected these facts in favour of %(kept_id)s: each is no value (an empty
-- interval, given_valid_until = its start), superseded by the kept fact; only a fact that
-- began no earlier than the kept one (a later start would otherwise end the kept value).
-- timeline.settle then gives back the time they took.
UPDATE facts f
   SET given_valid_until = f.valid_from, valid_until = f.valid_from, superseded_by = %(kept_id)s,
       -- retired now, unless it already had no value (a correction emptied it before)
       retired_at = CASE WHEN f.valid_until IS DISTINCT FROM f.valid_from THEN now() ELSE f.retired_at END,
       updated_at = now()
  FROM facts k
 WHERE f.id = ANY(%(ids)s::bigint[]) AND k.id = %(kept_id)s AND f.valid_from >= k.valid_from
   AND f.withdrawn_at IS NULL
RETURNING f.id

-- timeline_contradiction_candidates --
-- The stages' contradiction check (stash_pipeline.stages.contradictions): facts of one
-- namespace about the same entity (the same name, case-insensitive, or the
-- same resolved entity %(entity_id)s under another alias) and property, not withdrawn,
-- a value (a non-empty interval) other than %(value)s (case and white space aside): every
-- one holding at %(valid_from)s (the new fact's start: the pairs it may contradict; on a
-- timeline at most one per value, more only while contradictions are open), and the
-- first one beginning after it (where the new fact ends as history). No cap: a key's
-- oldest facts by id are not the ones that matter.
WITH other_values AS (
    SELECT id, entity, property, value, content, valid_from, valid_until FROM facts
     WHERE namespace_id = %(namespace_id)s
       AND entity IS NOT NULL AND (lower(entity) = lower(%(entity)s) OR entity_id = %(entity_id)s::bigint)
       AND lower(property) = lower(%(property)s)
       AND withdrawn_at IS NULL AND valid_until IS DISTINCT FROM valid_from
       AND lower(regexp_replace(btrim(value), '\s+', ' ', 'g')) <> lower(regexp_replace(btrim(%(value)s), '\s+', ' ', 'g'))
)
(SELECT * FROM other_values
  WHERE valid_from <= %(valid_from)s AND (valid_until IS NULL OR valid_until > %(valid_from)s)
  ORDER BY id)
UNION ALL
(SELECT * FROM other_values WHERE valid_from > %(valid_from)s ORDER BY valid_from, id LIMIT 1)

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
