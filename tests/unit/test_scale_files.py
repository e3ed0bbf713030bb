"""The scale profile's files: its dagster.yaml is the one dagster.yaml plus a run launcher
whose image, network and volume are the ones docker/compose.scale.yml gives, and the
launcher's package is pinned to the Dagster release."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import yaml

from stash_serve.up import DAGSTER_CONFIG

ROOT = Path(__file__).resolve().parents[2]


class ComposeLoader(yaml.SafeLoader):
    """YAML plus compose's ``!reset`` (an override that empties a list of the first file)."""


ComposeLoader.add_constructor("!reset", lambda loader, node: loader.construct_sequence(node))
SCALE = yaml.load((ROOT / "docker" / "compose.scale.yml").read_text(), Loader=ComposeLoader)
INSTANCE = yaml.safe_load((ROOT / "docker" / "scale" / "dagster.yaml").read_text())


def test_the_scale_instance_is_the_one_dagster_yaml_plus_a_run_launcher():
    one = yaml.safe_load((DAGSTER_CONFIG / "dagster.yaml").read_text())
    assert {k: v for k, v in INSTANCE.items() if k != "run_launcher"} == one
    assert (INSTANCE["run_launcher"]["module"], INSTANCE["run_launcher"]["class"]) == ("dagster_docker", "DockerRunLauncher")


def test_the_launcher_names_what_the_compose_file_creates():
    config = INSTANCE["run_launcher"]["config"]
    assert SCALE["networks"]["default"]["name"] == "stash-scale"
    daemon_env = SCALE["services"]["dagster-daemon"]["environment"]
    assert daemon_env["STASH_DAGSTER_RUN_NETWORK"] == "stash-scale"
    volume = SCALE["volumes"]["dagster_storage"]["name"]
    assert config["container_kwargs"]["volumes"] == [f"{volume}:/opt/stash/docker/storage"]
    # every setting a run reads from the environment reaches its container
    assert {"STASH_DATABASE_URL", "STASH_REASONER_MODEL", "STASH_DAGSTER_PG_PASSWORD"} <= set(config["env_vars"])


def test_dagster_docker_is_pinned_to_the_dagster_release():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = [*project["dependencies"], *project["optional-dependencies"]["docker"]]
    pins = dict(d.split("==", 1) for d in deps if re.fullmatch(r"[a-z-]+==[0-9.]+", d))
    assert pins["dagster-docker"] == pins["dagster-postgres"]  # the libraries' 0.x line of one release


def test_replicas_publish_nothing_and_believe_only_the_balancer():
    mcp, lb = SCALE["services"]["mcp"], SCALE["services"]["lb"]
    assert mcp["ports"] == []
    assert mcp["environment"]["STASH_TRUSTED_PROXIES"] == lb["networks"]["default"]["ipv4_address"]
    assert all(str(p).startswith("127.0.0.1:") for p in lb["ports"])
    haproxy = (ROOT / "docker" / "scale" / "haproxy.cfg").read_text()
    assert "option httpchk GET /readyz" in haproxy and "option forwardfor" in haproxy
    assert "cookie" not in haproxy  # no sticky sessions


def test_the_balancers_own_503_is_the_typed_busy_answer():
    """With no replica ready HAProxy answers from docker/scale/busy.http: a whole HTTP
    response (its Content-Length exact) that agents read as a replica's busy refusal."""
    from stash_serve.admission import BUSY_CODE, BUSY_ERROR

    haproxy = (ROOT / "docker" / "scale" / "haproxy.cfg").read_text()
    assert "errorfile 503 /usr/local/etc/haproxy/busy.http" in haproxy
    assert "./scale/busy.http:/usr/local/etc/haproxy/busy.http:ro" in SCALE["services"]["lb"]["volumes"]
    raw = (ROOT / "docker" / "scale" / "busy.http").read_bytes()
    head, body = raw.split(b"\r\n\r\n", 1)
    status, *fields = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (f.split(":", 1) for f in fields)}
    assert status == "HTTP/1.1 503 Service Unavailable"
    assert int(headers["retry-after"]) >= 1 and int(headers["content-length"]) == len(body)
    answer = json.loads(body)
    assert answer["id"] is None and answer["error"]["code"] == BUSY_CODE
    assert answer["error"]["data"]["error"] == BUSY_ERROR and answer["error"]["data"]["retry_after_s"] >= 1
