-- The nearest-vector reads of facts and episodes (recall's candidates, forget's nearest
-- episode, the fact stage's nearest current fact) walk an HNSW graph of half-precision
-- copies of the embeddings: half the graph's size (at 1M memories the full-precision
-- graphs were 2 GB against 256 MB of shared_buffers) and cheaper inserts, for a ranking
-- that agrees with full precision on labelled retrieval (bench/README.md). Where the
-- graphs fit in memory a read costs slightly more (the half floats are widened).
-- Scores stay full precision: only the ORDER BY of the index scan uses the key.
--
-- embedding_key(v) is that key. The indexes are on the cast itself, since HNSW needs the
-- dimension in the indexed type and a function's result carries none; the function is
-- inlined into each query, so the planner sees the indexed expression, and queries never
-- name the dimension ({vector_dim}, the column's own; stash reembed redefines both when
-- the dimension changes). A SQL-standard body is resolved once, here, so the key does
-- not depend on the caller's search_path.
CREATE OR REPLACE FUNCTION embedding_key(v vector) RETURNS halfvec
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN v::halfvec({vector_dim});

-- IF NOT EXISTS: on a large store these may be built beforehand (they take minutes)
CREATE INDEX IF NOT EXISTS episodes_embedding_key_hnsw ON episodes
    USING hnsw ((embedding::halfvec({vector_dim})) halfvec_cosine_ops);
CREATE INDEX IF NOT EXISTS facts_embedding_key_hnsw ON facts
    USING hnsw ((embedding::halfvec({vector_dim})) halfvec_cosine_ops);

-- every reader orders by the key now: the full-precision graphs would only cost writes
DROP INDEX IF EXISTS episodes_embedding_hnsw;
DROP INDEX IF EXISTS facts_embedding_hnsw;
