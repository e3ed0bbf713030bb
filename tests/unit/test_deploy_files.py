"""The deployment files parse, point at entrypoints that exist, and share one dagster.yaml.

No Docker engine (nor the compose plugin) runs on CI machines, so this is the
YAML-structure check the deployment issue allows instead of `docker compose config`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from stash_serve.up import DAGSTER_CONFIG

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker" / "docker-compose.yml"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_compose_validates_with_docker_when_available():
    if not shutil.which("docker") or subprocess.run(["docker", "compose", "version"], capture_output=True).returncode:
        pytest.skip("docker compose plugin not installed here; structural checks below cover the file")
    # the database password has no default: compose refuses to start without one
    env = {**os.environ, "POSTGRES_PASSWORD": "a-test-password"}
    result = subprocess.run(["docker", "compose", "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True,
                            env=env)
    assert result.returncode == 0, result.stderr


def test_compose_has_the_services_of_the_deployment(compose):
    assert set(compose["services"]) >= {"postgres", "migrate", "mcp", "user-code", "dagster-webserver", "dagster-daemon"}
    pg = compose["services"]["postgres"]
    assert "pgvector" in pg["image"]
    assert pg["healthcheck"]["test"] and any("postgres_data" in v for v in pg["volumes"])
    for name in ("mcp", "user-code", "migrate"):
        deps = compose["services"][name]["depends_on"]
        assert all("condition" in d for d in deps.values())
    # nothing published beyond loopback; the MCP service keeps token auth (no --no-auth)
    for service in compose["services"].values():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:")
        assert "--no-auth" not in (service.get("command") or [])


def test_compose_entrypoints_exist(compose):
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    dagster_bins = {"dagster", "dagster-webserver", "dagster-daemon"}
    for name, service in compose["services"].items():
        # `${STASH_IMAGE:-stash:latest}`: the image name a variable may override (docker/smoke.sh)
        image = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", service.get("image", ""))
        if image.startswith("stash"):
            entry = (service.get("entrypoint") or ["stash"])[0]
            assert entry in scripts or entry in dagster_bins, (name, entry)
    # the user-code server loads this module: it must import
    module = compose["services"]["user-code"]["command"][compose["services"]["user-code"]["command"].index("-m") + 1]
    __import__(module)


def test_the_dagster_files_are_one_source_at_the_root() -> None:
    """The root dagster.yaml / workspace.yaml (read by `dagster dev` in a checkout) are the
    packaged files `stash up` uses, not copies that could drift."""
    for name in ("dagster.yaml", "workspace.yaml"):
        root, packaged = ROOT / name, DAGSTER_CONFIG / name
        assert root.is_file() and packaged.is_file(), name
        assert root.samefile(packaged) or root.read_bytes() == packaged.read_bytes(), name
    # no other dagster.yaml in the repository to drift from it; the scale profile's is this
    # file plus a run launcher, which tests/unit/test_scale_files.py holds it to
    others = [
        p for p in ROOT.rglob("dagster.y*ml")
        if not any(part.startswith((".venv", ".tmp_dagster_home")) for part in p.parts)  # not ours / a running `dagster dev`
        and not p.samefile(DAGSTER_CONFIG / "dagster.yaml")
        and p != ROOT / "docker" / "scale" / "dagster.yaml"
    ]
    assert others == [], others


def test_the_docker_image_uses_the_one_dagster_yaml() -> None:
    text = (ROOT / "docker" / "Dockerfile").read_text()
    assert "COPY stash_serve/dagster_config/dagster.yaml docker/workspace.yaml /opt/stash/docker/" in text


def test_the_docker_workspace_reaches_the_same_code_location(compose) -> None:
    root = yaml.safe_load((ROOT / "workspace.yaml").read_text())["load_from"]
    docker = yaml.safe_load((ROOT / "docker" / "workspace.yaml").read_text())["load_from"]
    ((_, local),) = [next(iter(entry.items())) for entry in root]
    ((kind, remote),) = [next(iter(entry.items())) for entry in docker]
    assert kind == "grpc_server" and remote["location_name"] == local["location_name"]
    server = compose["services"]["user-code"]["command"]
    assert server[server.index("-m") + 1] == local["module_name"]
    assert server[server.index("--location-name") + 1] == local["location_name"]
    assert f'{remote["port"]}' == server[server.index("-p") + 1] and remote["host"] == "user-code"


def test_dagster_yaml_uses_psycopg2_the_queue_and_the_partition_limit():
    cfg = yaml.safe_load((DAGSTER_CONFIG / "dagster.yaml").read_text())
    assert cfg["storage"]["postgres"]["postgres_db"]["scheme"] == "postgresql+psycopg2"
    assert cfg["run_coordinator"]["class"] == "QueuedRunCoordinator"
    limits = cfg["concurrency"]["runs"]["tag_concurrency_limits"]
    assert {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1} in limits
    assert cfg["telemetry"]["enabled"] is False


def test_dagster_yaml_passes_dagsters_schema(monkeypatch):
    from dagster._config import process_config
    from dagster._core.instance.config import dagster_instance_config_schema

    for var in ("HOST", "PORT", "USER", "PASSWORD", "DB"):
        monkeypatch.setenv(f"STASH_DAGSTER_PG_{var}", "5432" if var == "PORT" else "x")
    cfg = yaml.safe_load((DAGSTER_CONFIG / "dagster.yaml").read_text())
    result = process_config(dagster_instance_config_schema(), cfg)
    assert result.success, result.errors


def test_dockerfile_runs_as_non_root_without_build_tools():
    text = (ROOT / "docker" / "Dockerfile").read_text()
    final_stage = text.split("FROM python:3.11-slim\n", 1)[1]
    assert "USER stash" in final_stage
    assert "apt-get install" not in final_stage and "gcc" not in final_stage
    assert "--no-deps" not in text  # one `pip install .` brings the model files too


def test_compose_services_wait_for_serving_not_started(compose):
    """Healthy means serving: the webserver and daemon wait for user-code's gRPC health
    and for Dagster's tables (else DagsterUserCodeUnreachableError / a create race at start)."""
    services = compose["services"]
    for name in services:
        if name not in ("migrate", "dagster-migrate", "ollama"):
            assert services[name].get("healthcheck", {}).get("test"), name
    assert "grpc" in " ".join(services["user-code"]["healthcheck"]["test"])
    assert "/readyz" in " ".join(services["mcp"]["healthcheck"]["test"])
    assert services["dagster-migrate"]["command"] == ["instance", "migrate"]
    for name in ("dagster-webserver", "dagster-daemon"):
        deps = services[name]["depends_on"]
        assert deps["user-code"]["condition"] == "service_healthy", name
        assert deps["dagster-migrate"]["condition"] == "service_completed_successfully", name


def test_compose_compute_logs_are_writable_and_kept(compose):
    """Run workers (in user-code), the webserver and the daemon share $DAGSTER_HOME/storage
    on a volume; the image makes that directory the stash user's."""
    for name in ("user-code", "dagster-webserver", "dagster-daemon"):
        assert "dagster_storage:/opt/stash/docker/storage" in compose["services"][name]["volumes"], name
    assert "dagster_storage" in compose["volumes"]
    text = (ROOT / "docker" / "Dockerfile").read_text()
    assert "chown stash:stash /opt/stash/docker/storage" in text


def test_compose_defaults_are_the_products():
    from stash_pipeline.config import Settings

    text = COMPOSE.read_text()
    default = Settings.model_fields["embedder"].default
    assert f"STASH_EMBEDDER: ${{STASH_EMBEDDER:-{default}}}" in text
    assert f"STASH_EMBEDDER={default}" in (ROOT / ".env.example").read_text()
    assert "image: pgvector/pgvector:pg17" in text
