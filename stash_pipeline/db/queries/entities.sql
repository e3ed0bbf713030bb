-- Entities and their aliases (stash_pipeline.memory.entities, stash_pipeline.stages.
-- entity_resolution): alias lookup, creation, links from facts and relationship ends,
-- merge and split, and the reads of get_entity.

-- entity_alias_lookup --
-- The entities the given normalised names are aliases of in one namespace.
SELECT a.normalised, a.entity_id
  FROM entity_aliases a
 WHERE a.namespace_id = %(namespace_id)s AND a.normalised = ANY(%(normalised)s::text[])

-- entity_alias_word_matches --
-- Aliases of one namespace that have the given word as their first or last word, or are
-- the first or last word of the given name (the candidates of the token-subset rule).
SELECT a.entity_id, a.normalised
  FROM entity_aliases a
 WHERE a.namespace_id = %(namespace_id)s
   AND (a.normalised = ANY(%(words)s::text[])
        OR split_part(a.normalised, ' ', 1) = ANY(%(words)s::text[])
        OR reverse(split_part(reverse(a.normalised), ' ', 1)) = ANY(%(words)s::text[]))

-- entity_nearest --
-- The live entities of one namespace whose name embeddings are nearest to the given vector.
SELECT e.id, e.name, 1 - (e.embedding <=> %(embedding)s) AS similarity,
       ARRAY(SELECT a.alias FROM entity_aliases a WHERE a.entity_id = e.id ORDER BY a.created_at, a.alias
             LIMIT 8) AS aliases
  FROM entities e
 WHERE e.namespace_id = %(namespace_id)s AND e.merged_into IS NULL AND e.embedding IS NOT NULL
 ORDER BY e.embedding <=> %(embedding)s
 LIMIT %(limit)s

-- entity_create --
-- A new entity of one namespace, named as first written.
INSERT INTO entities (namespace_id, name, kind, normalised, embedding, embedding_model)
VALUES (%(namespace_id)s, %(name)s, %(kind)s, %(normalised)s, %(embedding)s, %(embedding_model)s)
RETURNING id

-- entity_alias_add --
-- Record a spelling as an alias of an entity; no row when the namespace already has it.
INSERT INTO entity_aliases (entity_id, namespace_id, alias, normalised)
VALUES (%(entity_id)s, %(namespace_id)s, %(alias)s, %(normalised)s)
ON CONFLICT (namespace_id, normalised) DO NOTHING
RETURNING entity_id

-- entity_delete_unused --
-- Drop an entity created in this transaction that lost the race for its first alias.
DELETE FROM entities e
 WHERE e.id = %(id)s
   AND NOT EXISTS (SELECT 1 FROM entity_aliases a WHERE a.entity_id = e.id)

-- entity_link_fact --
-- Point one fact at its entity.
UPDATE facts SET entity_id = %(entity_id)s WHERE id = %(id)s

-- entity_link_relationship --
-- Point one relationship's two ends at their entities.
UPDATE relationships SET from_entity_id = %(from_entity_id)s, to_entity_id = %(to_entity_id)s
 WHERE id = %(id)s

-- entity_get --
-- One entity (any state, no vector) with its namespace.
SELECT e.id, e.namespace_id, n.slug AS namespace, e.name, e.kind, e.normalised, e.merged_into,
       e.created_at, e.updated_at
  FROM entities e JOIN namespaces n ON n.id = e.namespace_id
 WHERE e.id = %(id)s

-- entity_lock --
-- Lock entities for a correction; returns them (no vectors).
SELECT e.id, e.namespace_id, e.name, e.kind, e.normalised, e.merged_into, e.embedding IS NOT NULL AS embedded
  FROM entities e
 WHERE e.id = ANY(%(ids)s::bigint[])
 ORDER BY e.id
   FOR UPDATE

-- entity_find_by_alias --
-- The entities a normalised name is an alias of, in the given namespaces (all when all_namespaces).
SELECT a.entity_id, n.slug AS namespace
  FROM entity_aliases a JOIN namespaces n ON n.id = a.namespace_id
 WHERE a.normalised = %(normalised)s AND (%(all_namespaces)s OR a.namespace_id = ANY(%(ns_ids)s::bigint[]))
 ORDER BY n.slug

-- entity_aliases_of --
-- The aliases of one entity, first recorded first (a page of them).
SELECT alias, normalised, created_at FROM entity_aliases
 WHERE entity_id = %(id)s AND (%(all_namespaces)s OR namespace_id = ANY(%(ns_ids)s::bigint[]))
 ORDER BY created_at, normalised
 LIMIT %(limit)s OFFSET %(offset)s

-- entity_merged_from --
-- Entities merged into one entity (a page of them).
SELECT id, name FROM entities
 WHERE merged_into = %(id)s AND (%(all_namespaces)s OR namespace_id = ANY(%(ns_ids)s::bigint[]))
 ORDER BY id LIMIT %(limit)s OFFSET %(offset)s

-- entity_facts --
-- Every fact of one entity that was not withdrawn (current and superseded), by valid_from.
-- With as_of or known_at (the other defaulting to now): the facts recorded by known_at and
-- not withdrawn by then, each with the interval end and replacement Stash believed then
-- (fact_valid_until, fact_superseded_by: query_facts' rule); current = visible at as_of
-- as known at known_at (fact_visible, migrations 0012 and 0013).
-- Every get_entity section reads only rows in the caller's namespaces (ns_ids; all when
-- all_namespaces): the entity's own tree may hold a parent's or a sibling's rows about it.
SELECT f.id, f.content, f.entity, f.property, f.value, f.confidence, f.origin, f.valid_from,
       fact_valid_until(f, %(known_at)s::timestamptz) AS valid_until,
       fact_superseded_by(f, %(known_at)s::timestamptz) AS superseded_by, f.created_at,
       fact_visible(f, %(as_of)s::timestamptz, %(known_at)s::timestamptz, false) AS current
  FROM facts f
 WHERE f.entity_id = %(id)s
   AND (%(all_namespaces)s OR f.namespace_id = ANY(%(ns_ids)s::bigint[]))
   AND f.recorded_at <= COALESCE(%(known_at)s::timestamptz, now())
   AND (f.withdrawn_at IS NULL OR f.withdrawn_at > COALESCE(%(known_at)s::timestamptz, now()))
 ORDER BY f.valid_from, f.id
 LIMIT %(limit)s OFFSET %(offset)s

-- entity_relationships --
-- Live relationships with the entity at either end. With as_of or known_at: those
-- graph_query_relationships returns for the same times (recorded by known_at, not
-- withdrawn by then: relationship_live, source fact visible at as_of as known at
-- known_at: fact_visible). In the caller's namespaces: the relationship, its source fact
-- and the entities at both ends.
SELECT r.id, r.from_entity, r.from_entity_id, r.relation_type, r.to_entity, r.to_entity_id, r.confidence,
       r.source_fact_id, r.created_at
  FROM relationships r JOIN facts f ON f.id = r.source_fact_id
 WHERE (r.from_entity_id = %(id)s OR r.to_entity_id = %(id)s)
   AND (%(all_namespaces)s
        OR r.namespace_id = ANY(%(ns_ids)s::bigint[]) AND f.namespace_id = ANY(%(ns_ids)s::bigint[])
           AND NOT EXISTS (SELECT 1 FROM entities o
                            WHERE o.id IN (r.from_entity_id, r.to_entity_id)
                              AND NOT o.namespace_id = ANY(%(ns_ids)s::bigint[])))
   AND relationship_live(r, %(known_at)s::timestamptz)
   AND (%(as_of)s::timestamptz IS NULL AND %(known_at)s::timestamptz IS NULL
        OR r.recorded_at <= COALESCE(%(known_at)s::timestamptz, now())
           AND fact_visible(f, %(as_of)s::timestamptz, %(known_at)s::timestamptz, false))
 ORDER BY r.id
 LIMIT %(limit)s OFFSET %(offset)s

-- entity_causal_links --
-- Live causal links whose cause or effect is a (not withdrawn) fact of the entity. With
-- as_of or known_at: those graph_list_causal_links returns for the same times
-- (causal_link_visible, migration 0013). The links are found from the entity's facts,
-- one index lookup per end (a UNION: an OR of the two ends would read every link).
-- In the caller's namespaces: the link and both its ends (a link in /a from an /a/b fact
-- to an /a fact is no link of the /a/b entity for an /a/b token).
WITH own AS (
    SELECT f.id FROM facts f
     WHERE f.entity_id = %(id)s
       AND (f.withdrawn_at IS NULL OR f.withdrawn_at > COALESCE(%(known_at)s::timestamptz, now()))
       AND (%(all_namespaces)s OR f.namespace_id = ANY(%(ns_ids)s::bigint[]))
)
SELECT c.id, c.cause_fact_id, c.effect_fact_id, c.effect_failure_id, c.confidence, c.method, c.rationale,
       c.created_at
  FROM causal_links c
 WHERE c.id IN (SELECT l.id FROM own JOIN causal_links l ON l.cause_fact_id = own.id WHERE l.deleted_at IS NULL
                UNION
                SELECT l.id FROM own JOIN causal_links l ON l.effect_fact_id = own.id WHERE l.deleted_at IS NULL)
   AND c.deleted_at IS NULL
   AND (%(all_namespaces)s
        OR c.namespace_id = ANY(%(ns_ids)s::bigint[])
           AND NOT EXISTS (SELECT 1 FROM facts x WHERE x.id IN (c.cause_fact_id, c.effect_fact_id)
                                                  AND NOT x.namespace_id = ANY(%(ns_ids)s::bigint[]))
           AND NOT EXISTS (SELECT 1 FROM failures x WHERE x.id = c.effect_failure_id
                                                      AND NOT x.namespace_id = ANY(%(ns_ids)s::bigint[])))
   AND (c.withdrawn_at IS NULL OR c.withdrawn_at > COALESCE(%(known_at)s::timestamptz, now()))
   AND causal_link_visible(c, %(as_of)s::timestamptz, %(known_at)s::timestamptz, true)
 ORDER BY c.id
 LIMIT %(limit)s OFFSET %(offset)s

-- entity_corrections_of --
-- The merges and splits an entity took part in, oldest first (a page of them).
SELECT id, action, entity_id, other_entity_id, moved, reason, created_at
  FROM entity_corrections
 WHERE (entity_id = %(id)s OR other_entity_id = %(id)s)
   AND (%(all_namespaces)s OR namespace_id = ANY(%(ns_ids)s::bigint[]))
 ORDER BY id
 LIMIT %(limit)s OFFSET %(offset)s

-- entity_merges_into --
-- Merges into one entity whose merged entity is still merged into it, newest first.
SELECT c.id, c.other_entity_id, c.moved
  FROM entity_corrections c JOIN entities e ON e.id = c.other_entity_id
 WHERE c.action = 'merge' AND c.entity_id = %(id)s AND e.merged_into = %(id)s
 ORDER BY c.id DESC

-- entity_move_aliases --
-- Move aliases of one entity (all, or those with the given normalised forms) to another.
UPDATE entity_aliases SET entity_id = %(target)s
 WHERE entity_id = %(source)s AND (%(normalised)s::text[] IS NULL OR normalised = ANY(%(normalised)s::text[]))
RETURNING alias, normalised

-- entity_move_facts --
-- Point facts of one entity (all, or the given ids) at another.
UPDATE facts SET entity_id = %(target)s
 WHERE entity_id = %(source)s AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
RETURNING id

-- entity_move_relationship_ends --
-- Point relationship ends at one entity (all, or of the given relationship ids) at another.
WITH moved_from AS (
    UPDATE relationships SET from_entity_id = %(target)s
     WHERE from_entity_id = %(source)s AND (%(from_ids)s::bigint[] IS NULL OR id = ANY(%(from_ids)s::bigint[]))
    RETURNING id
), moved_to AS (
    UPDATE relationships SET to_entity_id = %(target)s
     WHERE to_entity_id = %(source)s AND (%(to_ids)s::bigint[] IS NULL OR id = ANY(%(to_ids)s::bigint[]))
    RETURNING id
)
SELECT (SELECT count(*) FROM moved_from) AS from_ends, (SELECT count(*) FROM moved_to) AS to_ends

-- entity_fact_names --
-- The facts of one entity with the name each was written with.
SELECT id, entity FROM facts WHERE entity_id = %(id)s

-- entity_relationship_names --
-- The relationships with an end at one entity, with the names both ends were written with.
SELECT id, from_entity, from_entity_id, to_entity, to_entity_id
  FROM relationships WHERE from_entity_id = %(id)s OR to_entity_id = %(id)s

-- entity_set_merged_into --
-- Mark an entity merged into another (or, with NULL, a live entity again).
UPDATE entities SET merged_into = %(into)s, updated_at = now() WHERE id = %(id)s

-- entity_repoint_merged --
-- Entities once merged into one entity now count as merged into another (chains stay one step).
UPDATE entities SET merged_into = %(target)s, updated_at = now() WHERE merged_into = %(source)s RETURNING id

-- entity_correction_add --
-- Record one merge or split.
INSERT INTO entity_corrections (namespace_id, action, entity_id, other_entity_id, moved, reason)
VALUES (%(namespace_id)s, %(action)s, %(entity_id)s, %(other_entity_id)s, %(moved)s, %(reason)s)
RETURNING id, created_at

-- entity_purge_roots --
-- What purging an entity erases: the entity, those merged into it, the facts about them
-- and the relationships with either end at them (each with what was derived from it).
WITH members AS (
    SELECT id FROM entities WHERE id = %(id)s OR merged_into = %(id)s
)
SELECT 'entity' AS kind, id FROM members
UNION ALL
SELECT 'fact', f.id FROM facts f WHERE f.entity_id IN (SELECT id FROM members)
UNION ALL
SELECT 'relationship', r.id FROM relationships r
 WHERE r.from_entity_id IN (SELECT id FROM members) OR r.to_entity_id IN (SELECT id FROM members)

-- entity_purge --
-- Delete entities (their aliases and requests go by foreign key) with the corrections that
-- name them; returns every name they had, whose cached vectors go too.
WITH corrections AS (
    DELETE FROM entity_corrections WHERE entity_id = ANY(%(ids)s::bigint[]) OR other_entity_id = ANY(%(ids)s::bigint[])
), names AS (
    SELECT normalised AS text FROM entity_aliases WHERE entity_id = ANY(%(ids)s::bigint[])
), gone AS (
    DELETE FROM entities WHERE id = ANY(%(ids)s::bigint[]) RETURNING normalised AS text
)
SELECT text FROM names UNION SELECT text FROM gone
