-- recall_search_params --
-- Per-transaction HNSW settings: a wider beam and iterative scans, so namespace and
-- validity filters applied during the index scan still yield enough candidates.
SELECT set_config('hnsw.ef_search', %(ef_search)s, true) AS ef_search,
       set_config('hnsw.iterative_scan', 'relaxed_order', true) AS iterative_scan
