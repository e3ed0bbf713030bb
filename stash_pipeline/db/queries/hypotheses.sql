-- Hypotheses and their evidence log (stash_pipeline.memory.hypotheses).

-- hypothesis_insert --
-- A new hypothesis; status starts at 'proposed'.
INSERT INTO hypotheses (namespace_id, content, verification_plan, confidence, method)
VALUES (%(namespace_id)s, %(content)s, %(verification_plan)s, %(confidence)s, %(method)s)
RETURNING id

-- hypothesis_get --
-- One hypothesis (deleted ones included; the caller decides) with namespace and sources.
SELECT h.*, n.slug AS namespace,
       ARRAY(SELECT l.parent_id FROM lineage l
             WHERE l.child_kind = 'hypothesis' AND l.child_id = h.id AND l.parent_kind = 'fact'
             ORDER BY l.parent_id) AS source_fact_ids
FROM hypotheses h JOIN namespaces n ON n.id = h.namespace_id
WHERE h.id = %(id)s

-- hypothesis_lock --
-- Lock one hypothesis row before a state change.
SELECT id FROM hypotheses WHERE id = %(id)s FOR UPDATE

-- hypothesis_list --
-- Non-deleted hypotheses in the given namespaces, most recently changed first.
SELECT h.*, n.slug AS namespace,
       ARRAY(SELECT l.parent_id FROM lineage l
             WHERE l.child_kind = 'hypothesis' AND l.child_id = h.id AND l.parent_kind = 'fact'
             ORDER BY l.parent_id) AS source_fact_ids
FROM hypotheses h JOIN namespaces n ON n.id = h.namespace_id
WHERE h.namespace_id = ANY(%(ns_ids)s)
  AND h.deleted_at IS NULL
  AND (%(status)s::text IS NULL OR h.status = %(status)s::text)
ORDER BY h.updated_at DESC, h.id DESC
LIMIT %(limit)s OFFSET %(offset)s

-- hypothesis_evidence_for --
-- The evidence log of one hypothesis, oldest first.
SELECT * FROM hypothesis_evidence WHERE hypothesis_id = %(hypothesis_id)s ORDER BY id

-- hypothesis_set_testing --
-- proposed -> testing.
UPDATE hypotheses SET status = 'testing', tested_at = now(), updated_at = now()
WHERE id = %(id)s

-- hypothesis_refine --
-- testing -> proposed, with any new content, plan or confidence.
UPDATE hypotheses
   SET status = 'proposed',
       content = COALESCE(%(content)s, content),
       verification_plan = COALESCE(%(verification_plan)s, verification_plan),
       confidence = COALESCE(%(confidence)s, confidence),
       updated_at = now()
 WHERE id = %(id)s

-- hypothesis_set_confirmed --
-- testing -> confirmed, pointing at the fact the confirmation created.
UPDATE hypotheses
   SET status = 'confirmed', confirmed_at = now(), confirmed_fact_id = %(fact_id)s, updated_at = now()
 WHERE id = %(id)s

-- hypothesis_set_rejected --
-- proposed/testing -> rejected.
UPDATE hypotheses
   SET status = 'rejected', rejected_at = now(), rejection_reason = %(reason)s, updated_at = now()
 WHERE id = %(id)s

-- hypothesis_set_confidence --
-- New confidence from evidence (consolidation), status unchanged.
UPDATE hypotheses SET confidence = %(confidence)s, updated_at = now() WHERE id = %(id)s

-- hypothesis_soft_delete --
-- Soft-delete one hypothesis.
UPDATE hypotheses SET deleted_at = now(), updated_at = now() WHERE id = %(id)s AND deleted_at IS NULL

-- hypothesis_insert_evidence --
-- One verdict on a hypothesis; a second verdict on the same (hypothesis, fact) is ignored.
INSERT INTO hypothesis_evidence (hypothesis_id, fact_id, namespace_id, verdict, confidence,
                                 new_confidence, reasoning, action)
VALUES (%(hypothesis_id)s, %(fact_id)s, %(namespace_id)s, %(verdict)s, %(confidence)s,
        %(new_confidence)s, %(reasoning)s, %(action)s)
ON CONFLICT (hypothesis_id, fact_id) DO NOTHING
RETURNING *
