-- Named queries of bench/console_paint.py: what the fill adds to recall_latency's, and the
-- records the by-id pages open.

-- console_paint_lineage --
-- grouping_latency's lineage (fact n of the namespace rests on its episodes 4n-1 and
-- 4n), written as an equality join so that it is a hash join, not 20,000 x 80,000 tests.
INSERT INTO lineage (child_kind, child_id, parent_kind, parent_id, namespace_id)
SELECT 'fact', f.id, 'episode', e.id, f.namespace_id
FROM (SELECT id, namespace_id, row_number() OVER (ORDER BY id) AS n FROM facts
      WHERE namespace_id = %(namespace_id)s) f
CROSS JOIN (VALUES (0), (1)) AS back(k)
JOIN (SELECT id, row_number() OVER (ORDER BY id) AS n FROM episodes WHERE namespace_id = %(namespace_id)s) e
  ON e.n = 4 * f.n - back.k
ON CONFLICT DO NOTHING

-- console_paint_properties --
-- The fill's facts get their entity's name, one of five properties and a value (the COPY
-- leaves them empty), so the fact, entity and timeline pages have properties to show.
UPDATE facts f
SET entity = e.name,
    property = (ARRAY['owner', 'status', 'schedule', 'region', 'version'])[1 + (f.id %% 5)::int],
    value = 'value ' || f.id
FROM entities e
WHERE f.entity_id = e.id AND f.namespace_id = %(namespace_id)s AND f.entity IS NULL

-- console_paint_hub_off --
-- The hub's facts are a fill, not a move: no profile is retired or asked for.
ALTER TABLE facts DISABLE TRIGGER facts_entity_moved

-- console_paint_hub_on --
ALTER TABLE facts ENABLE TRIGGER facts_entity_moved

-- console_paint_hub --
-- One entity many facts are about (every 20th fact of the fill: 1,000 at 100,000
-- memories), as the person a store's agent works for is: its name on them, and 200
-- properties with about five statements each (the k-th of its facts: property k mod 200).
UPDATE facts f
SET entity_id = h.id, entity = h.name,
    property = (ARRAY['owner', 'status', 'schedule', 'region', 'version'])[1 + ((f.id / 20) %% 5)::int]
               || ' ' || ((f.id / 100) %% 40)
FROM (SELECT id, name FROM entities WHERE namespace_id = %(namespace_id)s ORDER BY id LIMIT 1) h
WHERE f.namespace_id = %(namespace_id)s AND f.id %% 20 = 0 AND f.entity_id IS DISTINCT FROM h.id

-- console_paint_targets --
-- What the by-id pages open: the hub, its fact in the middle of its facts, and that fact's
-- first source episode (the facts derived from it are what an erasure previews).
SELECT f.entity_id AS entity, f.id AS fact, min(l.parent_id) AS episode
FROM facts f
JOIN lineage l ON l.child_kind = 'fact' AND l.child_id = f.id AND l.parent_kind = 'episode'
WHERE f.entity_id = (SELECT id FROM entities WHERE namespace_id = %(namespace_id)s ORDER BY id LIMIT 1)
GROUP BY f.entity_id, f.id
ORDER BY f.id
OFFSET (SELECT count(*) / 2 FROM facts WHERE entity_id = (SELECT id FROM entities
        WHERE namespace_id = %(namespace_id)s ORDER BY id LIMIT 1))
LIMIT 1

-- console_paint_word --
-- The search box's hard case: the commonest word of the namespace found in at most
-- a given number of memories (not the "[episodes n]" suffix every filled row carries): a
-- lexeme of five letters or more that is its own stem and is written as such in one of the
-- namespace's first 3,000 episodes (the fill cycles through its texts sooner than that).
SELECT s.lexeme AS word, s.documents
FROM (SELECT lexeme, documents, namespace_id FROM recall_term_stats
      WHERE namespace_id = %(namespace_id)s AND documents <= %(most)s AND lexeme ~ '^[a-z]{5,}$'
      ORDER BY documents DESC, lexeme
      OFFSET 0) s  -- commonest first; the checks below stop at the first that passes
WHERE tsvector_to_array(stash_lexemes(s.lexeme)) = ARRAY[s.lexeme]
  AND EXISTS (SELECT 1 FROM (SELECT content FROM episodes WHERE namespace_id = s.namespace_id
                              ORDER BY id LIMIT 3000) e
              WHERE e.content ~* ('\m' || s.lexeme || '\M'))
LIMIT 1

-- console_paint_counts --
-- What the store holds, for the results.
SELECT (SELECT count(*) FROM episodes) AS episodes,
       (SELECT count(*) FROM facts) AS facts,
       (SELECT count(*) FROM entities) AS entities,
       (SELECT count(*) FROM relationships) AS relationships,
       (SELECT count(*) FROM lineage) AS lineage,
       (SELECT count(*) FROM namespaces) AS namespaces,
       (SELECT count(*) FROM facts WHERE entity_id = %(hub)s) AS hub_facts
