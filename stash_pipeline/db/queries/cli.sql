-- cli_schema_table --
-- Whether the migration version table exists (it does not before the first `stash migrate`).
SELECT to_regclass('stash_schema_version') IS NOT NULL AS present

-- cli_schema_revision --
-- The schema revision recorded by Alembic, for the CLI's cheap "migrations current?" check.
SELECT version_num FROM stash_schema_version LIMIT 1
