"""The one DSN decision (``stash_pipeline.db.dsn``): STASH_DATABASE_URL wins, otherwise the
embedded server under STASH_HOME, which only a caller asking for it starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

from stash_pipeline.config import load_settings
from stash_pipeline.db.dsn import database_dsn, start_embedded_if_needed
from stash_pipeline.errors import DatabaseUnavailable


def test_database_url_wins_and_other_databases_swap_only_the_name() -> None:
    url = "postgresql://app:secret@db.internal:6543/stash?sslmode=require"
    settings = load_settings(database_url=url)
    assert database_dsn(settings) == url
    other = conninfo_to_dict(database_dsn(settings, "dagster"))
    assert other == {
        "user": "app", "password": "secret", "host": "db.internal", "port": "6543", "dbname": "dagster",
        "sslmode": "require",
    }
    # nothing embedded to start when the database is elsewhere
    assert start_embedded_if_needed(settings) is False


def test_embedded_dsn_reads_the_generated_password(tmp_path: Path) -> None:
    (tmp_path / "pg").mkdir()
    (tmp_path / "pg" / "password").write_text("s3cret\n")
    settings = load_settings(home=tmp_path, db_port=54999)
    assert database_dsn(settings) == "postgresql://stash:s3cret@127.0.0.1:54999/stash"
    assert database_dsn(settings, "postgres") == "postgresql://stash:s3cret@127.0.0.1:54999/postgres"


def test_reading_the_embedded_dsn_never_starts_the_server(tmp_path: Path) -> None:
    settings = load_settings(home=tmp_path / "home", db_port=54999)
    with pytest.raises(DatabaseUnavailable, match="not initialised; run `stash db start`"):
        database_dsn(settings)
    assert not (tmp_path / "home" / "pgdata").exists()
