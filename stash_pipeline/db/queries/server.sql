-- session_settings --
-- Settings every Stash connection runs with, whatever the server's defaults. JIT off:
-- PostgreSQL compiles a statement to machine code when its estimated cost passes
-- jit_above_cost, which recall's generic plan does on every run; compiling takes seconds
-- and no Stash statement runs long enough to win it back. Set per session (not per role
-- or database): it needs no privilege and changes nothing for the server's other clients.
SELECT set_config('jit', 'off', false) AS jit

-- server_versions --
-- The server's PostgreSQL version and pgvector's: the version installed in this database
-- (NULL before the first migration) and the one the server can install.
SELECT current_setting('server_version_num')::int AS version_num,
       current_setting('server_version') AS version,
       (SELECT extversion FROM pg_extension WHERE extname = 'vector') AS vector_installed,
       (SELECT default_version FROM pg_available_extensions WHERE name = 'vector') AS vector_available

-- prepare_budget --
-- Pipelined before the statements a new connection prepares: each may take at most
-- %(ms)s milliseconds (this transaction only), so a slow prepare delays the request
-- waiting for that connection by a bounded time and leaves it unprepared instead.
SELECT set_config('statement_timeout', %(ms)s, true) AS statement_timeout

-- connection_limits --
-- The connections this server gives ordinary roles: max_connections less the slots kept
-- for superusers and (PostgreSQL 16+) for pg_use_reserved_connections; and how many are
-- open now.
SELECT current_setting('max_connections')::int AS max_connections,
       current_setting('superuser_reserved_connections')::int
         + coalesce(current_setting('reserved_connections', true), '0')::int AS reserved,
       (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int AS open_now
