#!/usr/bin/env bash
# The server suite: the integration, MCP and reliability tests against a PostgreSQL
# server instead of the embedded one (`make test-server` runs this). Arguments, when
# given, are pytest's instead of those three directories, e.g.
# `tests/server.sh tests/reliability/test_db_restart.py --run-slow`.
#
#   STASH_TEST_DATABASE_URL set   -> that server (a superuser DSN; PostgreSQL with
#                                    pgvector >= 0.8); no container is started.
#   otherwise                     -> a throwaway container of STASH_TEST_PG_IMAGE
#                                    (default pgvector/pgvector:pg17, the server's
#                                    default settings) on a free port of 127.0.0.1,
#                                    removed afterwards (also on failure or Ctrl-C).
#
# With a container, STASH_TEST_PG_CONTAINER names it for the tests that restart the
# server (tests/reliability/test_db_restart.py: `docker stop` / `docker start`).
set -euo pipefail

PYTHON=${PYTHON:-.venv/bin/python}
SUITES=(tests/integration tests/mcp tests/reliability)
IMAGE=${STASH_TEST_PG_IMAGE:-pgvector/pgvector:pg17}

run_tests() {
    if [ $# -gt 0 ]; then
        "$PYTHON" -m pytest -q "$@"
    else
        "$PYTHON" -m pytest -q "${SUITES[@]}"
    fi
}

if [ -n "${STASH_TEST_DATABASE_URL:-}" ]; then
    echo "server suite: against STASH_TEST_DATABASE_URL (no container started)" >&2
    run_tests "$@"
    exit
fi

if ! command -v docker >/dev/null 2>&1; then
    echo "error: docker not found; install docker, or set STASH_TEST_DATABASE_URL to a superuser DSN" \
         "of a PostgreSQL server with pgvector >= 0.8" >&2
    exit 2
fi
if ! docker info >/dev/null 2>&1; then
    echo "error: the docker daemon is not running (or this user may not use it: \`docker info\` failed);" \
         "start it, or set STASH_TEST_DATABASE_URL to a superuser DSN of a PostgreSQL server" >&2
    exit 2
fi

# A fixed host port (not docker's ephemeral one), so it stays the same across `docker start`.
port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
name="stash-test-pg-$port-$$"

cleanup() {
    docker rm -f "$name" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "server suite: starting $IMAGE as $name on 127.0.0.1:$port" >&2
docker run --detach --name "$name" \
    --env POSTGRES_USER=stash --env POSTGRES_PASSWORD=stash --env POSTGRES_DB=postgres \
    --publish "127.0.0.1:$port:5432" "$IMAGE" >/dev/null

export STASH_TEST_DATABASE_URL="postgresql://stash:stash@127.0.0.1:$port/postgres"
export STASH_TEST_PG_CONTAINER="$name"

# The image's entrypoint runs a first server on the socket only (initdb, init scripts),
# then the real one: wait for a connection over TCP through the published port.
if ! "$PYTHON" - <<'EOF'
import os, sys, time
import psycopg
deadline = time.monotonic() + 90
while True:
    try:
        with psycopg.connect(os.environ["STASH_TEST_DATABASE_URL"], connect_timeout=2) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]
        print(f"server suite: PostgreSQL {version} accepting connections", file=sys.stderr)
        break
    except psycopg.OperationalError as exc:
        if time.monotonic() > deadline:
            sys.exit(f"error: the server did not accept connections within 90 s: {exc}")
        time.sleep(0.5)
EOF
then
    docker logs --tail 30 "$name" >&2 || true
    exit 1
fi

run_tests "$@"
