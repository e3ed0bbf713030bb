"""The test suite's options and the names its modules import from here.

The database fixtures (a real PostgreSQL + pgvector, one fresh database per test) are
``testkit.database``'s, registered by the repository's root ``conftest.py``.
"""

from __future__ import annotations

import pytest

# imported from here by the suite's modules
from testkit.database import ADMIN_DSN as _ADMIN_DSN  # noqa: F401
from testkit.database import PG_CONTAINER as _PG_CONTAINER  # noqa: F401
from testkit.database import free_port  # noqa: F401
from testkit.database import with_db as _with_db  # noqa: F401

#: the framework interop suite runs from its own environment: `make test-interop`
collect_ignore = ["interop"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", default=False, help="run slow (full) suites too")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: pass --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
