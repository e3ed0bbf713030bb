-- Reads for people looking at memory (the console, stash_serve/console): a namespace's
-- overview. Each takes the caller's trees as %(all_namespaces)s / %(ids)s
-- (memory.scope.read_scope).

-- browse_namespaces --
-- The namespaces of the trees with what a person looks at first: live episodes, current
-- facts, entities not merged away, dead letters still open (pending or dead), and the
-- time of the newest live episode or fact (ids grow with time). Each reads a namespace index.
-- The episodes are counted, and the newest rows found, by row comparisons that only the
-- (namespace_id, id) indexes serve: a range from (n, 0) to (n, max), and "namespace_id <= n
-- AND (namespace_id, id) <= (n, max)" ordered by both columns (the row found is n's, or a
-- namespace's before it: then n has none). Written "namespace_id = n", the plan made once
-- for every namespace read the whole episodes table for a count, and walked the primary
-- key backwards for the newest row: through the whole table for a namespace without rows.
SELECT n.id, n.slug, n.name, n.description,
       (SELECT count(*) FROM episodes e
        WHERE (e.namespace_id, e.id) >= (n.id, 0) AND (e.namespace_id, e.id) <= (n.id, 9223372036854775807)
          AND e.deleted_at IS NULL) AS episodes,
       (SELECT count(*) FROM facts f WHERE f.namespace_id = n.id AND fact_visible(f, NULL, NULL, false)) AS facts,
       (SELECT count(*) FROM entities x WHERE x.namespace_id = n.id AND x.merged_into IS NULL) AS entities,
       (SELECT count(*) FROM dead_letters d WHERE d.namespace_id = n.id AND d.status IN ('pending', 'dead'))
           AS dead_letters,
       GREATEST((SELECT CASE WHEN e.namespace_id = n.id THEN e.created_at END FROM episodes e
                 WHERE e.namespace_id <= n.id AND (e.namespace_id, e.id) <= (n.id, 9223372036854775807)
                   AND e.deleted_at IS NULL
                 ORDER BY e.namespace_id DESC, e.id DESC LIMIT 1),
                (SELECT CASE WHEN f.namespace_id = n.id THEN f.created_at END FROM facts f
                 WHERE f.namespace_id <= n.id AND (f.namespace_id, f.id) <= (n.id, 9223372036854775807)
                 ORDER BY f.namespace_id DESC, f.id DESC LIMIT 1))
           AS last_activity
FROM namespaces n
WHERE %(all_namespaces)s OR n.id = ANY(%(ids)s::bigint[])
ORDER BY n.slug
LIMIT %(limit)s

-- browse_episodes --
-- A page of the live episodes of the trees, newest first (ids grow with time), read by id
-- below %(before)s (keyset: the previous page's last id), each with how many rows were
-- derived from it inside the trees (lineage_parent_idx). Filters, each off when NULL: kind,
-- occurred_at in [since, until), and metadata containing one of the %(metadata)s objects.
SELECT e.id, n.slug AS namespace, e.content, e.kind, e.metadata, e.idempotency_key, e.occurred_at,
       e.created_at, e.deleted_at, e.deleted_reason,
       (SELECT count(*) FROM lineage l
        WHERE l.parent_kind = 'episode' AND l.parent_id = e.id
          AND (%(all_namespaces)s OR l.namespace_id = ANY(%(ids)s::bigint[]))) AS derived
FROM episodes e JOIN namespaces n ON n.id = e.namespace_id
WHERE (%(all_namespaces)s OR e.namespace_id = ANY(%(ids)s::bigint[]))
  AND e.deleted_at IS NULL
  AND (%(before)s::bigint IS NULL OR e.id < %(before)s::bigint)
  AND (%(kind)s::text IS NULL OR e.kind = %(kind)s::text)
  AND (%(since)s::timestamptz IS NULL OR e.occurred_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR e.occurred_at < %(until)s::timestamptz)
  AND (%(metadata)s::jsonb[] IS NULL OR e.metadata @> ANY(%(metadata)s::jsonb[]))
ORDER BY e.id DESC
LIMIT %(limit)s

-- browse_episodes_matching --
-- browse_episodes among the episodes holding every lexeme of %(words)s (stash_lexemes, as
-- recall makes them): the matches are found in the word index (episodes_search_gin) and
-- filtered there, the page is the newest of them, and only its rows are read again; so a
-- word few episodes hold costs an index probe, not a walk through the whole timeline.
-- Words that give no lexeme (stop words alone) match nothing.
WITH hits AS MATERIALIZED (
    SELECT e.id FROM episodes e
    WHERE e.search @@ (SELECT string_agg('''' || replace(replace(l, '\', '\\'), '''', '''''') || '''', ' & ')
                       FROM unnest(tsvector_to_array(stash_lexemes(%(words)s::text))) AS l)::tsquery
      AND (%(all_namespaces)s OR e.namespace_id = ANY(%(ids)s::bigint[]))
      AND e.deleted_at IS NULL
      AND (%(before)s::bigint IS NULL OR e.id < %(before)s::bigint)
      AND (%(kind)s::text IS NULL OR e.kind = %(kind)s::text)
      AND (%(since)s::timestamptz IS NULL OR e.occurred_at >= %(since)s::timestamptz)
      AND (%(until)s::timestamptz IS NULL OR e.occurred_at < %(until)s::timestamptz)
      AND (%(metadata)s::jsonb[] IS NULL OR e.metadata @> ANY(%(metadata)s::jsonb[]))
), page AS MATERIALIZED (
    SELECT id FROM hits ORDER BY id DESC LIMIT %(limit)s
)
SELECT e.id, n.slug AS namespace, e.content, e.kind, e.metadata, e.idempotency_key, e.occurred_at,
       e.created_at, e.deleted_at, e.deleted_reason,
       (SELECT count(*) FROM lineage l
        WHERE l.parent_kind = 'episode' AND l.parent_id = e.id
          AND (%(all_namespaces)s OR l.namespace_id = ANY(%(ids)s::bigint[]))) AS derived
FROM page p JOIN episodes e ON e.id = p.id JOIN namespaces n ON n.id = e.namespace_id
ORDER BY e.id DESC

-- browse_children --
-- The rows derived from one row (its lineage children), by kind and id, at most %(limit)s.
SELECT l.child_kind AS kind, l.child_id AS id
FROM lineage l
WHERE l.parent_kind = %(kind)s AND l.parent_id = %(id)s
ORDER BY l.child_kind, l.child_id
LIMIT %(limit)s

-- browse_records --
-- Rows named by kind and id (in the order given) as a person reads them: namespace, a text
-- (content; a relationship's triple; a contradiction's explanation...), a time and whether
-- it is gone (withdrawn, forgotten, merged away). Only rows inside the trees; each is one
-- primary-key lookup in its own table.
SELECT r.kind, r.id, d.namespace, d.text, d.at, d.gone
FROM unnest(%(kinds)s::text[], %(record_ids)s::bigint[]) WITH ORDINALITY AS r(kind, id, ord)
CROSS JOIN LATERAL (
    SELECT n.slug AS namespace, x.text, x.at, x.gone
    FROM (
        SELECT namespace_id, content AS text, occurred_at AS at, deleted_at IS NOT NULL AS gone
        FROM episodes WHERE r.kind = 'episode' AND id = r.id
        UNION ALL
        SELECT namespace_id, content, valid_from, withdrawn_at IS NOT NULL OR retired_at IS NOT NULL
        FROM facts WHERE r.kind = 'fact' AND id = r.id
        UNION ALL
        SELECT namespace_id, from_entity || ' ' || relation_type || ' ' || to_entity, created_at,
               withdrawn_at IS NOT NULL
        FROM relationships WHERE r.kind = 'relationship' AND id = r.id
        UNION ALL
        SELECT namespace_id, content, created_at, withdrawn_at IS NOT NULL
        FROM patterns WHERE r.kind = 'pattern' AND id = r.id
        UNION ALL
        SELECT namespace_id, explanation, created_at, resolved
        FROM contradictions WHERE r.kind = 'contradiction' AND id = r.id
        UNION ALL
        SELECT namespace_id, COALESCE(rationale, 'causal link'), created_at,
               withdrawn_at IS NOT NULL OR deleted_at IS NOT NULL
        FROM causal_links WHERE r.kind = 'causal_link' AND id = r.id
        UNION ALL
        SELECT namespace_id, content, created_at, deleted_at IS NOT NULL
        FROM hypotheses WHERE r.kind = 'hypothesis' AND id = r.id
        UNION ALL
        SELECT namespace_id, verdict || ': ' || reasoning, created_at, false
        FROM hypothesis_evidence WHERE r.kind = 'hypothesis_evidence' AND id = r.id
        UNION ALL
        SELECT namespace_id, content, created_at, false
        FROM goal_notes WHERE r.kind = 'goal_note' AND id = r.id
        UNION ALL
        SELECT namespace_id, content, created_at, deleted_at IS NOT NULL
        FROM failures WHERE r.kind = 'failure' AND id = r.id
        UNION ALL
        SELECT namespace_id, name, created_at, merged_into IS NOT NULL
        FROM entities WHERE r.kind = 'entity' AND id = r.id
        UNION ALL
        SELECT namespace_id, action || COALESCE(': ' || reason, ''), created_at, false
        FROM entity_corrections WHERE r.kind = 'entity_correction' AND id = r.id
    ) x JOIN namespaces n ON n.id = x.namespace_id
    WHERE %(all_namespaces)s OR x.namespace_id = ANY(%(ids)s::bigint[])
) d
ORDER BY r.ord

-- browse_fact_contradictions --
-- The contradictions one fact of the trees is part of (old or new side), newest first;
-- both sides of a contradiction live in its namespace, so the namespace index bounds it.
SELECT c.*, n.slug AS namespace
FROM facts f
JOIN contradictions c ON c.namespace_id = f.namespace_id AND (c.old_fact_id = f.id OR c.new_fact_id = f.id)
JOIN namespaces n ON n.id = c.namespace_id
WHERE f.id = %(id)s AND (%(all_namespaces)s OR f.namespace_id = ANY(%(ids)s::bigint[]))
ORDER BY c.id DESC
LIMIT %(limit)s
