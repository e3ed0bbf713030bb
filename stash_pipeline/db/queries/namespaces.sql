-- get_namespace_by_slug --
-- One namespace by its exact slug.
SELECT * FROM namespaces WHERE slug = %(slug)s

-- resolve_namespace_tree --
-- A namespace and all its descendants ('/' matches everything). LIKE metacharacters
-- in the slug are escaped by the caller-independent replace chain.
SELECT id, slug FROM namespaces
WHERE %(slug)s = '/'
   OR slug = %(slug)s
   OR slug LIKE replace(replace(replace(%(slug)s, '\', '\\'), '%%', '\%%'), '_', '\_') || '/%%'
ORDER BY slug

-- upsert_namespace --
-- Create a namespace or update its name/description (mkdir -p creates ancestors first).
INSERT INTO namespaces (slug, name, description)
VALUES (%(slug)s, %(name)s, %(description)s)
ON CONFLICT (slug) DO UPDATE
   SET name = COALESCE(NULLIF(%(name_update)s, ''), namespaces.name),
       description = COALESCE(NULLIF(%(description_update)s, ''), namespaces.description),
       updated_at = CASE WHEN %(name_update)s <> '' OR %(description_update)s <> '' THEN now()
                         ELSE namespaces.updated_at END
RETURNING *, (xmax = 0) AS created

-- ensure_namespace --
-- Create an ancestor namespace if missing; never touches an existing one.
INSERT INTO namespaces (slug, name, description)
VALUES (%(slug)s, %(slug)s, '')
ON CONFLICT (slug) DO NOTHING

-- list_namespaces --
-- Namespaces in the given trees, ordered by slug.
SELECT n.*
FROM namespaces n
WHERE %(all)s
   OR n.slug = ANY(%(slugs)s)
   OR EXISTS (SELECT 1 FROM unnest(%(slugs)s::text[]) AS p(slug)
              WHERE n.slug LIKE replace(replace(replace(p.slug, '\', '\\'), '%%', '\%%'), '_', '\_') || '/%%')
ORDER BY n.slug
LIMIT %(limit)s OFFSET %(offset)s

-- namespace_counts --
-- Row counts of one namespace tree, shown before a cascading delete.
SELECT
  (SELECT count(*) FROM namespaces WHERE id = ANY(%(ids)s))                       AS namespaces,
  (SELECT count(*) FROM episodes WHERE namespace_id = ANY(%(ids)s) AND deleted_at IS NULL) AS episodes,
  (SELECT count(*) FROM facts WHERE namespace_id = ANY(%(ids)s))                  AS facts,
  (SELECT count(*) FROM relationships WHERE namespace_id = ANY(%(ids)s))          AS relationships,
  (SELECT count(*) FROM patterns WHERE namespace_id = ANY(%(ids)s))               AS patterns,
  (SELECT count(*) FROM hypotheses WHERE namespace_id = ANY(%(ids)s) AND deleted_at IS NULL) AS hypotheses,
  (SELECT count(*) FROM goals WHERE namespace_id = ANY(%(ids)s) AND deleted_at IS NULL)      AS goals,
  (SELECT count(*) FROM failures WHERE namespace_id = ANY(%(ids)s) AND deleted_at IS NULL)   AS failures

-- delete_namespaces --
-- Hard-delete namespaces (rows cascade); embedding cache entries are shared and kept.
DELETE FROM namespaces WHERE id = ANY(%(ids)s) AND slug <> '/'
