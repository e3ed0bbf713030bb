"""``StashResource``: the same ``Store`` (settings + database gateway + embedder) the CLI and MCP build.

Every field is an optional override of a ``STASH_*`` setting; unset fields fall back to
``stash_pipeline.config.load_settings()``, which reads the environment (and ``.env``)
when a run or sensor tick *starts*, never at import time. Fields may be given as
``dg.EnvVar("NAME")`` so the UI shows the variable's name, not its value.

Each step and each sensor tick opens its own short-lived store (a pool of at most
``pool_max`` connections) and closes it at the end: run workers are separate processes,
and a sensor must not keep connections between ticks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import dagster as dg

from stash_pipeline.config import Settings, load_settings
from stash_pipeline.store import Store


class StashResource(dg.ConfigurableResource):
    """Opens a ``Store`` built from ``STASH_*`` settings plus the overrides configured here."""

    database_url: str | None = None
    home: str | None = None
    embedder: str | None = None
    vector_dim: int | None = None
    openai_base_url: str | None = None
    openai_api_key: str | None = None
    reasoner_model: str | None = None
    reasoner_timeout_s: float | None = None
    reasoner_max_retries: int | None = None
    reasoner_max_attempts: int | None = None
    reasoner_backoff_s: float | None = None
    #: connections per step / tick; stages run one transaction at a time
    pool_max: int = 2

    def settings(self) -> Settings:
        """Settings for this run: environment first, then the non-empty fields of this resource.

        The connection pool is always ``pool_max`` connections, whatever STASH_DB_POOL_MAX says.
        """
        overrides: dict[str, Any] = {
            name: getattr(self, name)
            for name in (
                "database_url",
                "home",
                "embedder",
                "vector_dim",
                "openai_base_url",
                "openai_api_key",
                "reasoner_model",
                "reasoner_timeout_s",
                "reasoner_max_retries",
                "reasoner_max_attempts",
                "reasoner_backoff_s",
            )
            if getattr(self, name) not in (None, "")
        }
        return load_settings(**overrides, db_pool_max=self.pool_max)

    @contextlib.contextmanager
    def open_store(self) -> Iterator[Store]:
        """A store for one step or one sensor tick, closed afterwards."""
        store = Store.open(self.settings())
        try:
            yield store
        finally:
            store.close()
