-- Erasure: what a purge deletes (stash_pipeline/memory/erasure.py). {table} and {text}
-- placeholders are table and column names from the table catalog, never values.

-- erasure_closure --
-- The roots and every row derived from them, transitively through lineage, in any
-- namespace: what purging the roots erases (UNION stops at rows already reached).
WITH RECURSIVE closure(kind, id) AS (
    SELECT kind, id FROM unnest(%(kinds)s::text[], %(ids)s::bigint[]) AS r(kind, id)
    UNION
    SELECT l.child_kind, l.child_id
      FROM lineage l
      JOIN closure c ON l.parent_kind = c.kind AND l.parent_id = c.id
)
SELECT kind, id FROM closure ORDER BY kind, id

-- erasure_tree_roots --
-- Rows of one table ({table}) in the namespaces %(ids)s that rows outside those namespaces
-- were derived from: where a tree's deletion must reach beyond the tree.
SELECT t.id
  FROM {table} t
 WHERE t.namespace_id = ANY(%(ids)s::bigint[])
   AND EXISTS (SELECT 1 FROM lineage l
                WHERE l.parent_kind = %(kind)s AND l.parent_id = t.id
                  AND l.namespace_id <> ALL(%(ids)s::bigint[]))

-- erasure_rows --
-- Rows of one table ({table}) about to be erased, with their namespace.
SELECT id, namespace_id FROM {table} WHERE id = ANY(%(ids)s::bigint[])

-- erasure_texts --
-- The embedded text ({text}) of rows of one table ({table}) about to be erased: their
-- cached vectors go with them.
SELECT {text} AS text FROM {table} WHERE id = ANY(%(ids)s::bigint[])

-- erasure_tree_texts --
-- The embedded text ({text}) of every row of one table ({table}) in the namespaces.
SELECT {text} AS text FROM {table} WHERE namespace_id = ANY(%(ids)s::bigint[])

-- erasure_retire_facts --
-- Retire the facts first, so what gathers them (a profile and its entity's request to be
-- gathered again, migration 0020) reacts as to any retirement; then they are deleted.
UPDATE facts
   SET withdrawn_at = now(), withdrawn_reason = 'erased', updated_at = now(),
       retired_at = COALESCE(retired_at, now())
 WHERE id = ANY(%(ids)s::bigint[]) AND withdrawn_at IS NULL

-- erasure_entities_of --
-- The entities the rows about to be erased name (facts, relationships' two ends).
SELECT entity_id AS id FROM facts WHERE id = ANY(%(fact_ids)s::bigint[]) AND entity_id IS NOT NULL
UNION
SELECT from_entity_id FROM relationships WHERE id = ANY(%(relationship_ids)s::bigint[]) AND from_entity_id IS NOT NULL
UNION
SELECT to_entity_id FROM relationships WHERE id = ANY(%(relationship_ids)s::bigint[]) AND to_entity_id IS NOT NULL

-- erasure_delete --
-- Delete rows of one table ({table}) by id (their end history goes by foreign key).
DELETE FROM {table} WHERE id = ANY(%(ids)s::bigint[])

-- erasure_forget_history --
-- The erased facts are no replacement in the end history other facts keep (those ends are
-- the other facts' own and stay), so a read as known before the purge names no erased id.
UPDATE fact_ends SET superseded_by = NULL WHERE superseded_by = ANY(%(ids)s::bigint[])

-- erasure_delete_edges --
-- Every lineage edge touching an erased row, as child or as parent.
DELETE FROM lineage l
 USING unnest(%(kinds)s::text[], %(ids)s::bigint[]) AS n(kind, id)
 WHERE (l.child_kind = n.kind AND l.child_id = n.id)
    OR (l.parent_kind = n.kind AND l.parent_id = n.id)

-- erasure_delete_dead_letters --
-- Dead letters of erased items (their last error may quote the item).
DELETE FROM dead_letters d
 USING unnest(%(kinds)s::text[], %(ids)s::bigint[]) AS n(kind, id)
 WHERE d.item_kind = n.kind AND d.item_id = n.id
RETURNING d.id, d.namespace_id

-- erasure_orphan_entities --
-- Of the entities named by erased rows, those nothing names any more (no fact, no
-- relationship end, no correction, no merge): a name left over from what was erased.
DELETE FROM entities e
 WHERE e.id = ANY(%(ids)s::bigint[])
   AND NOT EXISTS (SELECT 1 FROM facts f WHERE f.entity_id = e.id)
   AND NOT EXISTS (SELECT 1 FROM relationships r WHERE r.from_entity_id = e.id OR r.to_entity_id = e.id)
   AND NOT EXISTS (SELECT 1 FROM entity_corrections c WHERE c.entity_id = e.id OR c.other_entity_id = e.id)
   AND NOT EXISTS (SELECT 1 FROM entities m WHERE m.merged_into = e.id)
   AND e.merged_into IS NULL
RETURNING e.id, e.namespace_id, e.normalised AS text

-- erasure_forget_lexemes --
-- Full-text statistics of words no live row of the namespaces holds (the triggers leave
-- them at 0 documents): an erased text's words are not kept even as lexemes. Safe to drop:
-- a row that becomes live again inserts its lexemes anew.
DELETE FROM recall_term_stats WHERE namespace_id = ANY(%(ids)s::bigint[]) AND documents = 0

-- erasure_lock --
-- Lock rows of one table ({table}) against new children: a derived row's lineage takes
-- its parents FOR KEY SHARE (lineage_lock_parents), so none can be written under a row a
-- purge is erasing; in id order, as every locker takes them.
SELECT id FROM {table} WHERE id = ANY(%(ids)s::bigint[]) ORDER BY id FOR UPDATE

-- erasure_preview_rows --
-- Rows of one table ({table}) a purge would erase, with their namespace's path and the
-- columns ({columns}) a person recognises them by: what a purge's preview shows.
SELECT x.*, n.slug AS namespace
  FROM (SELECT id, namespace_id, {columns} FROM {table} WHERE id = ANY(%(ids)s::bigint[])) x
  JOIN namespaces n ON n.id = x.namespace_id
 ORDER BY x.id

-- erasure_preview_ids --
-- Rows of one table ({table}) without a text column: their ids and namespace's path.
SELECT t.id, n.slug AS namespace
  FROM {table} t JOIN namespaces n ON n.id = t.namespace_id
 WHERE t.id = ANY(%(ids)s::bigint[])
 ORDER BY t.id

-- erasure_preview_dependents --
-- Rows a foreign key deletes with the erased facts and entities although no lineage leads
-- to them (a relationship, causal link or contradiction on a fact; a correction naming an
-- entity): a preview names them too.
SELECT 'relationship' AS kind, id FROM relationships WHERE source_fact_id = ANY(%(fact_ids)s::bigint[])
UNION
SELECT 'causal_link', id FROM causal_links
 WHERE cause_fact_id = ANY(%(fact_ids)s::bigint[]) OR effect_fact_id = ANY(%(fact_ids)s::bigint[])
UNION
SELECT 'contradiction', id FROM contradictions
 WHERE old_fact_id = ANY(%(fact_ids)s::bigint[]) OR new_fact_id = ANY(%(fact_ids)s::bigint[])
UNION
SELECT 'entity_correction', id FROM entity_corrections
 WHERE entity_id = ANY(%(entity_ids)s::bigint[]) OR other_entity_id = ANY(%(entity_ids)s::bigint[])
