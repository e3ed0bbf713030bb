-- SQL of bench/sensor_tick.py (loaded with the library's named-query parser).

-- sensor_bench_namespaces --
-- Create N namespaces /bench/n0001 … in one statement.
INSERT INTO namespaces (slug, name)
SELECT '/bench/n' || lpad(g::text, 5, '0'), 'bench ' || g FROM generate_series(1, %(n)s) AS g

-- sensor_bench_episodes --
-- Give every bench namespace some episodes (one shared vector; the sensor never reads it).
INSERT INTO episodes (namespace_id, content, embedding, embedding_model)
SELECT n.id, 'bench episode ' || g || ' in ' || n.slug, %(embedding)s, %(model)s
FROM namespaces n CROSS JOIN generate_series(1, %(per)s) AS g
WHERE n.slug LIKE '/bench/%%'
ORDER BY n.id, g

-- sensor_bench_facts --
-- Give every bench namespace some asserted facts (fact-driven stages have heads too).
INSERT INTO facts (namespace_id, content, origin, embedding, embedding_model)
SELECT n.id, 'bench fact ' || g || ' in ' || n.slug, 'asserted', %(embedding)s, %(model)s
FROM namespaces n CROSS JOIN generate_series(1, %(per)s) AS g
WHERE n.slug LIKE '/bench/%%'
ORDER BY n.id, g

-- sensor_bench_checkpoint --
-- Move one (namespace, stage) checkpoint to a given cursor (as a finished run would).
INSERT INTO stage_checkpoints (namespace_id, stage, cursor, aux_cursor)
VALUES (%(namespace_id)s, %(stage)s, %(cursor)s, %(aux_cursor)s)
ON CONFLICT (namespace_id, stage) DO UPDATE SET cursor = EXCLUDED.cursor, aux_cursor = EXCLUDED.aux_cursor

-- sensor_bench_backlog --
-- New episodes in every k-th bench namespace: that is the backlog the sensor must find.
INSERT INTO episodes (namespace_id, content, embedding, embedding_model)
SELECT n.id, 'new episode in ' || n.slug, %(embedding)s, %(model)s
FROM namespaces n
WHERE n.slug LIKE '/bench/%%' AND n.id %% %(every)s = 0
ORDER BY n.id

-- sensor_bench_all_namespaces --
-- Baseline step 1: list every namespace.
SELECT id, slug FROM namespaces ORDER BY slug

-- sensor_bench_stage_state --
-- Baseline step 2, once per (namespace, stage): that stage's checkpoint and source head.
SELECT COALESCE((SELECT cursor FROM stage_checkpoints
                 WHERE namespace_id = %(namespace_id)s AND stage = %(stage)s), 0) AS cursor,
       CASE %(source)s
           WHEN 'episodes' THEN (SELECT COALESCE(max(id), 0) FROM episodes
                                 WHERE namespace_id = %(namespace_id)s AND deleted_at IS NULL)
           ELSE (SELECT COALESCE(max(id), 0) FROM facts WHERE namespace_id = %(namespace_id)s)
       END AS head
