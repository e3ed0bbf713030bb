"""The deployment files keep the operator surfaces closed by default.

* The Docker socket (root on the host) is mounted into the Dagster daemon only, the
  service that starts run containers; never into the UI that people reach.
* No compose file has a database password to fall back on: every reference to
  ``POSTGRES_PASSWORD`` stops compose with a message while it is unset.
* The Dagster UI is served behind Stash's token check (``stash serve dagster-ui``), by the
  compose stack as by ``stash up``; nothing starts the bare ``dagster-webserver``.

Static checks of the files (no Docker engine here); ``docker compose config`` where the
plugin is installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
BASE, SCALE, SMOKE = DOCKER / "docker-compose.yml", DOCKER / "compose.scale.yml", DOCKER / "smoke" / "compose.smoke.yml"
COMPOSE_FILES = [BASE, SCALE, SMOKE]
#: ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?message}, ${NAME?message}
REFERENCE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-?+])?(?P<rest>[^}]*)\}")


class ComposeLoader(yaml.SafeLoader):
    """YAML plus compose's ``!reset``."""


ComposeLoader.add_constructor("!reset", lambda loader, node: loader.construct_sequence(node))


def load(path: Path) -> dict:
    return yaml.load(path.read_text(), Loader=ComposeLoader)


def merged_services() -> dict[str, dict]:
    """The scale stack's services, lists of the override appended as compose merges them."""
    services: dict[str, dict] = {}
    for path in (BASE, SCALE, SMOKE):
        for name, service in (load(path).get("services") or {}).items():
            into = services.setdefault(name, {})
            for key, value in service.items():
                if isinstance(value, list) and isinstance(into.get(key), list):
                    into[key] = [*into[key], *value]
                else:
                    into[key] = value
    return services


def test_the_docker_socket_reaches_the_daemon_only() -> None:
    holders = {name for name, service in merged_services().items()
               if any("docker.sock" in str(volume) for volume in service.get("volumes") or [])}
    assert holders == {"dagster-daemon"}
    with_group = {name for name, service in merged_services().items() if service.get("group_add")}
    assert with_group <= {"dagster-daemon"}
    for path in COMPOSE_FILES:
        text = path.read_text()
        for name, service in (load(path).get("services") or {}).items():
            if name != "dagster-daemon":
                assert "docker.sock" not in yaml.safe_dump(service), (path.name, name)
        assert text.count("/var/run/docker.sock:/var/run/docker.sock") <= 1, path.name


def test_no_compose_file_has_a_default_database_password() -> None:
    for path in COMPOSE_FILES:
        for match in REFERENCE.finditer(path.read_text()):
            if "PASSWORD" in match["name"] or "SECRET" in match["name"]:
                assert match["op"] == ":?" and match["rest"].strip(), (path.name, match[0])
    references = [m for m in REFERENCE.finditer(BASE.read_text()) if m["name"] == "POSTGRES_PASSWORD"]
    assert len(references) >= 3  # the server, the Stash DSN, Dagster's storage
    for path in [*COMPOSE_FILES, ROOT / ".env.example", DOCKER / "smoke" / "smoke.py", DOCKER / "scale" / "load_faults.py"]:
        assert "stash_dev_password" not in path.read_text(), path.name
    example = dict(
        line.split("=", 1) for line in (ROOT / ".env.example").read_text().splitlines()
        if line and not line.startswith("#") and "=" in line
    )
    assert example["POSTGRES_PASSWORD"] == ""
    # the scripts that start a stack of their own set one
    for script in ("smoke/smoke.py", "scale/load_faults.py"):
        assert 'os.environ.setdefault("POSTGRES_PASSWORD", secrets.token_hex(' in (DOCKER / script).read_text()


def test_compose_refuses_to_start_without_the_password() -> None:
    if not shutil.which("docker") or subprocess.run(["docker", "compose", "version"], capture_output=True).returncode:
        pytest.skip("docker compose plugin not installed here; the reference check above covers it")
    # this environment without the variable, and no docker/.env (a developer's own) read
    env = {k: v for k, v in os.environ.items() if k not in ("POSTGRES_PASSWORD", "DOCKER_GID")}
    result = subprocess.run(["docker", "compose", "--env-file", "/dev/null", "-f", str(BASE), "config", "-q"],
                            capture_output=True, text=True, env=env)
    assert result.returncode != 0 and "POSTGRES_PASSWORD" in result.stderr
    for files in ([BASE], [BASE, SCALE]):
        args = [a for f in files for a in ("-f", str(f))]
        ok = subprocess.run(["docker", "compose", "--env-file", "/dev/null", *args, "config", "-q"],
                            capture_output=True, text=True,
                            env={**env, "POSTGRES_PASSWORD": "0123456789abcdef", "DOCKER_GID": "999"})
        assert ok.returncode == 0, ok.stderr


def test_the_ui_is_served_behind_the_token_check() -> None:
    from stash_serve.up import dagster_ui_command

    assert dagster_ui_command(Path("/venv/bin"), 3000)[:3] == ["/venv/bin/stash", "serve", "dagster-ui"]
    for name, service in merged_services().items():
        assert (service.get("entrypoint") or [""])[0] != "dagster-webserver", name
    ui = load(BASE)["services"]["dagster-webserver"]
    assert "entrypoint" not in ui and ui["command"][:2] == ["serve", "dagster-ui"]  # the image's `stash`
    assert "/_stash/healthz" in " ".join(ui["healthcheck"]["test"])
    assert all(str(port).startswith("127.0.0.1:") for port in ui["ports"])


def test_scale_run_containers_stop_themselves_when_terminated() -> None:
    instance = yaml.safe_load((DOCKER / "scale" / "dagster.yaml").read_text())
    entrypoint = instance["run_launcher"]["config"]["container_kwargs"]["entrypoint"]
    assert entrypoint == ["python", "-m", "stash_serve.run_worker"]
