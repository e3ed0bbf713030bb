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
