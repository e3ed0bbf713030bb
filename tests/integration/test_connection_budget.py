"""The connection budget against a real server: the sum of the deployment's pools, compared
with what the server gives ordinary roles, a warning at start-up and a failed doctor check
when it does not fit."""

from __future__ import annotations

import logging

import psycopg
import pytest

from stash_pipeline.config import load_settings
from stash_pipeline.db.budget import AUTH_POOL, RUN_CONNECTIONS, check_budget, read_budget


def server_limits(dsn: str) -> tuple[int, int]:
    with psycopg.connect(dsn) as conn:
        max_connections = int(conn.execute("SHOW max_connections").fetchone()[0])
        reserved = int(conn.execute("SHOW superuser_reserved_connections").fetchone()[0])
        if conn.info.server_version >= 160000:
            reserved += int(conn.execute("SHOW reserved_connections").fetchone()[0])
    return max_connections, reserved


def test_the_budget_reads_the_servers_limits_and_sums_the_pools(store, database_url):
    max_connections, reserved = server_limits(database_url)
    settings = load_settings(database_url=database_url, embedder="hash", db_pool_max=10,
                             db_budget_replicas=3, db_budget_runs=8)
    budget = read_budget(store.db, settings)
    assert (budget.max_connections, budget.available) == (max_connections, max_connections - reserved)
    assert budget.need == 3 * (10 + AUTH_POOL) + 8 * RUN_CONNECTIONS + 15
    assert budget.open_now >= 1  # this store's own connection at least
    assert budget.fits, budget.describe()
    assert budget.describe().startswith(f"connection budget: 3 MCP process(es) × (10 + {AUTH_POOL}) + 8 run(s)")


def test_a_deployment_past_max_connections_is_warned_about(store, database_url, caplog):
    max_connections, reserved = server_limits(database_url)
    # one replica more than the server has room for
    replicas = (max_connections - reserved) // (10 + AUTH_POOL) + 1
    settings = load_settings(database_url=database_url, embedder="hash", db_pool_max=10,
                             db_budget_replicas=replicas, db_budget_runs=0)
    with caplog.at_level(logging.INFO, logger="stash_pipeline.db.budget"):
        budget = check_budget(store.db, settings)
    assert not budget.fits
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"connection budget exceeded: {replicas} MCP process(es)")
    assert f"max_connections {max_connections}" in warnings[0] and "lower STASH_DB_POOL_MAX" in warnings[0]


def test_a_fitting_deployment_logs_one_info_line(store, database_url, caplog):
    settings = load_settings(database_url=database_url, embedder="hash", db_budget_replicas=1, db_budget_runs=1)
    with caplog.at_level(logging.INFO, logger="stash_pipeline.db.budget"):
        assert check_budget(store.db, settings).fits
    assert [r.levelno for r in caplog.records] == [logging.INFO]


def test_the_constants_match_the_pools_they_count():
    from stash_pipeline.defs.resources import StashResource
    from stash_serve.token_check import POOL_SIZE

    assert POOL_SIZE == AUTH_POOL
    # a run's store (the stage lock's connection included) plus Dagster's event writes
    assert StashResource().pool_max + 1 == RUN_CONNECTIONS


@pytest.mark.parametrize(("replicas", "ok"), [(1, True), (1000, False)])
def test_doctor_checks_the_budget(database_url, tmp_path, monkeypatch, replicas, ok):
    from stash_serve.cli.admin import doctor_checks

    for name, value in {"STASH_DATABASE_URL": database_url, "STASH_HOME": str(tmp_path), "STASH_EMBEDDER": "hash",
                        "STASH_DB_BUDGET_REPLICAS": str(replicas)}.items():
        monkeypatch.setenv(name, value)
    checks = {c.name: c for c in doctor_checks()}
    assert checks["connections"].ok is ok
    assert checks["connections"].detail.startswith("connection budget exceeded" if not ok else "connection budget:")
