"""Registers testkit's PostgreSQL fixtures for both test trees, ``tests/`` and ``bench/tests/``.

Neither tree imports the other: what they share is in ``testkit/``.
"""

from __future__ import annotations

pytest_plugins = ["testkit.database"]
