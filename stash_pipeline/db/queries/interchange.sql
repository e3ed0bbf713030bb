-- interchange_export_tree --
-- Every row of a namespace tree as (type, JSON row) without vectors, in an order that
-- lets an import resolve references (parents before children; facts' superseded_by later).
SELECT type, row FROM (
    SELECT 0 AS ord, 'namespace' AS type, to_jsonb(t) AS row, t.slug AS sort_text, 0::bigint AS sort_id
      FROM namespaces t WHERE t.id = ANY(%(ids)s)
    UNION ALL
    SELECT 1, 'episode', to_jsonb(t) - 'embedding' - 'search', '', t.id FROM episodes t WHERE t.namespace_id = ANY(%(ids)s)
    UNION ALL
    SELECT 2, 'goal', to_jsonb(t), '', t.id FROM goals t WHERE t.namespace_id = ANY(%(ids)s)
    UNION ALL
    SELECT 3, 'failure', to_jsonb(t), '', t.id FROM failures t WHERE t.namespace_id = ANY(%(ids)s)
    UNION ALL
    SELECT 4, 'entity', to_jsonb(t) - 'embedding', '', t.id FROM entities t WHERE t.namespace_id = ANY(%(ids)s)
    UNION ALL
    SELECT 5, 'entity_alias', to_jsonb(t), t.normalised, t.entity_id FROM entity_aliases t
     WHERE t.namespace_id = ANY(%(ids)s)
    UNION ALL
    SELECT 6, 'entity_correction', to_jsonb(t), '', t.id FROM entity_corrections t WHERE t.namespace_id = ANY(%(ids)s)
    UNION ALL
    SELECT 7, 'fact', to_jsonb(t) - 'embedding' - 'search', '', t.id FROM facts t WHERE t.namespace_id = ANY(%(ids)s)
    UNION ALL
    SELECT 8, 'relationship', to_jsonb(t), '', t.id FROM relationships t WHERE t.namespace_id = ANY(%(ids)s)
    UNION ALL
    SELECT 9, 'causal_link', to_jsonb(t), '', t.id FROM causal_links t WHERE t.namespace_id = ANY(%(ids)s)
    UNION ALL
    SELECT 10, 'pattern', to_jsonb(t), '', t.id FROM patterns t WHERE t.namespace_id = ANY(%(ids)s)
    UNION ALL
    SELECT 11, 'contradiction', to_jsonb(t), '', t.id FROM contradictions t WHERE t.namespace_id = ANY(%(ids)s)
    UNION ALL
    SELECT 12, 'hypothesis', to_jsonb(t), '', t.id FROM hypotheses t WHERE t.namespace_id = ANY(%(ids)s)
    UNION ALL
    SELECT 13, 'hypothesis_evidence', to_jsonb(t), '', t.id FROM hypothesis_evidence t
     WHERE t.namespace_id = ANY(%(ids)s)
    UNION ALL
    SELECT 14, 'goal_note', to_jsonb(t), '', t.id FROM goal_notes t WHERE t.namespace_id = ANY(%(ids)s)
    UNION ALL
    SELECT 15, 'context', to_jsonb(t), '', t.namespace_id FROM contexts t WHERE t.namespace_id = ANY(%(ids)s)
    UNION ALL
    SELECT 16, 'lineage', to_jsonb(t), t.child_kind || '/' || t.parent_kind, t.child_id FROM lineage t
     WHERE t.namespace_id = ANY(%(ids)s)
) x
ORDER BY ord, sort_text, sort_id

-- interchange_import_namespace --
-- Create (or find) a namespace of an imported tree; existing ones keep their name.
WITH ins AS (
    INSERT INTO namespaces (slug, name, description, created_at, updated_at)
    SELECT %(slug)s, r.name, r.description, r.created_at, r.updated_at
    FROM jsonb_populate_record(NULL::namespaces, %(row)s) r
    ON CONFLICT (slug) DO NOTHING
    RETURNING id
)
SELECT id FROM ins UNION ALL SELECT id FROM namespaces WHERE slug = %(slug)s AND NOT EXISTS (SELECT 1 FROM ins)

-- interchange_import_episode --
-- Insert one imported episode (fresh id, vector re-embedded by the importer).
INSERT INTO episodes (namespace_id, content, kind, metadata, idempotency_key, embedding, embedding_model,
                      occurred_at, created_at, deleted_at, deleted_reason)
SELECT r.namespace_id, r.content, r.kind, r.metadata, r.idempotency_key, %(embedding)s, %(embedding_model)s,
       r.occurred_at, r.created_at, r.deleted_at, r.deleted_reason
FROM jsonb_populate_record(NULL::episodes, %(row)s) r
RETURNING id

-- interchange_import_goal --
-- Insert one imported goal.
INSERT INTO goals (namespace_id, parent_id, content, status, priority, completed_at, abandoned_at,
                   created_at, updated_at, deleted_at)
SELECT r.namespace_id, r.parent_id, r.content, r.status, r.priority, r.completed_at, r.abandoned_at,
       r.created_at, r.updated_at, r.deleted_at
FROM jsonb_populate_record(NULL::goals, %(row)s) r
RETURNING id

-- interchange_import_failure --
-- Insert one imported failure.
INSERT INTO failures (namespace_id, goal_id, content, reason, lesson, created_at, deleted_at)
SELECT r.namespace_id, r.goal_id, r.content, r.reason, r.lesson, r.created_at, r.deleted_at
FROM jsonb_populate_record(NULL::failures, %(row)s) r
RETURNING id

-- interchange_import_fact --
-- Insert one imported fact (superseded_by is set afterwards, once every fact has its new id).
-- A file written before facts had system time gets it as the schema migration derived it:
-- recorded when created, retired when its interval was closed or it was withdrawn.
INSERT INTO facts (namespace_id, content, entity, property, value, confidence, origin, embedding, embedding_model,
                   valid_from, valid_until, withdrawn_at, withdrawn_reason, needs_recheck, reinforcements,
                   rationale, created_at, updated_at, recorded_at, retired_at, recorded_valid_until,
                   stated_valid_until)
SELECT r.namespace_id, r.content, r.entity, r.property, r.value, r.confidence, r.origin, %(embedding)s,
       %(embedding_model)s, r.valid_from, r.valid_until, r.withdrawn_at, r.withdrawn_reason, r.needs_recheck,
       r.reinforcements, r.rationale, r.created_at, r.updated_at, COALESCE(r.recorded_at, r.created_at),
       CASE WHEN %(row)s ? 'retired_at' THEN r.retired_at ELSE COALESCE(r.withdrawn_at, r.valid_until) END,
       r.recorded_valid_until, r.stated_valid_until
FROM jsonb_populate_record(NULL::facts, %(row)s) r
RETURNING id

-- interchange_set_superseded_by --
-- Point an imported fact at its (imported) replacement.
UPDATE facts SET superseded_by = %(superseded_by)s WHERE id = %(id)s

-- interchange_import_entity --
-- Insert one imported entity (merged_into is set afterwards, once every entity has its new id).
INSERT INTO entities (namespace_id, name, kind, normalised, embedding, embedding_model, created_at, updated_at)
SELECT r.namespace_id, r.name, r.kind, r.normalised, %(embedding)s, %(embedding_model)s, r.created_at, r.updated_at
FROM jsonb_populate_record(NULL::entities, %(row)s) r
RETURNING id

-- interchange_set_merged_into --
-- Point an imported merged entity at the (imported) entity it was merged into.
UPDATE entities SET merged_into = %(merged_into)s WHERE id = %(id)s

-- interchange_import_entity_alias --
-- Insert one imported alias (no row when the namespace already has that alias).
INSERT INTO entity_aliases (entity_id, namespace_id, alias, normalised, created_at)
SELECT r.entity_id, r.namespace_id, r.alias, r.normalised, r.created_at
FROM jsonb_populate_record(NULL::entity_aliases, %(row)s) r
ON CONFLICT (namespace_id, normalised) DO NOTHING
RETURNING entity_id

-- interchange_import_entity_correction --
-- Insert one imported merge or split record.
INSERT INTO entity_corrections (namespace_id, action, entity_id, other_entity_id, moved, reason, created_at)
SELECT r.namespace_id, r.action, r.entity_id, r.other_entity_id, r.moved, r.reason, r.created_at
FROM jsonb_populate_record(NULL::entity_corrections, %(row)s) r
RETURNING id

-- interchange_import_relationship --
-- Insert one imported relationship.
-- (event time from the source fact when the file has none)
INSERT INTO relationships (namespace_id, from_entity, relation_type, to_entity, confidence, source_fact_id,
                           withdrawn_at, created_at, valid_from, valid_until, recorded_at, retired_at)
SELECT r.namespace_id, r.from_entity, r.relation_type, r.to_entity, r.confidence, r.source_fact_id,
       r.withdrawn_at, r.created_at, COALESCE(r.valid_from, f.valid_from),
       CASE WHEN %(row)s ? 'valid_until' THEN r.valid_until ELSE f.valid_until END,
       COALESCE(r.recorded_at, r.created_at),
       CASE WHEN %(row)s ? 'retired_at' THEN r.retired_at ELSE r.withdrawn_at END
FROM jsonb_populate_record(NULL::relationships, %(row)s) r JOIN facts f ON f.id = r.source_fact_id
RETURNING id

-- interchange_import_causal_link --
-- Insert one imported causal link.
-- (event time from the cause fact when the file has none)
INSERT INTO causal_links (namespace_id, cause_fact_id, effect_fact_id, effect_failure_id, confidence, method,
                          rationale, withdrawn_at, created_at, deleted_at, valid_from, valid_until, recorded_at,
                          retired_at)
SELECT r.namespace_id, r.cause_fact_id, r.effect_fact_id, r.effect_failure_id, r.confidence, r.method,
       r.rationale, r.withdrawn_at, r.created_at, r.deleted_at, COALESCE(r.valid_from, f.valid_from), r.valid_until,
       COALESCE(r.recorded_at, r.created_at),
       CASE WHEN %(row)s ? 'retired_at' THEN r.retired_at ELSE r.withdrawn_at END
FROM jsonb_populate_record(NULL::causal_links, %(row)s) r JOIN facts f ON f.id = r.cause_fact_id
RETURNING id

-- interchange_import_pattern --
-- Insert one imported pattern.
INSERT INTO patterns (namespace_id, content, confidence, coherence, rationale, withdrawn_at, created_at, updated_at)
SELECT r.namespace_id, r.content, r.confidence, r.coherence, r.rationale, r.withdrawn_at, r.created_at, r.updated_at
FROM jsonb_populate_record(NULL::patterns, %(row)s) r
RETURNING id

-- interchange_import_contradiction --
-- Insert one imported contradiction.
INSERT INTO contradictions (namespace_id, old_fact_id, new_fact_id, entity, property, old_value, new_value,
                            classification, confidence, explanation, method, resolved, resolution,
                            resolution_note, resolved_at, created_at)
SELECT r.namespace_id, r.old_fact_id, r.new_fact_id, r.entity, r.property, r.old_value, r.new_value,
       r.classification, r.confidence, r.explanation, r.method, r.resolved, r.resolution, r.resolution_note,
       r.resolved_at, r.created_at
FROM jsonb_populate_record(NULL::contradictions, %(row)s) r
RETURNING id

-- interchange_import_hypothesis --
-- Insert one imported hypothesis.
INSERT INTO hypotheses (namespace_id, content, verification_plan, confidence, status, method, confirmed_fact_id,
                        rejection_reason, tested_at, confirmed_at, rejected_at, created_at, updated_at, deleted_at)
SELECT r.namespace_id, r.content, r.verification_plan, r.confidence, r.status, r.method, r.confirmed_fact_id,
       r.rejection_reason, r.tested_at, r.confirmed_at, r.rejected_at, r.created_at, r.updated_at, r.deleted_at
FROM jsonb_populate_record(NULL::hypotheses, %(row)s) r
RETURNING id

-- interchange_import_hypothesis_evidence --
-- Insert one imported hypothesis verdict.
INSERT INTO hypothesis_evidence (hypothesis_id, fact_id, namespace_id, verdict, confidence, new_confidence,
                                 reasoning, action, created_at)
SELECT r.hypothesis_id, r.fact_id, r.namespace_id, r.verdict, r.confidence, r.new_confidence, r.reasoning,
       r.action, r.created_at
FROM jsonb_populate_record(NULL::hypothesis_evidence, %(row)s) r
RETURNING id

-- interchange_import_goal_note --
-- Insert one imported goal note.
INSERT INTO goal_notes (goal_id, namespace_id, author, kind, content, confidence, fact_id, created_at)
SELECT r.goal_id, r.namespace_id, r.author, r.kind, r.content, r.confidence, r.fact_id, r.created_at
FROM jsonb_populate_record(NULL::goal_notes, %(row)s) r
RETURNING id

-- interchange_import_context --
-- Insert (or replace) one imported context focus.
INSERT INTO contexts (namespace_id, focus, expires_at, created_at, updated_at)
SELECT r.namespace_id, r.focus, r.expires_at, r.created_at, r.updated_at
FROM jsonb_populate_record(NULL::contexts, %(row)s) r
ON CONFLICT (namespace_id) DO UPDATE
   SET focus = EXCLUDED.focus, expires_at = EXCLUDED.expires_at, updated_at = EXCLUDED.updated_at
RETURNING namespace_id AS id

-- interchange_import_lineage --
-- Insert one imported lineage edge.
INSERT INTO lineage (child_kind, child_id, parent_kind, parent_id, namespace_id, created_at)
SELECT r.child_kind, r.child_id, r.parent_kind, r.parent_id, r.namespace_id, r.created_at
FROM jsonb_populate_record(NULL::lineage, %(row)s) r
ON CONFLICT DO NOTHING
RETURNING child_id AS id
