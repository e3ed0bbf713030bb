-- Relationships, causal-links and patterns stages.

-- stage_relationship_insert --
-- One extracted relationship (idempotent on the dedup index); no row when it exists live.
-- A withdrawn one (a rebuild withdrew it) is brought back when the stage derives it again.
-- Event time: the source fact's interval.
INSERT INTO relationships (namespace_id, from_entity, relation_type, to_entity, confidence, source_fact_id,
                           valid_from, valid_until)
SELECT %(namespace_id)s, %(from_entity)s, %(relation_type)s, %(to_entity)s, %(confidence)s, f.id,
       f.valid_from, f.valid_until
  FROM facts f WHERE f.id = %(fact_id)s
ON CONFLICT (namespace_id, lower(from_entity), relation_type, lower(to_entity), source_fact_id)
   DO UPDATE SET withdrawn_at = NULL, retired_at = NULL, confidence = EXCLUDED.confidence
   WHERE relationships.withdrawn_at IS NOT NULL
RETURNING id

-- stage_causal_insert --
-- One extracted fact→fact causal link with the model's rationale (idempotent; no row when
-- it exists live). A withdrawn one (a rebuild withdrew it) is brought back when derived again.
-- Event time: from when both facts held (the later valid_from), open-ended.
INSERT INTO causal_links (namespace_id, cause_fact_id, effect_fact_id, confidence, method, rationale, valid_from)
SELECT %(namespace_id)s, cause.id, effect.id, %(confidence)s, 'extracted', %(rationale)s,
       GREATEST(cause.valid_from, effect.valid_from)
  FROM facts cause, facts effect WHERE cause.id = %(cause_id)s AND effect.id = %(effect_id)s
ON CONFLICT (cause_fact_id, COALESCE(effect_fact_id, 0), COALESCE(effect_failure_id, 0))
   WHERE deleted_at IS NULL
   DO UPDATE SET withdrawn_at = NULL, retired_at = NULL, confidence = EXCLUDED.confidence,
                 rationale = EXCLUDED.rationale
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
