"""How many HTTP workers: the connection budget counts them, a count asked for that does not
fit is refused, the default is one per usable CPU (a container's quota included), at most
``AUTO_MAX_WORKERS``, shrunk to what the budget holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from stash_pipeline.db.budget import AUTH_POOL, DAGSTER_SERVICES, RUN_CONNECTIONS, Budget
from stash_pipeline.errors import ConfigurationError
from stash_serve.workers import AUTO_MAX_WORKERS, cgroup_cpu_quota, choose_workers

STOCK = Budget(replicas=1, pool_max=10, runs=8, max_connections=100, reserved=3, open_now=5)


def test_the_budget_counts_every_worker_of_every_replica() -> None:
    budget = STOCK.with_workers(3)
    assert budget.need == 1 * 3 * (10 + AUTH_POOL) + 8 * RUN_CONNECTIONS + DAGSTER_SERVICES
    assert "1 MCP replica(s) × 3 workers × (10 + 4)" in budget.describe()
    assert STOCK.most_workers() == 4  # 4 × 14 + 39 = 95 of 97
    assert not STOCK.with_workers(5).fits
    assert "or workers" in STOCK.with_workers(5).describe()
    assert Budget(replicas=3, pool_max=10, runs=8, max_connections=100, reserved=3, open_now=0).most_workers() == 1


def test_a_count_asked_for_is_kept_or_refused() -> None:
    assert choose_workers(3, STOCK) == (3, None)
    assert choose_workers(8, None) == (8, None)  # the database could not be asked
    with pytest.raises(ConfigurationError, match=r"5 workers do not fit.*at most 4 fit"):
        choose_workers(5, STOCK)
    tight = Budget(replicas=1, pool_max=10, runs=8, max_connections=40, reserved=3, open_now=0)
    assert choose_workers(1, tight) == (1, None)  # one worker past the budget: warned, as ever


def test_the_default_is_one_per_cpu_within_the_cap_and_the_budget() -> None:
    assert choose_workers(None, STOCK, cpus=2) == (2, None)
    assert choose_workers(None, None, cpus=64) == (AUTO_MAX_WORKERS, None)
    small = Budget(replicas=1, pool_max=10, runs=8, max_connections=72, reserved=3, open_now=0)
    count, note = choose_workers(None, small, cpus=4)
    assert count == 2 and note is not None and "starting 2 worker(s)" in note
    assert choose_workers(None, Budget(replicas=9, pool_max=10, runs=8, max_connections=50, reserved=3,
                                       open_now=0), cpus=4)[0] == 1


def test_a_containers_cpu_quota_bounds_the_default(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    (root / "kubepods" / "pod1").mkdir(parents=True)
    (root / "kubepods" / "cpu.max").write_text("400000 100000\n")
    (root / "kubepods" / "pod1" / "cpu.max").write_text("150000 100000\n")
    proc = tmp_path / "self-cgroup"
    proc.write_text("0::/kubepods/pod1\n")
    assert cgroup_cpu_quota(root, proc) == 1.5
    (root / "kubepods" / "pod1" / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_quota(root, proc) == 4.0
    (root / "kubepods" / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_quota(root, proc) is None
    v1 = tmp_path / "v1"
    (v1 / "cpu,cpuacct").mkdir(parents=True)
    (v1 / "cpu,cpuacct" / "cpu.cfs_quota_us").write_text("200000\n")
    (v1 / "cpu,cpuacct" / "cpu.cfs_period_us").write_text("100000\n")
    proc.write_text("4:cpu,cpuacct:/docker/abc\n")
    assert cgroup_cpu_quota(v1, proc) == 2.0
