"""A real PostgreSQL + pgvector for tests: one fresh database per test (pytest fixtures).

The server is ``STASH_TEST_DATABASE_URL`` / ``STASH_DATABASE_URL`` when set (a superuser
DSN), otherwise an embedded cluster started for the session in a temporary STASH_HOME.
The schema is migrated once into a template database; every test gets
``CREATE DATABASE … TEMPLATE`` (milliseconds) and it is dropped afterwards
(procrastinate's pattern).

A pytest plugin: the repository's root ``conftest.py`` registers it for ``tests/`` and
``bench/tests/``. Importing it reads the server's DSN and ``STASH_WRITE_SCREENSHOTS``, then
removes every ``STASH_*`` variable from the environment, so the developer's settings stay
out of the tests.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

ADMIN_DSN = os.environ.get("STASH_TEST_DATABASE_URL") or os.environ.get("STASH_DATABASE_URL")
#: the container of that server when tests/server.sh started one (the restart tests restart it)
PG_CONTAINER = os.environ.get("STASH_TEST_PG_CONTAINER")
#: STASH_WRITE_SCREENSHOTS=1: the browser tests also write their screenshots to docs/img
WRITE_SCREENSHOTS = os.environ.get("STASH_WRITE_SCREENSHOTS") == "1"
for _key in [k for k in os.environ if k.startswith("STASH_")]:
    del os.environ[_key]
os.environ["STASH_ENV_FILE"] = "/nonexistent/.env"

from stash_pipeline.config import Settings, load_settings  # noqa: E402
from stash_pipeline.store import Store  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def with_db(dsn: str, dbname: str) -> str:
    """``dsn`` with its database name replaced."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    parts = conninfo_to_dict(dsn)
    parts["dbname"] = dbname
    return make_conninfo(**parts)


@pytest.fixture(scope="session")
def pg_admin_dsn() -> Iterator[str]:
    """Superuser DSN of the test server (maintenance database)."""
    if ADMIN_DSN:
        yield with_db(ADMIN_DSN, "postgres")
        return
    from stash_pipeline.db.embedded import EmbeddedServer

    home = Path(tempfile.mkdtemp(prefix="stash-test-"))
    server = EmbeddedServer(load_settings(home=home, db_port=free_port(), embedder="hash"))
    server.start()
    try:
        yield server.url("postgres")
    finally:
        server.stop()


@pytest.fixture(scope="session")
def template_db(pg_admin_dsn: str) -> Iterator[str]:
    """A database holding the migrated schema, used as template for each test."""
    from stash_pipeline.db.migrate import migrate

    name = f"stash_tpl_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = with_db(pg_admin_dsn, name)
    migrate(load_settings(database_url=dsn, embedder="hash", vector_dim=384), dsn)
    yield name
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def database_url(pg_admin_dsn: str, template_db: str) -> Iterator[str]:
    """DSN of a fresh, migrated database for this test only."""
    name = f"stash_t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    yield with_db(pg_admin_dsn, name)
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def database_at(pg_admin_dsn: str) -> Iterator[Callable[[str], str]]:
    """Factory: the DSN of a new database migrated only up to ``revision`` (a migration's
    test writes rows as an older version did, then upgrades); dropped after the test."""
    from alembic import command

    from stash_pipeline.db.migrate import _config

    made: list[str] = []

    def at(revision: str) -> str:
        name = f"stash_at{revision}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        dsn = with_db(pg_admin_dsn, name)
        command.upgrade(_config(dsn, 384), revision)
        return dsn

    yield at
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        for name in made:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    """Settings for a test: its own database, the deterministic hash embedder."""
    return load_settings(database_url=database_url, home=tmp_path / "home", embedder="hash", vector_dim=384)


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    s = Store.open(settings)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def make_store(database_url: str, tmp_path: Path) -> Iterator[object]:
    """Factory for stores with other settings on the same test database."""
    opened: list[Store] = []

    def factory(**overrides: object) -> Store:
        values: dict[str, object] = {"database_url": database_url, "home": tmp_path / "home", "embedder": "hash"}
        values.update(overrides)
        s = Store.open(load_settings(**values))
        opened.append(s)
        return s

    yield factory
    for s in opened:
        with contextlib.suppress(Exception):
            s.close()
