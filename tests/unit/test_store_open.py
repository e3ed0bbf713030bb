"""``Store.open`` never starts the embedded PostgreSQL; a stopped server is a clear error.

Only entry points start it (``stash up``, the ``stash`` CLI, the test fixtures). A
Dagster sensor tick or run worker that finds it down fails with one instruction instead
of starting a server of its own under whatever user and environment the daemon has.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import dagster as dg
import pytest

from stash_pipeline.config import load_settings
from stash_pipeline.defs.resources import StashResource
from stash_pipeline.defs.sensors import watermark_sensor
from stash_pipeline.errors import DatabaseUnavailable
from stash_pipeline.store import Store
from tests.conftest import free_port


def stopped_home(tmp_path: Path) -> Path:
    """A home whose embedded cluster exists on disk but is not running."""
    home = tmp_path / "home"
    (home / "pgdata").mkdir(parents=True)
    (home / "pgdata" / "PG_VERSION").write_text("18\n")
    (home / "pg").mkdir()
    (home / "pg" / "password").write_text("secret\n")
    return home


def test_opening_a_store_on_a_stopped_embedded_server_says_how_to_start_it(tmp_path: Path) -> None:
    home = stopped_home(tmp_path)
    settings = load_settings(home=home, db_port=free_port(), database_url=None)
    with pytest.raises(DatabaseUnavailable, match=r"is not running .*`stash db start` or `stash up`"):
        Store.open(settings)
    assert not (home / "pgdata" / "postmaster.pid").exists()  # nothing was started


def test_a_home_without_a_database_is_not_created_by_opening_a_store(tmp_path: Path) -> None:
    home = tmp_path / "fresh"
    with pytest.raises(DatabaseUnavailable, match="has not been created yet"):
        Store.open(load_settings(home=home, db_port=free_port(), database_url=None))
    assert not (home / "pgdata").exists()


def test_a_sensor_tick_does_not_start_the_server(tmp_path: Path) -> None:
    home = stopped_home(tmp_path)
    stash = StashResource(home=str(home))
    with warnings.catch_warnings(), dg.instance_for_test() as instance:
        warnings.simplefilter("ignore")
        context = dg.build_sensor_context(instance=instance, resources={"stash": stash})
        with pytest.raises(DatabaseUnavailable, match="is not running"):
            watermark_sensor(context)
    assert not (home / "pgdata" / "postmaster.pid").exists()
