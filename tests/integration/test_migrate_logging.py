"""The readiness checks log nothing from Alembic; a real migration still says what it ran.

Run in a fresh interpreter with INFO logging configured before anything is imported, as
in the MCP server, so Alembic's import-time lines would show too.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid

import psycopg
from psycopg import sql

from tests.conftest import _with_db

_CHECKS = textwrap.dedent(
    """
    import logging, sys
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(message)s")
    from stash_pipeline.db.migrate import current_revision, head_revision
    for _ in range(3):
        assert current_revision(sys.argv[1]) == head_revision()
    print("checked")
    """
)

_MIGRATE = textwrap.dedent(
    """
    import logging, sys
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(message)s")
    from stash_pipeline.config import load_settings
    from stash_pipeline.db.migrate import migrate
    migrate(load_settings(database_url=sys.argv[1]), sys.argv[1])
    """
)


def _python(code: str, dsn: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-c", code, dsn], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result


def test_readiness_checks_log_nothing_from_alembic(database_url: str) -> None:
    result = _python(_CHECKS, database_url)
    assert result.stdout.strip() == "checked"
    assert "alembic" not in result.stderr, result.stderr


def test_migrate_still_logs_the_upgrades_it_runs(pg_admin_dsn: str) -> None:
    name = f"stash_empty_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        result = _python(_MIGRATE, _with_db(pg_admin_dsn, name))
    finally:
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    assert "alembic.runtime.migration Running upgrade" in result.stderr, result.stderr
    assert "setup plugin" not in result.stderr
