-- The timeline of single-valued (entity, property) keys, recomputed from their live
-- statements in one place (stash_pipeline.memory.timeline: the rule, in prose).

-- timeline_settle --
-- Recompute the timelines of the keys of the given facts (%(ids)s, in any state: a fact
-- just withdrawn names the key it left) from the key's live statements (not withdrawn,
-- not in %(gone)s: facts about to be purged), skipping
-- multi-valued properties (%(multi_valued)s: normalised names). A key is the namespace,
-- the property (case-insensitive) and the entity (the same name case-insensitive, or the
-- same resolved entity under another alias). Values are compared case- and
-- white-space-insensitively. For each live fact of those keys:
--   * rejected (given_valid_until at or before its start: a resolution rejected it): an
--     empty interval, unchanged;
--   * corrected (a later arrival with the same start and another value, itself not
--     rejected, and not in an open or keep_both contradiction with it): an empty interval,
--     superseded by the first such correction;
--   * otherwise a value: it ends at the earliest of its stated end, its given end (an
--     expiry) and the start of the first later value of the key (by valid_from, then
--     arrival) that is itself a value and not in an open or keep_both contradiction with
--     it; superseded_by names that value when it ends the fact and arrived after it (a late
--     statement ended by an earlier-known value is history and supersedes nothing).
-- A fact recorded in this transaction takes its end as first recorded; an older one whose
-- end changed is retired now (retired_at), unless it is back to its end as first
-- recorded, unreplaced.
-- Returns the facts whose interval or replacement changed.
WITH seed AS (
    SELECT DISTINCT namespace_id, lower(entity) AS entity, entity_id, lower(property) AS property
      FROM facts
     WHERE id = ANY(%(ids)s::bigint[]) AND entity IS NOT NULL AND property IS NOT NULL AND value IS NOT NULL
       AND lower(regexp_replace(btrim(property), '\s+', ' ', 'g')) <> ALL(%(multi_valued)s::text[])
), stmt AS MATERIALIZED (
    SELECT DISTINCT f.id, f.namespace_id, lower(f.entity) AS entity, f.entity_id, lower(f.property) AS property,
           lower(regexp_replace(btrim(f.value), '\s+', ' ', 'g')) AS v, f.valid_from, f.stated_valid_until,
           f.given_valid_until, COALESCE(f.given_valid_until <= f.valid_from, false) AS rejected
      FROM facts f
      JOIN seed s ON s.namespace_id = f.namespace_id AND s.property = lower(f.property)
                 AND (s.entity = lower(f.entity) OR s.entity_id = f.entity_id)
     WHERE f.withdrawn_at IS NULL AND f.value IS NOT NULL AND f.id <> ALL(%(gone)s::bigint[])
), pair AS MATERIALIZED (
    -- ordered pairs of facts of one key with different values, a and b, where b may end a:
    -- neither rejected, and no open or keep_both contradiction between them
    SELECT a.id AS a_id, b.id AS b_id, b.valid_from AS b_from, b.valid_from = a.valid_from AS same_start
      FROM stmt a
      JOIN stmt b ON b.namespace_id = a.namespace_id AND b.property = a.property
                 AND (b.entity = a.entity OR b.entity_id = a.entity_id)
                 AND b.v <> a.v AND b.id <> a.id
     WHERE NOT a.rejected AND NOT b.rejected
       AND (b.valid_from > a.valid_from OR (b.valid_from = a.valid_from AND b.id > a.id))
       AND NOT EXISTS (
           SELECT 1 FROM contradictions c
            WHERE ((c.old_fact_id = a.id AND c.new_fact_id = b.id) OR (c.old_fact_id = b.id AND c.new_fact_id = a.id))
              AND (NOT c.resolved OR c.resolution = 'keep_both'))
), corrected AS (
    SELECT a_id AS id, min(b_id) AS by_id FROM pair WHERE same_start GROUP BY a_id
), placed AS (
    SELECT s.id,
           CASE WHEN s.rejected OR c.id IS NOT NULL THEN s.valid_from
                ELSE LEAST(s.stated_valid_until, s.given_valid_until, nx.b_from) END AS new_end,
           c.by_id, nx.b_id AS next_id, nx.b_from AS next_from, s.rejected, s.given_valid_until
      FROM stmt s
      LEFT JOIN corrected c ON c.id = s.id
      LEFT JOIN LATERAL (
          -- the first later value: not itself corrected
          SELECT p.b_id, p.b_from FROM pair p
           WHERE p.a_id = s.id AND NOT p.same_start AND p.b_id NOT IN (SELECT id FROM corrected)
           ORDER BY p.b_from, p.b_id
           LIMIT 1) nx ON true
), decided AS (
    SELECT p.id, p.new_end,
           CASE WHEN p.rejected THEN f.superseded_by
                WHEN p.by_id IS NOT NULL THEN p.by_id
                WHEN p.next_from = p.new_end AND p.next_id > p.id THEN p.next_id
                WHEN p.given_valid_until = p.new_end THEN f.superseded_by END AS new_by
      FROM placed p JOIN facts f ON f.id = p.id
)
UPDATE facts f
   SET valid_until = d.new_end,
       superseded_by = d.new_by,
       recorded_valid_until = CASE WHEN f.recorded_at = now() THEN d.new_end ELSE f.recorded_valid_until END,
       retired_at = CASE WHEN f.recorded_at = now() OR f.valid_until IS NOT DISTINCT FROM d.new_end
                              THEN f.retired_at  -- new, or only its replacement changed
                         WHEN d.new_end IS NOT DISTINCT FROM f.recorded_valid_until AND d.new_by IS NULL THEN NULL
                         ELSE now() END,
       updated_at = now()
  FROM decided d
 WHERE d.id = f.id
   AND (f.valid_until IS DISTINCT FROM d.new_end OR f.superseded_by IS DISTINCT FROM d.new_by)
RETURNING f.id

-- timeline_reject --
-- A resolution rejected these facts in favour of %(kept_id)s: each is no value (an empty
-- interval, given_valid_until = its start), superseded by the kept fact; only a fact that
-- began no earlier than the kept one (a later start would otherwise end the kept value).
-- timeline_settle then gives back the time they took.
UPDATE facts f
   SET given_valid_until = f.valid_from, valid_until = f.valid_from, superseded_by = %(kept_id)s,
       retired_at = now(), updated_at = now()
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
(SELECT id, entity, property, value, content, valid_from, valid_until FROM facts
  WHERE namespace_id = %(namespace_id)s
    AND entity IS NOT NULL AND (lower(entity) = lower(%(entity)s) OR entity_id = %(entity_id)s::bigint)
    AND lower(property) = lower(%(property)s)
    AND withdrawn_at IS NULL AND valid_until IS DISTINCT FROM valid_from
    AND lower(regexp_replace(btrim(value), '\s+', ' ', 'g')) <> lower(regexp_replace(btrim(%(value)s), '\s+', ' ', 'g'))
    AND valid_from <= %(valid_from)s AND (valid_until IS NULL OR valid_until > %(valid_from)s)
  ORDER BY id)
UNION ALL
(SELECT id, entity, property, value, content, valid_from, valid_until FROM facts
  WHERE namespace_id = %(namespace_id)s
    AND entity IS NOT NULL AND (lower(entity) = lower(%(entity)s) OR entity_id = %(entity_id)s::bigint)
    AND lower(property) = lower(%(property)s)
    AND withdrawn_at IS NULL AND valid_until IS DISTINCT FROM valid_from
    AND lower(regexp_replace(btrim(value), '\s+', ' ', 'g')) <> lower(regexp_replace(btrim(%(value)s), '\s+', ' ', 'g'))
    AND valid_from > %(valid_from)s
  ORDER BY valid_from, id
  LIMIT 1)

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
