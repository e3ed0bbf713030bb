"""The code location loads, its graph has exactly the stage dependencies, the deployment files are valid."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import dagster as dg
import pytest
import yaml

from stash_pipeline.defs import checks
from stash_pipeline.defs.assets import RETRY_POLICY
from stash_pipeline.defs.definitions import build_definitions
from stash_pipeline.defs.partitions import namespace_slug, partition_key
from stash_pipeline.stages import STAGES
from stash_serve.up import DAGSTER_CONFIG

ROOT = Path(__file__).resolve().parents[2]

defs = build_definitions(model="scripted")

EXPECTED_DEPS = {
    "episodes": set(),
    "facts": {"episodes"},
    "relationships": {"facts"},
    "causal_links": {"relationships", "facts"},
    "patterns": {"facts", "relationships"},
    "goal_progress": {"facts"},
    "hypothesis_evidence": {"facts"},
    "failure_patterns": {"episodes"},
    "profiles": {"facts"},
    "decay": {"facts"},
    "episode_embeddings": set(),
}


def test_definitions_load(instance: dg.DagsterInstance) -> None:
    dg.Definitions.validate_loadable(defs)
    assert {s.name for s in defs.sensors or []} == {
        "namespace_discovery_sensor",
        "watermark_sensor",
        "pending_vectors_sensor",
    }
    assert {s.name for s in defs.schedules or []} == {"decay_daily", "consolidation_sweep"}
    for definition in [*(defs.sensors or []), *(defs.schedules or [])]:
        assert definition.default_status.value == "RUNNING", definition.name


def test_asset_graph_has_exactly_the_stage_dependencies() -> None:
    graph = defs.resolve_asset_graph()
    deps = {
        key.to_user_string(): {p.to_user_string() for p in graph.get(key).parent_keys}
        for key in graph.get_all_asset_keys()
    }
    assert deps == EXPECTED_DEPS
    assert not graph.get(dg.AssetKey("episodes")).is_materializable  # external: written by `remember`


def test_stage_assets_declare_partitions_pools_retries_and_checks() -> None:
    for spec in STAGES:
        asset = defs.resolve_assets_def(spec.name)
        assert asset.partitions_def is not None and asset.partitions_def.name == "namespaces"
        assert asset.op.pool == spec.pool
        assert asset.op.retry_policy == RETRY_POLICY
        declared = {key.name for key in asset.check_keys}
        expected = {checks.ITEM_CHECK} | ({checks.LINEAGE_CHECK} if checks.lineage_kinds(spec) else set())
        assert declared == expected, spec.name
    assert {s.name for s in STAGES if s.pool == "model"} == {s.name for s in STAGES if s.needs_model}


@pytest.mark.parametrize("slug", ["/", "/projects", "/projects/x-1/sub_2"])
def test_namespace_slugs_are_valid_partition_keys(slug: str, instance: dg.DagsterInstance) -> None:
    key = partition_key(slug)
    instance.add_dynamic_partitions("namespaces", [key])  # raises on '...' or control characters
    assert instance.has_dynamic_partition("namespaces", key)
    assert namespace_slug(key) == slug


def _instance_config(tmp_path: Path) -> dict[str, object]:
    from dagster._core.instance.config import dagster_instance_config

    shutil.copy(DAGSTER_CONFIG / "dagster.yaml", tmp_path / "dagster.yaml")
    config, _ = dagster_instance_config(str(tmp_path))
    return dict(config)


@pytest.fixture
def pg_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var, value in {"HOST": "127.0.0.1", "PORT": "54320", "USER": "stash", "PASSWORD": "pw", "DB": "dagster"}.items():
        monkeypatch.setenv(f"STASH_DAGSTER_PG_{var}", value)


def test_dagster_yaml_validates_against_dagsters_schema(tmp_path: Path, pg_env: None) -> None:
    config = _instance_config(tmp_path)
    pg = config["storage"]["postgres"]["postgres_db"]  # type: ignore[index]
    assert pg["scheme"] == "postgresql+psycopg2"
    assert pg["db_name"] == {"env": "STASH_DAGSTER_PG_DB"}
    runs = config["concurrency"]["runs"]  # type: ignore[index]
    assert runs["tag_concurrency_limits"] == [
        {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
    ]
    assert config["concurrency"]["pools"]["default_limit"] >= 1  # type: ignore[index]
    assert config["run_monitoring"]["free_slots_after_run_end_seconds"] > 0  # type: ignore[index]
    assert config["run_retries"] == {"enabled": True, "max_retries": 2, "retry_on_asset_or_op_failure": False}
    assert config["telemetry"] == {"enabled": False}


def test_dagster_yaml_rejects_a_broken_key(tmp_path: Path, pg_env: None) -> None:
    from dagster._core.errors import DagsterInvalidConfigError
    from dagster._core.instance.config import dagster_instance_config

    text = (DAGSTER_CONFIG / "dagster.yaml").read_text().replace("free_slots_after_run_end_seconds", "free_slots_after")
    (tmp_path / "dagster.yaml").write_text(text)
    with pytest.raises(DagsterInvalidConfigError, match="free_slots_after"):
        dagster_instance_config(str(tmp_path))


def test_workspace_yaml_loads_the_definitions_module(instance: dg.DagsterInstance) -> None:
    workspace = yaml.safe_load((DAGSTER_CONFIG / "workspace.yaml").read_text())
    (entry,) = workspace["load_from"]
    module = entry["python_module"]["module_name"]
    assert module == "stash_pipeline.defs.definitions"
    loaded = __import__(module, fromlist=["defs"])
    # what the @definitions function `defs` returns when Dagster loads the location (calling
    # it here would leave Dagster's global load context pointing at this test's instance)
    assert loaded.build_definitions(model=loaded.reasoner_model()).resolve_assets_def("facts") is not None


def test_importing_the_code_location_reads_no_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is read at import time: an invalid STASH_* variable only fails when a run starts."""
    import importlib

    import stash_pipeline.defs.definitions as module

    monkeypatch.setitem(os.environ, "STASH_DB_PORT", "not-a-port")
    importlib.reload(module)  # would raise ConfigurationError if settings were loaded here
    from stash_pipeline.errors import ConfigurationError

    with pytest.warns(UserWarning, match="STASH_DB_PORT"):
        model = module.reasoner_model()  # the location still loads, versions without a model name
    assert model is None
    loaded = module.build_definitions(model=model)
    with pytest.raises(ConfigurationError, match="STASH_DB_PORT"):
        loaded.resources["stash"].settings()  # type: ignore[union-attr]


def test_dagster_yaml_storage_works_on_the_real_server(
    tmp_path: Path, pg_admin_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The instance opens on Postgres, in its own database, and can write events (NOTIFY path)."""
    import uuid

    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    name = f"dagster_t_{uuid.uuid4().hex[:10]}"
    parts = conninfo_to_dict(pg_admin_dsn)
    env = {
        "HOST": str(parts.get("host", "127.0.0.1")),
        "PORT": str(parts.get("port", "5432")),
        "USER": str(parts.get("user", "postgres")),
        "PASSWORD": str(parts.get("password", "")),
        "DB": name,
    }
    for var, value in env.items():
        monkeypatch.setenv(f"STASH_DAGSTER_PG_{var}", value)
    shutil.copy(DAGSTER_CONFIG / "dagster.yaml", tmp_path / "dagster.yaml")
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        with dg.DagsterInstance.from_config(str(tmp_path)) as inst:
            assert type(inst.run_storage).__name__ == "PostgresRunStorage"
            inst.add_dynamic_partitions("namespaces", ["/projects/x"])
            inst.report_runless_asset_event(dg.AssetMaterialization("episodes", partition="/projects/x"))
            assert inst.get_dynamic_partitions("namespaces") == ["/projects/x"]
            event = inst.get_latest_materialization_event(dg.AssetKey("episodes"))
            assert event is not None and event.asset_materialization.partition == "/projects/x"
    finally:
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_every_query_the_dagster_layer_names_exists() -> None:
    import re

    from stash_pipeline.db.sql import QUERIES

    source = "\n".join(p.read_text() for p in (ROOT / "stash_pipeline" / "defs").glob("*.py"))
    names = set(re.findall(r"\.(?:one|all|scalar|execute)\(\s*\"([a-z0-9_]+)\"", source))
    assert names >= {"stage_backlog", "dagster_namespaces_after", "dagster_namespace_slugs", "dagster_lineage_orphans"}
    assert names <= set(QUERIES)


def test_stage_code_versions_follow_the_model_name(instance: dg.DagsterInstance) -> None:
    """A model switch marks the model stages unsynced; SQL-only decay keeps its version.

    (Resolving definitions reads Dagster's current instance: ``instance`` keeps a live one.)
    """

    def versions(model: str | None) -> dict[str, str | None]:
        graph = build_definitions(model=model).resolve_asset_graph()
        return {spec.name: graph.get(dg.AssetKey(spec.name)).code_version for spec in STAGES}

    a, b = versions("model-a"), versions("model-b")
    assert all(a.values())
    assert {name for name in a if a[name] != b[name]} == {s.name for s in STAGES if s.needs_model}
