"""Fixtures for consolidation tests: a scripted model behind a real HTTP endpoint."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from stash_pipeline.consolidation.reasoner import reset_mode_cache
from stash_pipeline.memory import episodes, namespaces
from testkit.openai_server import ScriptedOpenAI
from testkit.scripted_model import ScriptedModel


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel(timeout_s=1.5)


@pytest.fixture
def server(model: ScriptedModel) -> Iterator[ScriptedOpenAI]:
    reset_mode_cache()
    with ScriptedOpenAI(model) as srv:
        yield srv
    reset_mode_cache()


@pytest.fixture
def cstore(make_store: Any, server: ScriptedOpenAI) -> Any:
    """A store whose reasoner talks to the scripted server (fast retries, short timeout)."""
    return make_store(
        openai_base_url=server.base_url,
        reasoner_model="scripted",
        reasoner_backoff_s=0.01,
        reasoner_timeout_s=1.0,
        reasoner_max_retries=1,
        reasoner_max_attempts=2,
    )


def seed(store: Any, namespace: str, texts: list[str], **kwargs: Any) -> list[int]:
    """Create the namespace (if needed) and remember the texts; returns episode ids."""
    namespaces.create(store, namespace)
    return [episodes.remember(store, namespace, t, **kwargs).id for t in texts]


def rows(store: Any, sql: str, **params: Any) -> list[dict[str, Any]]:
    """Test-only read of exact rows (assertions on what was stored)."""
    with store.db.connection() as conn:
        out = conn.execute(sql, params or None).fetchall()
        conn.commit()
        return out
