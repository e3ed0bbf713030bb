"""The connection budget: what a Stash deployment may open against ``max_connections``.

    need = replicas × workers × (STASH_DB_POOL_MAX + AUTH_POOL)   the MCP service processes
         + runs × RUN_CONNECTIONS                                  Dagster runs at once
         + DAGSTER_SERVICES                                        daemon, webserver, code server

``replicas`` and ``runs`` are the settings ``STASH_DB_BUDGET_REPLICAS`` and
``STASH_DB_BUDGET_RUNS`` (the deployment's shape, which no single process can see);
``workers`` is the worker processes of each replica (``stash serve mcp --workers``, each
with pools of its own). ``stash serve mcp`` and ``stash doctor`` compare ``need`` with
what the server gives ordinary roles and warn, with the sum spelled out, when it does
not fit: a deployment past its budget fails under load with "too many clients", not at
start-up. ``most_workers`` is how many workers a replica may start within it
(``stash_serve.workers.choose_workers`` starts no more).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from stash_pipeline.config import Settings
from stash_pipeline.db.gateway import Database

log = logging.getLogger(__name__)

#: the token-check pool of each MCP process (``stash_serve.token_check.POOL_SIZE``)
AUTH_POOL = 4
#: one run: its store's pool (``StashResource.pool_max``, the stage lock included) and
#: Dagster's event writes (one short connection at a time)
RUN_CONNECTIONS = 3
#: the Dagster daemon, webserver and code server together (their storage connections and
#: the sensor ticks' stores), measured at their peak under load (docs/deploy.md)
DAGSTER_SERVICES = 15


@dataclass(frozen=True)
class Budget:
    """The connections a deployment needs and the ones the server gives."""

    replicas: int
    pool_max: int
    runs: int
    max_connections: int
    reserved: int
    open_now: int
    #: worker processes per MCP replica, each with its own pools
    workers: int = 1

    @property
    def per_worker(self) -> int:
        return self.pool_max + AUTH_POOL

    @property
    def others(self) -> int:
        """What the deployment needs besides the MCP processes: Dagster's runs and services."""
        return self.runs * RUN_CONNECTIONS + DAGSTER_SERVICES

    @property
    def need(self) -> int:
        return self.replicas * self.workers * self.per_worker + self.others

    @property
    def available(self) -> int:
        return self.max_connections - self.reserved

    @property
    def fits(self) -> bool:
        return self.need <= self.available

    def most_workers(self) -> int:
        """The most worker processes per replica that fit (0: not even one)."""
        return max(0, (self.available - self.others) // (self.replicas * self.per_worker))

    def with_workers(self, workers: int) -> Budget:
        return replace(self, workers=workers)

    def spelled(self) -> str:
        """The sum, spelled out: "3 MCP process(es) × (10 + 4) + … = 81 connections"."""
        processes = (
            f"{self.replicas} MCP process(es)" if self.workers == 1
            else f"{self.replicas} MCP replica(s) × {self.workers} workers"
        )
        return (
            f"{processes} × ({self.pool_max} + {AUTH_POOL}) + {self.runs} run(s) × "
            f"{RUN_CONNECTIONS} + {DAGSTER_SERVICES} for Dagster = {self.need} connections"
        )

    def describe(self) -> str:
        """The sum, spelled out, and whether it fits."""
        sum_ = self.spelled()
        limit = f"{self.available} available (max_connections {self.max_connections}, {self.reserved} reserved)"
        if self.fits:
            return f"connection budget: {sum_} of {limit}; {self.open_now} open now"
        fewer = "run fewer MCP replicas" + (" or workers" if self.workers > 1 else "")
        return (
            f"connection budget exceeded: {sum_}, but the server gives {limit}; lower STASH_DB_POOL_MAX, "
            f"{fewer} or Dagster runs (max_concurrent_runs), or raise max_connections"
        )


def read_budget(db: Database, settings: Settings, workers: int = 1) -> Budget:
    """The budget of ``settings`` (with ``workers`` processes per replica) against the
    server behind ``db`` (one query)."""
    row = db.one("connection_limits") or {}
    return Budget(
        replicas=settings.db_budget_replicas,
        pool_max=settings.db_pool_max,
        runs=settings.db_budget_runs,
        max_connections=int(row["max_connections"]),
        reserved=int(row["reserved"]),
        open_now=int(row["open_now"]),
        workers=workers,
    )


def check_budget(db: Database, settings: Settings, workers: int = 1) -> Budget:
    """``read_budget``, logged: a warning when the deployment does not fit, else one info line."""
    budget = read_budget(db, settings, workers)
    log.log(logging.INFO if budget.fits else logging.WARNING, budget.describe())
    return budget


__all__ = ["AUTH_POOL", "DAGSTER_SERVICES", "RUN_CONNECTIONS", "Budget", "check_budget", "read_budget"]
