-- Relationships, causal-links and patterns stages.

-- stage_relationship_insert --
-- One extracted relationship (idempotent on the dedup index); no row when it exists live.
-- A withdrawn one (a rebuild withdrew it) is brought back when the stage derives it again.
INSERT INTO relationships (namespace_id, from_entity, relation_type, to_entity, confidence, source_fact_id)
VALUES (%(namespace_id)s, %(from_entity)s, %(relation_type)s, %(to_entity)s, %(confidence)s, %(fact_id)s)
ON CONFLICT (namespace_id, lower(from_entity), relation_type, lower(to_entity), source_fact_id)
   DO UPDATE SET withdrawn_at = NULL, confidence = EXCLUDED.confidence WHERE relationships.withdrawn_at IS NOT NULL
RETURNING id

-- stage_causal_insert --
-- One extracted fact→fact causal link with the model's rationale (idempotent; no row when
-- it exists live). A withdrawn one (a rebuild withdrew it) is brought back when derived again.
INSERT INTO causal_links (namespace_id, cause_fact_id, effect_fact_id, confidence, method, rationale)
VALUES (%(namespace_id)s, %(cause_id)s, %(effect_id)s, %(confidence)s, 'extracted', %(rationale)s)
ON CONFLICT (cause_fact_id, COALESCE(effect_fact_id, 0), COALESCE(effect_failure_id, 0))
   WHERE deleted_at IS NULL
   DO UPDATE SET withdrawn_at = NULL, confidence = EXCLUDED.confidence, rationale = EXCLUDED.rationale
   WHERE causal_links.withdrawn_at IS NOT NULL
RETURNING id

-- stage_pattern_relationships --
-- Live relationships extracted from the given facts (pattern input).
SELECT id, from_entity, relation_type, to_entity, confidence, source_fact_id
  FROM relationships
 WHERE namespace_id = %(namespace_id)s AND source_fact_id = ANY(%(fact_ids)s::bigint[])
   AND withdrawn_at IS NULL
 ORDER BY id
 LIMIT 100

-- stage_pattern_insert --
-- One pattern (unique content per namespace among live patterns); no row when it exists.
INSERT INTO patterns (namespace_id, content, confidence, coherence, rationale)
VALUES (%(namespace_id)s, %(content)s, %(confidence)s, %(coherence)s, %(rationale)s)
ON CONFLICT (namespace_id, md5(content)) WHERE withdrawn_at IS NULL DO NOTHING
RETURNING id
