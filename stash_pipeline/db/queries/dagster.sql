-- Queries of the Dagster layer (stash_pipeline/defs): partition discovery and checks.

-- dagster_namespaces_after --
-- One snapshot for the discovery sensor: namespaces created after its cursor (highest id
-- seen), oldest first and capped, plus the total count (a drop reveals deletions).
SELECT (SELECT count(*) FROM namespaces) AS total,
       COALESCE((SELECT json_agg(json_build_object('id', s.id, 'slug', s.slug) ORDER BY s.id)
                 FROM (SELECT id, slug FROM namespaces WHERE id > %(after_id)s
                       ORDER BY id LIMIT %(limit)s) s), '[]'::json) AS new

-- dagster_namespace_slugs --
-- Every namespace slug; listed only when the counts say a namespace was deleted.
SELECT slug FROM namespaces ORDER BY slug

-- dagster_lineage_orphans --
-- Derived rows of one namespace that have no lineage parent, per kind (0 = complete).
-- Asserted facts and causal links are written by the agent, not derived, so they are
-- exempt; every other fact, relationship, pattern and extracted causal link must have one.
SELECT
  (SELECT count(*) FROM facts f
    WHERE f.namespace_id = n.id AND f.origin IN ('synthesis', 'failure_pattern', 'profile')
      AND NOT EXISTS (SELECT 1 FROM lineage l WHERE l.child_kind = 'fact' AND l.child_id = f.id))
    AS fact,
  (SELECT count(*) FROM relationships r
    WHERE r.namespace_id = n.id
      AND NOT EXISTS (SELECT 1 FROM lineage l WHERE l.child_kind = 'relationship' AND l.child_id = r.id))
    AS relationship,
  (SELECT count(*) FROM patterns p
    WHERE p.namespace_id = n.id
      AND NOT EXISTS (SELECT 1 FROM lineage l WHERE l.child_kind = 'pattern' AND l.child_id = p.id))
    AS pattern,
  (SELECT count(*) FROM causal_links c
    WHERE c.namespace_id = n.id AND c.method = 'extracted' AND c.deleted_at IS NULL
      AND NOT EXISTS (SELECT 1 FROM lineage l WHERE l.child_kind = 'causal_link' AND l.child_id = c.id))
    AS causal_link
FROM namespaces n
WHERE n.slug = %(slug)s
