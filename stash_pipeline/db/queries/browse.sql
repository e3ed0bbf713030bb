-- Reads for people looking at memory (the console, stash_serve/console): a namespace's
-- overview. Each takes the caller's trees as %(all_namespaces)s / %(ids)s
-- (memory.scope.read_scope).

-- browse_namespaces --
-- The namespaces of the trees with what a person looks at first: live episodes, current
-- facts, entities not merged away, dead letters still open (pending or dead), and the
-- time of the newest live episode or fact (ids grow with time). Each reads a namespace index.
SELECT n.id, n.slug, n.name, n.description,
       (SELECT count(*) FROM episodes e WHERE e.namespace_id = n.id AND e.deleted_at IS NULL) AS episodes,
       (SELECT count(*) FROM facts f WHERE f.namespace_id = n.id AND fact_visible(f, NULL, NULL, false)) AS facts,
       (SELECT count(*) FROM entities x WHERE x.namespace_id = n.id AND x.merged_into IS NULL) AS entities,
       (SELECT count(*) FROM dead_letters d WHERE d.namespace_id = n.id AND d.status IN ('pending', 'dead'))
           AS dead_letters,
       GREATEST((SELECT e.created_at FROM episodes e WHERE e.namespace_id = n.id AND e.deleted_at IS NULL
                 ORDER BY e.id DESC LIMIT 1),
                (SELECT f.created_at FROM facts f WHERE f.namespace_id = n.id ORDER BY f.id DESC LIMIT 1))
           AS last_activity
FROM namespaces n
WHERE %(all_namespaces)s OR n.id = ANY(%(ids)s::bigint[])
ORDER BY n.slug
LIMIT %(limit)s
