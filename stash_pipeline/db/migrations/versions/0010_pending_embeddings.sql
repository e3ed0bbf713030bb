-- An episode may be committed before its vector exists (STASH_EMBED_ON_WRITE=async, or
-- auto with a slow embedder): remember stores the row at once and the pending-vector
-- worker (stash_pipeline/embedding/pending.py) fills the vector in later.
--
-- The row itself is the queue: embedding IS NULL means "waiting for a vector". A separate
-- queue table would add an insert and a delete per episode and could disagree with the
-- row; the vector has to be written into the row anyway. The partial index holds only
-- the waiting rows, so it stays tiny: the worker finds them in id order, and a stage
-- finds the first waiting episode of a namespace (its watermark stops before it) with
-- one index probe. HNSW does not index NULL vectors, so a waiting row is simply not a
-- vector candidate until it has one; full text finds it at once.
ALTER TABLE episodes ALTER COLUMN embedding DROP NOT NULL;
CREATE INDEX episodes_pending_vector ON episodes (namespace_id, id) WHERE embedding IS NULL;
