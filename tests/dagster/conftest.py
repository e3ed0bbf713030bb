"""Fixtures for the Dagster layer: Dagster's test instance and a StashResource on the test database."""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from stash_pipeline.config import Settings
from stash_pipeline.defs.resources import StashResource
from testkit.openai_server import ScriptedOpenAI

# the scripted model behind a real OpenAI-compatible HTTP endpoint, shared with the stage tests
from tests.integration.consolidation.conftest import model, server  # noqa: F401

# Partitioned asset checks are a Dagster 1.13 preview feature used on purpose.
warnings.filterwarnings("ignore", category=dg.PreviewWarning)
warnings.filterwarnings("ignore", category=dg.BetaWarning)


@pytest.fixture(scope="session")
def empty_instance_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The home of an empty Dagster test instance, its SQLite storage set up once a session
    (about a second each time; copying the files takes a tenth of that)."""
    home = tmp_path_factory.mktemp("dagster_empty")
    with dg.instance_for_test(temp_dir=str(home)):
        pass
    return home


@pytest.fixture
def instance(empty_instance_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dg.DagsterInstance]:
    """A fresh Dagster test instance for the test: a copy of the empty one, nothing shared."""
    home = tmp_path_factory.mktemp("dagster")
    shutil.copytree(empty_instance_home, home, dirs_exist_ok=True)
    with dg.instance_for_test(temp_dir=str(home)) as inst:
        yield inst


def resource_for(settings: Settings, **overrides: object) -> StashResource:
    """A StashResource pointing at the test database with the hash embedder."""
    values: dict[str, object] = {
        "database_url": settings.database_url,
        "home": str(settings.home),
        "embedder": "hash",
        "vector_dim": settings.vector_dim,
    }
    values.update(overrides)
    return StashResource(**values)  # type: ignore[arg-type]


@pytest.fixture
def stash(settings: Settings) -> StashResource:
    """Resource with a (never called) reasoner configured, so model stages count as runnable."""
    return resource_for(settings, openai_base_url="http://127.0.0.1:9/v1", reasoner_model="scripted")


@pytest.fixture
def model_stash(settings: Settings, server: ScriptedOpenAI) -> StashResource:  # noqa: F811 (pytest fixture)
    """Resource whose reasoner talks to the scripted server; HTTP retries off so outages reach Dagster."""
    return resource_for(
        settings,
        openai_base_url=server.base_url,
        reasoner_model="scripted",
        reasoner_timeout_s=1.0,
        reasoner_max_retries=0,
        reasoner_backoff_s=0.01,
    )
