-- Reads for people looking at entities (the console, stash_serve/console): the entities of
-- some trees, the graph around one entity, and what a merge or split would move. Each
-- takes the caller's trees as %(all_namespaces)s / %(ns_ids)s (memory.scope.read_scope).

-- neighbourhood_entities --
-- A page of the live entities (not merged away) of the trees, by normalised name, those
-- with an alias containing %(q)s (normalised; NULL: all). The page is cut first, then each
-- row's current facts are counted (facts_entity_id_idx) and its first aliases read.
WITH page AS (
    SELECT e.id, e.namespace_id, e.name, e.kind, e.normalised
      FROM entities e
     WHERE e.merged_into IS NULL
       AND (%(all_namespaces)s OR e.namespace_id = ANY(%(ns_ids)s::bigint[]))
       AND (%(q)s::text IS NULL
            OR EXISTS (SELECT 1 FROM entity_aliases a
                        WHERE a.entity_id = e.id AND strpos(a.normalised, %(q)s::text) > 0))
     ORDER BY e.normalised, e.id
     LIMIT %(limit)s OFFSET %(offset)s
)
SELECT p.id, n.slug AS namespace, p.name, p.kind,
       (SELECT count(*) FROM facts f
         WHERE f.entity_id = p.id AND fact_visible(f, NULL, NULL, false)) AS facts,
       ARRAY(SELECT a.alias FROM entity_aliases a WHERE a.entity_id = p.id
              ORDER BY a.created_at, a.normalised LIMIT 8) AS aliases
  FROM page p JOIN namespaces n ON n.id = p.namespace_id
 ORDER BY p.normalised, p.id

-- neighbourhood_edges --
-- Live relationships (not withdrawn) with an end at one of %(ids)s, both ends pointing at
-- entities, newest first: the relationship, its source fact and both end entities in the
-- trees (get_entity's rule). One index probe per end and id (a UNION, as for causal links).
SELECT r.id, r.from_entity_id AS from_id, r.to_entity_id AS to_id, r.relation_type, r.confidence
  FROM relationships r JOIN facts f ON f.id = r.source_fact_id
 WHERE r.id IN (SELECT x.id FROM relationships x WHERE x.from_entity_id = ANY(%(ids)s::bigint[])
                UNION
                SELECT x.id FROM relationships x WHERE x.to_entity_id = ANY(%(ids)s::bigint[]))
   AND r.from_entity_id IS NOT NULL AND r.to_entity_id IS NOT NULL
   AND relationship_live(r, NULL)
   AND (%(all_namespaces)s
        OR r.namespace_id = ANY(%(ns_ids)s::bigint[]) AND f.namespace_id = ANY(%(ns_ids)s::bigint[])
           AND NOT EXISTS (SELECT 1 FROM entities o
                            WHERE o.id IN (r.from_entity_id, r.to_entity_id)
                              AND NOT o.namespace_id = ANY(%(ns_ids)s::bigint[])))
 ORDER BY r.id DESC
 LIMIT %(limit)s

-- neighbourhood_nodes --
-- The entities with the given ids, with their namespaces.
SELECT e.id, n.slug AS namespace, e.name, e.kind
  FROM entities e JOIN namespaces n ON n.id = e.namespace_id
 WHERE e.id = ANY(%(ids)s::bigint[])

-- neighbourhood_merge_counts --
-- What merging entity %(id)s into another moves besides its aliases: its facts and the
-- relationship ends pointing at it.
SELECT (SELECT count(*) FROM facts f WHERE f.entity_id = %(id)s) AS facts,
       (SELECT count(*) FROM relationships r WHERE r.from_entity_id = %(id)s)
       + (SELECT count(*) FROM relationships r WHERE r.to_entity_id = %(id)s) AS relationship_ends
