-- Relationships, patterns and causal links (stash_pipeline.memory.graph), plus the batch fact
-- lookup the typed-knowledge modules share (single facts: fact_get in facts.sql).

-- knowledge_facts_by_ids --
-- Several facts (any state) with namespace and "current" flag, for id validation.
SELECT f.id, f.namespace_id, n.slug AS namespace, f.withdrawn_at,
       (f.withdrawn_at IS NULL AND f.valid_from <= now()
        AND (f.valid_until IS NULL OR f.valid_until > now())) AS current
FROM facts f JOIN namespaces n ON n.id = f.namespace_id
WHERE f.id = ANY(%(ids)s)
ORDER BY f.id

-- graph_query_relationships --
-- Relationships in the given namespaces; entity matches either end, case-insensitively.
-- With neither as_of nor known_at: every state (withdrawn ones when asked). With either
-- (the other defaulting to now): the relationships recorded by known_at, not withdrawn
-- by then (relationship_live, migration 0016: one withdrawn and derived again was gone in
-- between), whose source fact was visible at as_of as Stash knew it at known_at (the
-- query_facts rule, fact_visible of migration 0012: a relationship holds over its source
-- fact's interval here, not over its own as in recall's relationship_visible).
SELECT r.*, n.slug AS namespace
FROM relationships r JOIN namespaces n ON n.id = r.namespace_id
JOIN facts f ON f.id = r.source_fact_id
WHERE r.namespace_id = ANY(%(ns_ids)s)
  AND (%(entity)s::text IS NULL
       OR lower(r.from_entity) = lower(%(entity)s::text)
       OR lower(r.to_entity) = lower(%(entity)s::text))
  AND (%(relation_type)s::text IS NULL OR r.relation_type = %(relation_type)s::text)
  AND CASE WHEN %(as_of)s::timestamptz IS NULL AND %(known_at)s::timestamptz IS NULL
           THEN (%(include_withdrawn)s OR r.withdrawn_at IS NULL)
           ELSE r.recorded_at <= COALESCE(%(known_at)s::timestamptz, now())
                AND relationship_live(r, %(known_at)s::timestamptz)
                AND fact_visible(f, %(as_of)s::timestamptz, %(known_at)s::timestamptz, false)
      END
ORDER BY r.id
LIMIT %(limit)s OFFSET %(offset)s

-- graph_query_patterns --
-- Patterns in the given namespaces with the fact and relationship ids they cite (lineage).
SELECT p.*, n.slug AS namespace,
       ARRAY(SELECT l.parent_id FROM lineage l
             WHERE l.child_kind = 'pattern' AND l.child_id = p.id AND l.parent_kind = 'fact'
             ORDER BY l.parent_id) AS source_fact_ids,
       ARRAY(SELECT l.parent_id FROM lineage l
             WHERE l.child_kind = 'pattern' AND l.child_id = p.id AND l.parent_kind = 'relationship'
             ORDER BY l.parent_id) AS source_relationship_ids
FROM patterns p JOIN namespaces n ON n.id = p.namespace_id
WHERE p.namespace_id = ANY(%(ns_ids)s)
  AND (%(include_withdrawn)s OR p.withdrawn_at IS NULL)
ORDER BY p.id
LIMIT %(limit)s OFFSET %(offset)s

-- graph_get_failure --
-- One failure (any state) with its namespace slug, to validate a causal effect.
SELECT fl.id, fl.namespace_id, n.slug AS namespace, fl.content, fl.deleted_at
FROM failures fl JOIN namespaces n ON n.id = fl.namespace_id
WHERE fl.id = %(id)s

-- graph_insert_causal_link --
-- A caller-asserted causal link; a live duplicate makes this return no row. Event time:
-- from when both ends held (the later of the facts' valid_from, the failure's creation).
INSERT INTO causal_links (namespace_id, cause_fact_id, effect_fact_id, effect_failure_id,
                          confidence, method, rationale, valid_from)
SELECT %(namespace_id)s, %(cause_fact_id)s, %(effect_fact_id)s, %(effect_failure_id)s,
       %(confidence)s, 'asserted', %(rationale)s,
       GREATEST((SELECT f.valid_from FROM facts f WHERE f.id = %(cause_fact_id)s),
                (SELECT f.valid_from FROM facts f WHERE f.id = %(effect_fact_id)s),
                (SELECT fl.created_at FROM failures fl WHERE fl.id = %(effect_failure_id)s))
ON CONFLICT (cause_fact_id, COALESCE(effect_fact_id, 0), COALESCE(effect_failure_id, 0))
   WHERE deleted_at IS NULL
DO NOTHING
RETURNING id

-- graph_get_causal_link --
-- One causal link (deleted ones included; the caller decides) with its namespace slug.
SELECT c.*, n.slug AS namespace
FROM causal_links c JOIN namespaces n ON n.id = c.namespace_id
WHERE c.id = %(id)s

-- graph_list_causal_links --
-- Non-deleted causal links in the given namespaces, oldest first. With neither as_of nor
-- known_at: every state (withdrawn ones when asked). With either (the other defaulting
-- to now): the links visible at as_of as Stash knew it at known_at (causal_link_visible,
-- migration 0013: recorded by known_at, not withdrawn by then, holding at as_of).
SELECT c.*, n.slug AS namespace
FROM causal_links c JOIN namespaces n ON n.id = c.namespace_id
WHERE c.namespace_id = ANY(%(ns_ids)s)
  AND c.deleted_at IS NULL
  AND CASE WHEN %(as_of)s::timestamptz IS NULL AND %(known_at)s::timestamptz IS NULL
           THEN (%(include_withdrawn)s OR c.withdrawn_at IS NULL)
           ELSE causal_link_visible(c, %(as_of)s::timestamptz, %(known_at)s::timestamptz, false)
      END
ORDER BY c.id
LIMIT %(limit)s OFFSET %(offset)s

-- graph_delete_causal_link --
-- Soft-delete one causal link.
UPDATE causal_links SET deleted_at = now() WHERE id = %(id)s AND deleted_at IS NULL

-- graph_trace_forward --
-- Causal chain from a fact following cause -> effect. Only links live at known_at (now
-- by default) whose own, cause and effect namespaces are all inside the scope are
-- walked, and with as_of or known_at only those visible at as_of as known at known_at
-- (causal_link_visible, as graph_list_causal_links); `path` holds the facts
-- visited on the branch so a cycle is reported once (its closing edge) and never
-- expanded; depth is capped. Each link is reported once, at its shallowest depth.
-- `links` is not materialized: inlined into both steps, each step reads the links of the
-- facts it reached by index, instead of every link and fact of the scope first.
WITH RECURSIVE links AS NOT MATERIALIZED (
    SELECT c.id, c.cause_fact_id, c.effect_fact_id, c.effect_failure_id, c.confidence,
           cf.content AS cause, COALESCE(ef.content, fl.content) AS effect
    FROM causal_links c
    JOIN facts cf ON cf.id = c.cause_fact_id AND cf.namespace_id = ANY(%(ns_ids)s)
    LEFT JOIN facts ef ON ef.id = c.effect_fact_id
    LEFT JOIN failures fl ON fl.id = c.effect_failure_id AND fl.deleted_at IS NULL
    WHERE c.deleted_at IS NULL
      AND (c.withdrawn_at IS NULL OR c.withdrawn_at > COALESCE(%(known_at)s::timestamptz, now()))
      AND c.namespace_id = ANY(%(ns_ids)s)
      AND (ef.namespace_id = ANY(%(ns_ids)s) OR fl.namespace_id = ANY(%(ns_ids)s))
      AND causal_link_visible(c, %(as_of)s::timestamptz, %(known_at)s::timestamptz, true)
), chain AS (
    SELECT l.id AS link_id, 1 AS depth, l.cause_fact_id, l.effect_fact_id, l.effect_failure_id,
           l.confidence, l.cause, l.effect, ARRAY[l.cause_fact_id] AS path,
           COALESCE(l.effect_fact_id = l.cause_fact_id, false) AS closes_cycle
    FROM links l
    WHERE l.cause_fact_id = %(fact_id)s
  UNION ALL
    SELECT l.id, ch.depth + 1, l.cause_fact_id, l.effect_fact_id, l.effect_failure_id,
           l.confidence, l.cause, l.effect, ch.path || l.cause_fact_id,
           COALESCE(l.effect_fact_id = ANY(ch.path || l.cause_fact_id), false)
    FROM chain ch
    JOIN links l ON l.cause_fact_id = ch.effect_fact_id
    WHERE NOT ch.closes_cycle AND ch.depth < %(max_depth)s
)
SELECT link_id, depth, cause_fact_id, cause, effect_fact_id, effect_failure_id, effect, confidence
FROM (SELECT DISTINCT ON (link_id) * FROM chain ORDER BY link_id, depth) AS edges
ORDER BY depth, link_id

-- graph_trace_backward --
-- Causal chain into a fact following effect -> cause (fact edges only: a failure is
-- never a cause). Same scope, time, cycle and depth rules as graph_trace_forward, and
-- `links` is not materialized for the same reason.
WITH RECURSIVE links AS NOT MATERIALIZED (
    SELECT c.id, c.cause_fact_id, c.effect_fact_id, c.effect_failure_id, c.confidence,
           cf.content AS cause, ef.content AS effect
    FROM causal_links c
    JOIN facts cf ON cf.id = c.cause_fact_id AND cf.namespace_id = ANY(%(ns_ids)s)
    JOIN facts ef ON ef.id = c.effect_fact_id AND ef.namespace_id = ANY(%(ns_ids)s)
    WHERE c.deleted_at IS NULL
      AND (c.withdrawn_at IS NULL OR c.withdrawn_at > COALESCE(%(known_at)s::timestamptz, now()))
      AND c.namespace_id = ANY(%(ns_ids)s)
      AND causal_link_visible(c, %(as_of)s::timestamptz, %(known_at)s::timestamptz, true)
), chain AS (
    SELECT l.id AS link_id, 1 AS depth, l.cause_fact_id, l.effect_fact_id, l.effect_failure_id,
           l.confidence, l.cause, l.effect, ARRAY[l.effect_fact_id] AS path,
           (l.cause_fact_id = l.effect_fact_id) AS closes_cycle
    FROM links l
    WHERE l.effect_fact_id = %(fact_id)s
  UNION ALL
    SELECT l.id, ch.depth + 1, l.cause_fact_id, l.effect_fact_id, l.effect_failure_id,
           l.confidence, l.cause, l.effect, ch.path || l.effect_fact_id,
           (l.cause_fact_id = ANY(ch.path || l.effect_fact_id))
    FROM chain ch
    JOIN links l ON l.effect_fact_id = ch.cause_fact_id
    WHERE NOT ch.closes_cycle AND ch.depth < %(max_depth)s
)
SELECT link_id, depth, cause_fact_id, cause, effect_fact_id, effect_failure_id, effect, confidence
FROM (SELECT DISTINCT ON (link_id) * FROM chain ORDER BY link_id, depth) AS edges
ORDER BY depth, link_id
