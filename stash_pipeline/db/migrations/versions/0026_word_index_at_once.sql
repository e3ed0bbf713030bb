-- The word indexes (search @@ ...) take a new row's lexemes into the index at once
-- (fastupdate off), instead of into a pending list that every search reads through in
-- full until VACUUM or a full list (gin_pending_list_limit, 4 MB by default) merges it:
-- under a stream of writes the recall statement's text leg spent most of its time there.
-- A write pays the index insert itself, a fraction of a millisecond; the pending lists
-- already written are merged now.
ALTER INDEX episodes_search_gin SET (fastupdate = off);
ALTER INDEX facts_search_gin SET (fastupdate = off);
SELECT gin_clean_pending_list('episodes_search_gin'::regclass);
SELECT gin_clean_pending_list('facts_search_gin'::regclass);
