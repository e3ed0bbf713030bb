-- lineage_add --
-- Record the parents of one derived row (same transaction as the row); duplicates ignored.
INSERT INTO lineage (child_kind, child_id, parent_kind, parent_id, namespace_id)
SELECT %(child_kind)s, %(child_id)s, p.kind, p.id, %(namespace_id)s
FROM unnest(%(parent_kinds)s::text[], %(parent_ids)s::bigint[]) AS p(kind, id)
ON CONFLICT DO NOTHING

-- lineage_lock_parents --
-- The parents of one table ({table}) a derived row is about to name, locked until its
-- transaction ends so a purge waits for it (and then erases the row too); a parent a
-- purge already erased is missing from the answer.
SELECT id FROM {table} WHERE id = ANY(%(ids)s::bigint[]) ORDER BY id FOR KEY SHARE

-- lineage_parents_of --
-- The parents of one row, oldest edge first: those in the namespaces ns_ids (every one when
-- all_namespaces), each parent's namespace read from its own row (a row gone, or of a kind
-- not listed, is in none: a scoped caller is not told of it).
SELECT l.parent_kind AS kind, l.parent_id AS id
FROM lineage l
WHERE l.child_kind = %(kind)s AND l.child_id = %(id)s
  AND (%(all_namespaces)s OR (CASE l.parent_kind
           WHEN 'episode' THEN (SELECT x.namespace_id FROM episodes x WHERE x.id = l.parent_id)
           WHEN 'failure' THEN (SELECT x.namespace_id FROM failures x WHERE x.id = l.parent_id)
           WHEN 'entity' THEN (SELECT x.namespace_id FROM entities x WHERE x.id = l.parent_id)
           WHEN 'entity_correction' THEN (SELECT x.namespace_id FROM entity_corrections x WHERE x.id = l.parent_id)
           WHEN 'fact' THEN (SELECT x.namespace_id FROM facts x WHERE x.id = l.parent_id)
           WHEN 'relationship' THEN (SELECT x.namespace_id FROM relationships x WHERE x.id = l.parent_id)
           WHEN 'causal_link' THEN (SELECT x.namespace_id FROM causal_links x WHERE x.id = l.parent_id)
           WHEN 'pattern' THEN (SELECT x.namespace_id FROM patterns x WHERE x.id = l.parent_id)
           WHEN 'contradiction' THEN (SELECT x.namespace_id FROM contradictions x WHERE x.id = l.parent_id)
           WHEN 'hypothesis' THEN (SELECT x.namespace_id FROM hypotheses x WHERE x.id = l.parent_id)
           WHEN 'hypothesis_evidence' THEN (SELECT x.namespace_id FROM hypothesis_evidence x WHERE x.id = l.parent_id)
           WHEN 'goal_note' THEN (SELECT x.namespace_id FROM goal_notes x WHERE x.id = l.parent_id)
       END) = ANY(%(ns_ids)s::bigint[]))
ORDER BY l.parent_kind, l.parent_id

-- lineage_children_of --
-- The rows derived from one row: those in the namespaces ns_ids (every one when
-- all_namespaces), each child's namespace read from its own row, as lineage_parents_of.
SELECT l.child_kind AS kind, l.child_id AS id
FROM lineage l
WHERE l.parent_kind = %(kind)s AND l.parent_id = %(id)s
  AND (%(all_namespaces)s OR (CASE l.child_kind
           WHEN 'episode' THEN (SELECT x.namespace_id FROM episodes x WHERE x.id = l.child_id)
           WHEN 'failure' THEN (SELECT x.namespace_id FROM failures x WHERE x.id = l.child_id)
           WHEN 'entity' THEN (SELECT x.namespace_id FROM entities x WHERE x.id = l.child_id)
           WHEN 'entity_correction' THEN (SELECT x.namespace_id FROM entity_corrections x WHERE x.id = l.child_id)
           WHEN 'fact' THEN (SELECT x.namespace_id FROM facts x WHERE x.id = l.child_id)
           WHEN 'relationship' THEN (SELECT x.namespace_id FROM relationships x WHERE x.id = l.child_id)
           WHEN 'causal_link' THEN (SELECT x.namespace_id FROM causal_links x WHERE x.id = l.child_id)
           WHEN 'pattern' THEN (SELECT x.namespace_id FROM patterns x WHERE x.id = l.child_id)
           WHEN 'contradiction' THEN (SELECT x.namespace_id FROM contradictions x WHERE x.id = l.child_id)
           WHEN 'hypothesis' THEN (SELECT x.namespace_id FROM hypotheses x WHERE x.id = l.child_id)
           WHEN 'hypothesis_evidence' THEN (SELECT x.namespace_id FROM hypothesis_evidence x WHERE x.id = l.child_id)
           WHEN 'goal_note' THEN (SELECT x.namespace_id FROM goal_notes x WHERE x.id = l.child_id)
       END) = ANY(%(ns_ids)s::bigint[]))
ORDER BY l.child_kind, l.child_id

-- lineage_cascade_children --
-- One withdrawal round: the not-yet-withdrawn derived rows with a parent in the frontier,
-- and whether each still has a living parent. Roots count as dead even while their row
-- still exists (purge runs the cascade before the DELETE). A profile fact lists its
-- members as current, so it lives only while every parent does.
WITH frontier AS (
    SELECT DISTINCT kind, id FROM unnest(%(kinds)s::text[], %(ids)s::bigint[]) AS f(kind, id)
),
roots AS (
    SELECT DISTINCT kind, id FROM unnest(%(root_kinds)s::text[], %(root_ids)s::bigint[]) AS r(kind, id)
),
children AS (
    SELECT DISTINCT l.child_kind AS kind, l.child_id AS id
    FROM lineage l
    JOIN frontier f ON f.kind = l.parent_kind AND f.id = l.parent_id
    WHERE l.child_kind IN ('fact', 'relationship', 'causal_link', 'pattern')
)
SELECT c.kind, c.id,
       (SELECT CASE WHEN c.kind = 'fact' AND EXISTS (SELECT 1 FROM facts pf WHERE pf.id = c.id
                                                                        AND pf.origin = 'profile')
                    THEN bool_and(alive) ELSE bool_or(alive) END
          FROM lineage p
          CROSS JOIN LATERAL (SELECT
             NOT EXISTS (SELECT 1 FROM roots r WHERE r.kind = p.parent_kind AND r.id = p.parent_id)
             AND CASE p.parent_kind
                 WHEN 'episode' THEN EXISTS (SELECT 1 FROM episodes e
                                             WHERE e.id = p.parent_id AND e.deleted_at IS NULL)
                 WHEN 'fact' THEN EXISTS (SELECT 1 FROM facts x
                                          WHERE x.id = p.parent_id AND x.withdrawn_at IS NULL)
                 WHEN 'relationship' THEN EXISTS (SELECT 1 FROM relationships x
                                                  WHERE x.id = p.parent_id AND x.withdrawn_at IS NULL)
                 WHEN 'causal_link' THEN EXISTS (SELECT 1 FROM causal_links x
                                                 WHERE x.id = p.parent_id AND x.withdrawn_at IS NULL
                                                   AND x.deleted_at IS NULL)
                 WHEN 'pattern' THEN EXISTS (SELECT 1 FROM patterns x
                                             WHERE x.id = p.parent_id AND x.withdrawn_at IS NULL)
                 WHEN 'failure' THEN EXISTS (SELECT 1 FROM failures x
                                             WHERE x.id = p.parent_id AND x.deleted_at IS NULL)
                 WHEN 'hypothesis' THEN EXISTS (SELECT 1 FROM hypotheses x
                                                WHERE x.id = p.parent_id AND x.deleted_at IS NULL)
                 WHEN 'goal_note' THEN EXISTS (SELECT 1 FROM goal_notes x WHERE x.id = p.parent_id)
                 WHEN 'contradiction' THEN EXISTS (SELECT 1 FROM contradictions x WHERE x.id = p.parent_id)
                 WHEN 'hypothesis_evidence' THEN EXISTS (SELECT 1 FROM hypothesis_evidence x
                                                         WHERE x.id = p.parent_id)
                 ELSE false
             END AS alive) a
         WHERE p.child_kind = c.kind AND p.child_id = c.id) IS TRUE AS has_live_parent
FROM children c

-- lineage_withdraw_facts --
-- Withdraw facts (those not withdrawn yet); returns the ids actually changed.
UPDATE facts
   SET withdrawn_at = now(), withdrawn_reason = %(reason)s, updated_at = now(),
       retired_at = COALESCE(retired_at, now())
 WHERE id = ANY(%(ids)s) AND withdrawn_at IS NULL
RETURNING id, namespace_id

-- lineage_mark_recheck --
-- Flag current facts that lost some (not all) of their sources.
UPDATE facts
   SET needs_recheck = true, updated_at = now()
 WHERE id = ANY(%(ids)s) AND withdrawn_at IS NULL AND NOT needs_recheck
RETURNING id, namespace_id

-- lineage_withdraw_relationships --
-- Withdraw relationships named by lineage or whose source fact is gone/withdrawn.
UPDATE relationships
   SET withdrawn_at = now(), retired_at = COALESCE(retired_at, now())
 WHERE withdrawn_at IS NULL
   AND (id = ANY(%(ids)s) OR source_fact_id = ANY(%(fact_ids)s))
RETURNING id, namespace_id

-- lineage_withdraw_causal_links --
-- Withdraw causal links named by lineage or whose cause/effect fact is gone/withdrawn.
UPDATE causal_links
   SET withdrawn_at = now(), retired_at = COALESCE(retired_at, now())
 WHERE withdrawn_at IS NULL AND deleted_at IS NULL
   AND (id = ANY(%(ids)s) OR cause_fact_id = ANY(%(fact_ids)s) OR effect_fact_id = ANY(%(fact_ids)s))
RETURNING id, namespace_id

-- lineage_withdraw_patterns --
-- Withdraw patterns whose every source is gone.
UPDATE patterns
   SET withdrawn_at = now(), updated_at = now()
 WHERE id = ANY(%(ids)s) AND withdrawn_at IS NULL
RETURNING id, namespace_id
