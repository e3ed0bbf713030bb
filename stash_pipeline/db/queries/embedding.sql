-- Embedding cache, model lock and re-embedding (stash_pipeline/embedding).

-- embedding_cache_lookup --
-- Cached vectors for some text hashes under one model and endpoint.
SELECT text_hash, embedding FROM embedding_cache
WHERE model = %(model)s AND endpoint = %(endpoint)s AND text_hash = ANY(%(hashes)s)

-- embedding_cache_insert --
-- Store one computed vector; a concurrent writer of the same key wins silently.
INSERT INTO embedding_cache (text_hash, model, endpoint, embedding)
VALUES (%(text_hash)s, %(model)s, %(endpoint)s, %(embedding)s)
ON CONFLICT DO NOTHING

-- embedding_cache_relaxed_commit --
-- Cache writes need no durability guarantee: commit without waiting for the WAL flush.
SET LOCAL synchronous_commit TO off

-- embedding_cache_forget --
-- Erase the cache entries of some texts for every model and endpoint (purge), and
-- recall's scoped entries of them (embedding/cache.py query_key: the text's hash followed
-- by more hex digits, so every key from h up to h || 'g' starts with h): a range of the
-- primary key per text ("OFFSET 0" keeps the range a lookup per text: flattened into a
-- join, the planner read the whole table for it).
DELETE FROM embedding_cache c
USING unnest(%(hashes)s::text[]) AS h(hash)
CROSS JOIN LATERAL (SELECT e.ctid AS row FROM embedding_cache e
                    WHERE e.text_hash >= h.hash AND e.text_hash < h.hash || 'g' OFFSET 0) x
WHERE c.ctid = x.row

-- embedding_lock_init --
-- Record a lock value unless one is already stored (the first writer wins).
INSERT INTO settings (key, value) VALUES (%(key)s, %(value)s)
ON CONFLICT (key) DO NOTHING

-- embedding_lock_set --
-- Record a lock value, replacing the stored one (reembed, endpoint audit).
INSERT INTO settings (key, value) VALUES (%(key)s, %(value)s)
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()
WHERE settings.value IS DISTINCT FROM EXCLUDED.value

-- embedding_lock_read --
-- The stored embedding lock (model, dimension, endpoint).
SELECT key, value FROM settings
WHERE key IN ('embedding_model', 'vector_dim', 'embedding_endpoint')

-- embedding_column_dims --
-- Declared dimension of every vector column in the public schema (atttypmod = dims).
SELECT c.relname AS table_name, a.attname AS column_name, a.atttypmod AS dim
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = a.atttypid
WHERE n.nspname = current_schema() AND c.relkind = 'r' AND t.typname = 'vector'
  AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY c.relname, a.attname

-- embedding_episode_column_dim --
-- Declared dimension of episodes.embedding (what every stored vector must have).
SELECT a.atttypmod AS dim
FROM pg_attribute a
WHERE a.attrelid = 'episodes'::regclass AND a.attname = 'embedding' AND NOT a.attisdropped

-- reembed_count_episodes --
-- Episodes whose vector is missing or made by another model.
SELECT count(*) AS n FROM episodes WHERE embedding IS NULL OR embedding_model <> %(model)s

-- reembed_count_facts --
-- Facts whose vector is missing or made by another model.
SELECT count(*) AS n FROM facts WHERE embedding IS NULL OR embedding_model <> %(model)s

-- reembed_next_episodes --
-- The next batch of episodes to re-embed, in id order, after a cursor.
SELECT id, content FROM episodes
WHERE id > %(after)s AND (embedding IS NULL OR embedding_model <> %(model)s)
ORDER BY id LIMIT %(limit)s

-- reembed_next_facts --
-- The next batch of facts to re-embed, in id order, after a cursor.
SELECT id, content FROM facts
WHERE id > %(after)s AND (embedding IS NULL OR embedding_model <> %(model)s)
ORDER BY id LIMIT %(limit)s

-- reembed_count_entities --
-- Entities whose name vector is missing or made by another model.
SELECT count(*) AS n FROM entities WHERE embedding IS NULL OR embedding_model IS DISTINCT FROM %(model)s

-- reembed_next_entities --
-- The next batch of entities to re-embed (their normalised name), in id order, after a cursor.
SELECT id, normalised AS content FROM entities
WHERE id > %(after)s AND (embedding IS NULL OR embedding_model IS DISTINCT FROM %(model)s)
ORDER BY id LIMIT %(limit)s

-- reembed_set_entity --
-- Store one entity's new name vector and the model that made it.
UPDATE entities SET embedding = %(embedding)s, embedding_model = %(model)s WHERE id = %(id)s

-- reembed_set_episode --
-- Store one episode's new vector and the model that made it.
UPDATE episodes SET embedding = %(embedding)s, embedding_model = %(model)s WHERE id = %(id)s

-- reembed_set_fact --
-- Store one fact's new vector and the model that made it (not a content change: updated_at kept).
UPDATE facts SET embedding = %(embedding)s, embedding_model = %(model)s WHERE id = %(id)s

-- reembed_drop_indexes --
-- Drop the HNSW indexes before the vector columns change type (the half-precision ones
-- of 0019 name the old dimension; the full-precision ones of older schemas too).
DROP INDEX IF EXISTS episodes_embedding_key_hnsw;
DROP INDEX IF EXISTS facts_embedding_key_hnsw;
DROP INDEX IF EXISTS episodes_embedding_hnsw;
DROP INDEX IF EXISTS facts_embedding_hnsw;
DROP INDEX IF EXISTS entities_embedding_hnsw

-- reembed_alter_dims --
-- Retype every vector column to {dim} dimensions; old vectors are unusable, so NULL.
-- DDL takes no bind parameters: {dim} is a psycopg sql.Literal of a checked int.
-- embedding_key, the HNSW reads' half-precision key (0019), takes the new dimension too.
CREATE OR REPLACE FUNCTION embedding_key(v vector) RETURNS halfvec
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN v::halfvec({dim});
ALTER TABLE episodes ALTER COLUMN embedding DROP NOT NULL;
ALTER TABLE episodes ALTER COLUMN embedding TYPE vector({dim}) USING NULL;
ALTER TABLE facts ALTER COLUMN embedding DROP NOT NULL;
ALTER TABLE facts ALTER COLUMN embedding TYPE vector({dim}) USING NULL;
ALTER TABLE entities ALTER COLUMN embedding TYPE vector({dim}) USING NULL;
TRUNCATE embedding_cache;
ALTER TABLE embedding_cache ALTER COLUMN embedding TYPE vector({dim}) USING NULL

-- reembed_restore_constraints --
-- Every row has a vector again: restore NOT NULL on facts and rebuild the HNSW indexes
-- (names and keys as in 0019 and 0009). episodes.embedding stays nullable: an episode may
-- wait for its vector (0010_pending_embeddings); an entity's vector is nullable too.
-- {dim}: the columns' dimension (a psycopg sql.Literal), as embedding_key's.
ALTER TABLE facts ALTER COLUMN embedding SET NOT NULL;
CREATE INDEX IF NOT EXISTS episodes_embedding_key_hnsw ON episodes
    USING hnsw ((embedding::halfvec({dim})) halfvec_cosine_ops);
CREATE INDEX IF NOT EXISTS facts_embedding_key_hnsw ON facts
    USING hnsw ((embedding::halfvec({dim})) halfvec_cosine_ops);
CREATE INDEX IF NOT EXISTS entities_embedding_hnsw ON entities USING hnsw (embedding vector_cosine_ops)

-- reembed_schema_state --
-- Whether facts.embedding is NOT NULL and the HNSW indexes exist (false = repair needed).
SELECT
    (SELECT attnotnull FROM pg_attribute
      WHERE attrelid = 'facts'::regclass AND attname = 'embedding') AS facts_not_null,
    to_regclass('episodes_embedding_key_hnsw') IS NOT NULL AS episodes_index,
    to_regclass('facts_embedding_key_hnsw') IS NOT NULL AS facts_index,
    to_regclass('entities_embedding_hnsw') IS NOT NULL AS entities_index

-- embedding_cache_insert_many --
-- Store computed vectors (parallel arrays of hashes and vectors) in one statement; a
-- concurrent writer of the same key wins silently.
INSERT INTO embedding_cache (text_hash, model, endpoint, embedding)
SELECT hash, %(model)s, %(endpoint)s, embedding
FROM unnest(%(hashes)s::text[], %(embeddings)b) AS t(hash, embedding)
ON CONFLICT DO NOTHING
