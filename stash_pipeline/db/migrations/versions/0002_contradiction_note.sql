-- The caller's free-text note when resolving a contradiction (resolve_contradiction's
-- "note"), kept next to the chosen action instead of being dropped.
ALTER TABLE contradictions ADD COLUMN resolution_note text;
