"""Moving memory in and out: one table catalog (``catalog``), one validating writer
(``writer``) fed by three readers (``readers``: a JSONL tree or a Parquet/CSV table
export; ``go_import``: a Go Stash database), one exporter (``export``) for both file
formats, and episode files (``episode_files``) imported through the live write path."""
