"""The Kubernetes deployment (deploy/kubernetes) renders and validates, offline.

* **Manifests.** The kustomization is rendered (``kubectl kustomize`` when kubectl is on
  PATH, else its resources read and its image set applied here, and the two agree where
  kubectl runs) and every object, the example Secrets included, is validated against the
  Kubernetes API's JSON schemas for each pinned Kubernetes version: kubernetes-validate's
  bundled schemas, strict (a field the API does not define is refused).
* **Wiring the schemas cannot see.** Probes on the paths and ports the product serves
  (``stash_serve.http``, ``stash_serve.dagster_ui``: the UI's probe Host passes its own
  Host check), container arguments parsed by the real ``stash`` CLI, Services, the
  autoscaler and the disruption budget selecting the pods they mean, every Secret and
  ConfigMap a pod reads defined here or by the chart, and the connection budget of the
  sizing (``stash_pipeline.db.budget``) fitting the server it names.
* **The Helm values** (dagster-values.yaml) against the chart's values schema for the
  sections they set (tests/deploy/dagster_chart_values.schema.json, its origin in its
  ``$comment``), with the Kubernetes fragments they carry against the API's definitions,
  and against the one dagster.yaml: the same limits, retries, retention and storage scheme.
  ``helm template`` of the real chart runs when helm is on PATH and STASH_DAGSTER_CHART names
  the chart (a directory or .tgz of dagster/dagster 1.13.27); the rendered objects are then
  validated like the manifests.

Each check is a function returning the problems it finds; the tests at the end break a copy
of a file (a probe port, an unknown field, a misspelt value, a budget past the server) and
require the check to say so.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import click
import jsonschema
import kubernetes_validate
import pytest
import yaml
from referencing import Registry, Resource

from stash_pipeline.db.budget import Budget
from stash_serve.cli import cli
from stash_serve.dagster_ui import HEALTH_PATH, Hosts
from stash_serve.http import OPEN_PATHS
from stash_serve.up import DAGSTER_CONFIG

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
VALUES = KUBE / "dagster-values.yaml"
CHART_SCHEMA = Path(__file__).with_name("dagster_chart_values.schema.json")
#: the oldest Kubernetes the manifests are for (autoscaling/v2, policy/v1 and the probes'
#: fields are older) and the newest kubernetes-validate bundles
KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")
#: the Helm release name the UI's ConfigMap names assume (dagster-ui.yaml)
RELEASE = "dagster"
#: PostgreSQL's superuser_reserved_connections default
RESERVED = 3


# ---------------------------------------------------------------------------------------
# rendering


def load_docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def render() -> list[dict[str, Any]]:
    """The kustomization's objects with its image set applied (what `kubectl kustomize` does
    for this one: plain resources, one image transformer)."""
    kustomization = yaml.safe_load((KUBE / "kustomization.yaml").read_text())
    assert set(kustomization) <= {"apiVersion", "kind", "resources", "images"}, "render() handles only these"
    images = {i["name"]: f'{i["newName"]}:{i["newTag"]}' for i in kustomization.get("images", [])}
    objects = [doc for name in kustomization["resources"] for doc in load_docs(KUBE / name)]
    for obj in objects:
        for container in pod_spec(obj).get("containers", []) if pod_spec(obj) else []:
            container["image"] = images.get(container["image"], container["image"])
    return objects


def pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    if obj["kind"] in ("Deployment", "Job", "StatefulSet", "DaemonSet"):
        return obj["spec"]["template"]["spec"]
    return None


def by_kind(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return render()


@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    return yaml.safe_load(VALUES.read_text())


def test_kustomize_renders_what_the_test_validates(objects):
    kubectl = shutil.which("kubectl")
    if not kubectl:
        pytest.skip("kubectl not on PATH; the test's own rendering of the kustomization is validated below")
    result = subprocess.run([kubectl, "kustomize", str(KUBE)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    rendered = [doc for doc in yaml.safe_load_all(result.stdout) if doc]

    def key(objs):
        return sorted(json.dumps(o, sort_keys=True) for o in objs)

    assert key(rendered) == key(objects)


def test_every_manifest_is_listed_or_an_example():
    listed = set(yaml.safe_load((KUBE / "kustomization.yaml").read_text())["resources"])
    manifests = {p.name for p in KUBE.glob("*.yaml")} - {"kustomization.yaml", "dagster-values.yaml"}
    assert manifests - listed == {"secrets.example.yaml"}


# ---------------------------------------------------------------------------------------
# the Kubernetes API's schemas


def api_problems(objs: list[dict[str, Any]], version: str) -> list[str]:
    problems = []
    for obj in objs:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = "/".join(str(p) for p in exc.absolute_path)
            problems.append(f"{obj['kind']}/{obj['metadata']['name']} at {path}: {exc.message}")
    return problems


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_manifests_pass_the_api_schemas(objects, version):
    examples = load_docs(KUBE / "secrets.example.yaml")
    kinds = {(o["apiVersion"], o["kind"]) for o in objects}
    assert {("apps/v1", "Deployment"), ("v1", "Service"), ("autoscaling/v2", "HorizontalPodAutoscaler"),
            ("policy/v1", "PodDisruptionBudget"), ("batch/v1", "Job")} <= kinds
    assert api_problems([*objects, *examples], version) == []


def definitions(version: str) -> dict[str, Any]:
    """The API's shared definitions (strict) that kubernetes-validate bundles for ``version``."""
    major_minor = ".".join(version.split(".")[:2])
    folder = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    (found,) = [p for p in folder.glob(f"v{major_minor}.*-local-strict")]
    return json.loads((found / "_definitions.json").read_text())


def k8s_validator(schema: dict[str, Any], version: str) -> jsonschema.Draft202012Validator:
    defs = definitions(version)
    registry = Registry().with_resource(defs["$id"], Resource.from_contents(defs))
    return jsonschema.Draft202012Validator(schema, registry=registry)


# ---------------------------------------------------------------------------------------
# wiring


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod_spec(obj)
    return spec["containers"] if spec else []


def port_of(container: dict[str, Any], port: int | str) -> int | None:
    """The container port a probe or Service names (by number or by name), else None."""
    for declared in container.get("ports", []):
        if port in (declared["containerPort"], declared.get("name")):
            return declared["containerPort"]
    return None


def cli_problems(container: dict[str, Any]) -> list[str]:
    """The container's command parsed by the real `stash` CLI (unknown options, bad values)."""
    if container.get("command") != ["stash"]:
        return [f"{container['name']}: command {container.get('command')} is not the stash CLI"]
    args = list(container["args"])
    ctx = cli.make_context("stash", list(args), resilient_parsing=False)
    command: click.Command = cli
    try:
        while isinstance(command, click.Group) and args:
            _, command, args = command.resolve_command(ctx, args)
            ctx = command.make_context(command.name, list(args), parent=ctx)
            args = list(ctx.protected_args) + list(ctx.args) if isinstance(command, click.Group) else []
    except click.UsageError as exc:
        return [f"{container['name']}: {exc.format_message()}"]
    return []


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def probe_problems(objects: list[dict[str, Any]]) -> list[str]:
    problems = []
    for obj in objects:
        for c in containers(obj):
            if c["command"] != ["stash"] or c["args"][:2] not in (["serve", "mcp"], ["serve", "dagster-ui"]):
                continue
            where = f"{obj['metadata']['name']}/{c['name']}"
            serving = int(option(c["args"], "--port"))
            for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                probe = c.get(kind)
                if not probe:
                    problems.append(f"{where}: no {kind}")
                    continue
                get = probe["httpGet"]
                if port_of(c, get["port"]) != serving:
                    problems.append(f"{where}: {kind} port {get['port']!r} is not the port served ({serving})")
                if c["args"][1] == "mcp":
                    if get["path"] not in OPEN_PATHS:
                        problems.append(f"{where}: {kind} path {get['path']} needs a token or does not exist")
                else:
                    host = next((h["value"] for h in get.get("httpHeaders", []) if h["name"] == "Host"), "10.1.2.3")
                    allowed = Hosts(option(c["args"], "--host"),
                                    [a for i, a in enumerate(c["args"]) if c["args"][i - 1] == "--allow-host"])
                    if get["path"] != HEALTH_PATH or not allowed.allowed(host):
                        problems.append(f"{where}: {kind} {get['path']} with Host {host} is refused by the UI")
            if c["args"][1] == "mcp" and c["readinessProbe"]["httpGet"]["path"] != "/readyz":
                problems.append(f"{where}: readiness is /readyz (ready to serve a recall)")
    return problems


def selection_problems(objects: list[dict[str, Any]]) -> list[str]:
    problems = []
    pods = {o["metadata"]["name"]: o for o in objects if pod_spec(o)}

    def selected(selector: dict[str, str]) -> list[dict[str, Any]]:
        return [o for o in pods.values()
                if selector.items() <= o["spec"]["template"]["metadata"]["labels"].items()]

    for obj in objects:
        name = f"{obj['kind']}/{obj['metadata']['name']}"
        if obj["kind"] == "Service":
            targets = selected(obj["spec"]["selector"])
            if not targets:
                problems.append(f"{name} selects no pods")
            for port in obj["spec"]["ports"]:
                if not all(any(port_of(c, port["targetPort"]) for c in containers(t)) for t in targets):
                    problems.append(f"{name}: targetPort {port['targetPort']!r} is no container port")
        elif obj["kind"] == "PodDisruptionBudget":
            if not selected(obj["spec"]["selector"]["matchLabels"]):
                problems.append(f"{name} selects no pods")
        elif obj["kind"] == "HorizontalPodAutoscaler":
            ref = obj["spec"]["scaleTargetRef"]
            if ref["name"] not in pods or pods[ref["name"]]["kind"] != ref["kind"]:
                problems.append(f"{name} scales {ref['kind']}/{ref['name']}, not defined here")
            elif "replicas" in pods[ref["name"]]["spec"]:
                problems.append(f"{name}: its Deployment sets replicas, reset on every apply")
        elif obj["kind"] == "Deployment":
            match = obj["spec"]["selector"]["matchLabels"]
            if not match.items() <= obj["spec"]["template"]["metadata"]["labels"].items():
                problems.append(f"{name}: the selector does not match its pods")
    return problems


def reference_problems(objects: list[dict[str, Any]], values: dict[str, Any]) -> list[str]:
    """Every Secret and ConfigMap (and key) a pod reads exists: here, among the example
    Secrets, or made by the chart for the release (its instance and workspace ConfigMaps)."""
    examples = load_docs(KUBE / "secrets.example.yaml")
    secrets = {s["metadata"]["name"]: set(s["stringData"]) for s in examples}
    configmaps = {o["metadata"]["name"]: set(o["data"]) for o in objects if o["kind"] == "ConfigMap"}
    configmaps |= {f"{RELEASE}-instance": {"dagster.yaml"}, f"{RELEASE}-workspace-yaml": {"workspace.yaml"}}
    problems = []

    def need(kind: str, name: str, key: str | None, where: str) -> None:
        known = secrets if kind == "Secret" else configmaps
        if name not in known or (key is not None and key not in known[name]):
            problems.append(f"{where}: {kind} {name}{'/' + key if key else ''} is defined nowhere")

    for obj in objects:
        spec = pod_spec(obj)
        if not spec:
            continue
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        for c in spec["containers"]:
            for source in c.get("envFrom", []):
                if "secretRef" in source:
                    need("Secret", source["secretRef"]["name"], None, where)
                else:
                    need("ConfigMap", source["configMapRef"]["name"], None, where)
            for var in c.get("env", []):
                ref = var.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    need("Secret", ref["name"], ref["key"], where)
        for volume in spec.get("volumes", []):
            if "configMap" in volume:
                need("ConfigMap", volume["configMap"]["name"], None, where)
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    deployments = values["dagster-user-deployments"]["deployments"]
    for source in [*launcher["envSecrets"], *(s for d in deployments for s in d["envSecrets"])]:
        need("Secret", source["name"], None, "dagster-values.yaml")
    for source in [*launcher["envConfigMaps"], *(s for d in deployments for s in d["envConfigMaps"])]:
        need("ConfigMap", source["name"], None, "dagster-values.yaml")
    need("Secret", values["global"]["postgresqlSecretName"], "postgresql-password", "dagster-values.yaml")
    return problems


def budget(objects: list[dict[str, Any]], values: dict[str, Any]) -> Budget:
    config = by_kind(objects, "ConfigMap", "stash-config")
    env = config["data"]
    hpa = by_kind(objects, "HorizontalPodAutoscaler", "stash-mcp")
    return Budget(
        replicas=hpa["spec"]["maxReplicas"],
        pool_max=int(env["STASH_DB_POOL_MAX"]),
        runs=values["concurrency"]["runs"]["maxConcurrentRuns"],
        max_connections=int(config["metadata"]["annotations"]["stash/max-connections"]),
        reserved=RESERVED,
        open_now=0,
        workers=int(env["STASH_HTTP_WORKERS"]),
    )


def sizing_problems(objects: list[dict[str, Any]], values: dict[str, Any]) -> list[str]:
    """The sizing of README.md: the budget the services check counts the autoscaler's most
    replicas and the chart's most runs, one worker per 1-vCPU replica, and fits the server."""
    env = by_kind(objects, "ConfigMap", "stash-config")["data"]
    hpa = by_kind(objects, "HorizontalPodAutoscaler", "stash-mcp")["spec"]
    (mcp,) = containers(by_kind(objects, "Deployment", "stash-mcp"))
    problems = []
    if int(env["STASH_DB_BUDGET_REPLICAS"]) != hpa["maxReplicas"]:
        problems.append("STASH_DB_BUDGET_REPLICAS is not the autoscaler's maxReplicas")
    if int(env["STASH_DB_BUDGET_RUNS"]) != values["concurrency"]["runs"]["maxConcurrentRuns"]:
        problems.append("STASH_DB_BUDGET_RUNS is not the chart's concurrency.runs.maxConcurrentRuns")
    workers = int(option(mcp["args"], "--workers"))
    cpu = mcp["resources"]["requests"]["cpu"]
    cores = int(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu)
    if workers != int(env["STASH_HTTP_WORKERS"]) or workers != max(1, int(cores)):
        problems.append(f"{workers} worker(s) for {cpu} CPU: one worker per core requested")
    if mcp["resources"]["requests"] != mcp["resources"]["limits"]:
        problems.append("the MCP replica's requests and limits differ: the sizing counts one fixed replica")
    if hpa["minReplicas"] < 2:
        problems.append("minReplicas below 2: a drained node leaves nothing serving")
    b = budget(objects, values)
    if not b.fits:
        problems.append(f"connection budget: {b.spelled()} does not fit max_connections {b.max_connections}")
    return problems


def test_probes_use_the_endpoints_the_product_serves(objects):
    assert probe_problems(objects) == []


def test_container_arguments_parse_with_the_stash_cli(objects):
    stash = [c for o in objects for c in containers(o) if c.get("command") == ["stash"]]
    assert len(stash) == 3  # the MCP service, the UI, the migration
    assert [p for c in stash for p in cli_problems(c)] == []


def test_services_autoscaler_and_budget_select_their_pods(objects):
    assert selection_problems(objects) == []


def test_every_secret_and_config_map_read_is_defined(objects, values):
    assert reference_problems(objects, values) == []


def test_the_sizing_fits_the_connection_budget(objects, values):
    assert sizing_problems(objects, values) == []
    b = budget(objects, values)
    # the figures README.md and docs/deploy.md give
    assert (b.replicas, b.workers, b.pool_max, b.runs, b.need, b.max_connections) == (5, 1, 10, 32, 181, 250)


def test_pods_run_as_non_root_without_privilege_escalation(objects, values):
    for obj in objects:
        spec = pod_spec(obj)
        if spec:
            assert spec["securityContext"]["runAsNonRoot"] is True, obj["metadata"]["name"]
            for c in spec["containers"]:
                assert c["securityContext"]["allowPrivilegeEscalation"] is False, obj["metadata"]["name"]
    dockerfile = (KUBE / "Dockerfile").read_text()
    assert re.search(r"^USER \d+:\d+$", dockerfile, re.M), "runAsNonRoot needs a numeric user"
    run = values["runLauncher"]["config"]["k8sRunLauncher"]["runK8sConfig"]
    assert run["podSpecConfig"]["securityContext"]["runAsNonRoot"] is True


# ---------------------------------------------------------------------------------------
# the Helm values


def values_problems(values: dict[str, Any], version: str) -> list[str]:
    """The values against the chart's values schema (its sections set here), and the
    Kubernetes fragments the run launcher passes on against the API's definitions."""
    schema = json.loads(CHART_SCHEMA.read_text())
    # an error under anyOf (a section that may also be null) is reported by its deepest cause
    causes = [jsonschema.exceptions.best_match([e]) for e in k8s_validator(schema, version).iter_errors(values)]
    problems = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in causes]
    run = (values.get("runLauncher", {}).get("config", {}).get("k8sRunLauncher") or {}).get("runK8sConfig") or {}
    v1 = "https://kubernetes.io/api/_definitions.json#/$defs/io.k8s.api"
    fragments = [  # each completed with the one required field the launcher fills in itself
        ("containerConfig", f"{v1}.core.v1.Container", {"name": "dagster"}),
        ("podSpecConfig", f"{v1}.core.v1.PodSpec", {"containers": []}),
        ("jobSpecConfig", f"{v1}.batch.v1.JobSpec", {"template": {}}),
    ]
    for key, ref, filled in fragments:
        if run.get(key):
            validator = k8s_validator({"$ref": ref}, version)
            problems += [f"runK8sConfig/{key}/{'/'.join(map(str, e.absolute_path))}: {e.message}"
                         for e in validator.iter_errors({**filled, **run[key]})]
    return problems


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_helm_values_pass_the_charts_schema(values, version):
    assert values_problems(values, version) == []


def test_helm_values_say_what_the_one_dagster_yaml_says(values):
    one = yaml.safe_load((DAGSTER_CONFIG / "dagster.yaml").read_text())
    runs, pools = one["concurrency"]["runs"], one["concurrency"]["pools"]
    concurrency = values["concurrency"]
    assert concurrency["enabled"] is True
    assert concurrency["runs"]["tagConcurrencyLimits"] == runs["tag_concurrency_limits"]
    assert concurrency["pools"]["defaultLimit"] == pools["default_limit"]
    # the limits in one place only: Dagster refuses them in both the coordinator and `concurrency`
    queued = values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    assert queued["maxConcurrentRuns"] is None and not queued["tagConcurrencyLimits"]
    assert queued["blockOpConcurrencyLimitedRuns"] is None
    daemon = values["dagsterDaemon"]
    assert daemon["runMonitoring"]["enabled"] is one["run_monitoring"]["enabled"] is True
    assert daemon["runMonitoring"]["freeSlotsAfterRunEndSeconds"] == one["run_monitoring"][
        "free_slots_after_run_end_seconds"]
    assert daemon["runRetries"] == {"enabled": one["run_retries"]["enabled"],
                                    "maxRetries": one["run_retries"]["max_retries"],
                                    "retryOnAssetOrOpFailure": one["run_retries"]["retry_on_asset_or_op_failure"]}
    assert daemon["enabled"] and daemon["runCoordinator"]["type"] == one["run_coordinator"]["class"]
    assert values["scheduler"]["type"] == "DagsterDaemonScheduler"  # the daemon runs the sensors
    retention = values["retention"]
    assert retention["schedule"]["purgeAfterDays"] == one["retention"]["schedule"]["purge_after_days"]
    sensor = dict(retention["sensor"]["purgeAfterDays"])
    assert sensor.pop("started") == -1  # Dagster's own default, which the chart makes explicit
    assert sensor == one["retention"]["sensor"]["purge_after_days"]
    assert values["telemetry"]["enabled"] is one["telemetry"]["enabled"] is False
    pg = values["postgresql"]
    assert pg["enabled"] is False and values["generatePostgresqlPasswordSecret"] is False
    assert pg["postgresqlScheme"] == one["storage"]["postgres"]["postgres_db"]["scheme"]
    assert pg["postgresqlDatabase"] == "dagster"


def test_helm_values_run_the_stash_code_location_one_pod_per_run(values):
    root = yaml.safe_load((ROOT / "workspace.yaml").read_text())["load_from"]
    ((_, local),) = [next(iter(entry.items())) for entry in root]
    docker = yaml.safe_load((ROOT / "docker" / "workspace.yaml").read_text())["load_from"][0]["grpc_server"]
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    args = deployment["codeServerArgs"]
    # the chart's workspace names the location after the deployment
    assert deployment["name"] == option(args, "--location-name") == local["location_name"]
    assert option(args, "-m") == local["module_name"]
    assert importlib.util.find_spec(local["module_name"]) is not None
    assert deployment["port"] == docker["port"]
    launcher = values["runLauncher"]
    assert launcher["type"] == "K8sRunLauncher"
    command = launcher["config"]["k8sRunLauncher"]["runK8sConfig"]["containerConfig"]["command"]
    assert command[:2] == ["python", "-m"] and importlib.util.find_spec(command[2]) is not None
    assert values["dagsterWebserver"]["replicaCount"] == 0  # the bare webserver: no login
    images = {d["image"]["repository"] for d in (deployment, values["dagsterWebserver"], values["dagsterDaemon"])}
    assert len(images) == 1
    assert values["global"]["dagsterHome"] == "/opt/stash/docker"  # the image's, writable storage/
    assert "DAGSTER_HOME=/opt/stash/docker" in (ROOT / "docker" / "Dockerfile").read_text()


def test_the_image_adds_the_pinned_kubernetes_launcher():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = [*project["dependencies"], *project["optional-dependencies"]["k8s"]]
    pins = dict(d.split("==", 1) for d in deps if re.fullmatch(r"[a-z0-9-]+==[0-9.]+", d))
    assert pins["dagster-k8s"] == pins["dagster-postgres"]  # the libraries' 0.x line of one release
    dockerfile = (KUBE / "Dockerfile").read_text()
    assert "['optional-dependencies']['k8s']" in dockerfile and "import dagster_k8s" in dockerfile
    assert 'ENTRYPOINT ["python", "-m", "stash_serve.run_worker"]' in dockerfile


def test_the_real_chart_renders_when_helm_is_here(values, tmp_path):
    helm, chart = shutil.which("helm"), os.environ.get("STASH_DAGSTER_CHART")
    if not helm or not chart:
        pytest.skip("needs helm on PATH and STASH_DAGSTER_CHART (a local copy of dagster/dagster 1.13.27); "
                    "the values are validated against the chart's schema above instead")
    result = subprocess.run([helm, "template", RELEASE, chart, "-f", str(VALUES)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    rendered = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    names = {(o["kind"], o["metadata"]["name"]) for o in rendered}
    assert {("ConfigMap", f"{RELEASE}-instance"), ("ConfigMap", f"{RELEASE}-workspace-yaml")} <= names
    for version in KUBERNETES_VERSIONS:
        assert api_problems(rendered, version) == []
    instance = yaml.safe_load(by_kind(rendered, "ConfigMap", f"{RELEASE}-instance")["data"]["dagster.yaml"])
    from dagster._config import process_config
    from dagster._core.instance.config import dagster_instance_config_schema, validate_concurrency_config

    assert process_config(dagster_instance_config_schema(), instance).success
    validate_concurrency_config(instance)


# ---------------------------------------------------------------------------------------
# the checks can fail


def test_a_probe_on_the_wrong_port_or_path_is_caught(objects):
    broken = copy.deepcopy(objects)
    (mcp,) = containers(by_kind(broken, "Deployment", "stash-mcp"))
    mcp["readinessProbe"]["httpGet"]["port"] = 8081
    mcp["livenessProbe"]["httpGet"]["path"] = "/live"
    (ui,) = containers(by_kind(broken, "Deployment", "stash-dagster-ui"))
    del ui["startupProbe"]["httpGet"]["httpHeaders"]
    problems = probe_problems(broken)
    assert any("readinessProbe port 8081" in p for p in problems)
    assert any("livenessProbe path /live" in p for p in problems)
    assert any("stash-dagster-ui/ui: startupProbe" in p and "10.1.2.3" in p for p in problems)


def test_an_unknown_field_or_a_wrong_type_is_caught(objects):
    broken = copy.deepcopy(objects)
    deployment = by_kind(broken, "Deployment", "stash-mcp")
    deployment["spec"]["replica"] = 3  # not a field of DeploymentSpec
    (mcp,) = containers(deployment)
    mcp["ports"][0]["containerPort"] = "8080"  # a string where the API wants an integer
    problems = api_problems([deployment], KUBERNETES_VERSIONS[0])
    assert len(problems) == 1 and "Deployment/stash-mcp" in problems[0]
    del deployment["spec"]["replica"]
    assert "containerPort" in api_problems([deployment], KUBERNETES_VERSIONS[0])[0]


def test_a_bad_argument_a_stray_selector_or_a_missing_secret_is_caught(objects, values):
    broken = copy.deepcopy(objects)
    (mcp,) = containers(by_kind(broken, "Deployment", "stash-mcp"))
    mcp["args"] = [*mcp["args"], "--wrokers", "2"]
    assert "No such option" in cli_problems(mcp)[0]
    by_kind(broken, "Service", "stash-mcp")["spec"]["selector"] = {"app.kubernetes.io/name": "stash"}
    assert selection_problems(broken) == ["Service/stash-mcp selects no pods"]
    mcp["envFrom"][1]["secretRef"]["name"] = "stash-database"
    assert reference_problems(broken, values) == [
        "Deployment/stash-mcp: Secret stash-database is defined nowhere"]


def test_a_misspelt_or_misplaced_helm_value_is_caught(values):
    broken = copy.deepcopy(values)
    broken["runLauncher"]["config"]["k8sRunLauncher"]["envSecret"] = [{"name": "stash-db"}]
    broken["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]["maxConcurrentRuns"] = "32"
    broken["runLauncher"]["config"]["k8sRunLauncher"]["runK8sConfig"]["containerConfig"]["resource"] = {}
    broken["dagsterDeamon"] = {}
    problems = values_problems(broken, KUBERNETES_VERSIONS[0])
    assert any(p.startswith("runLauncher/config/k8sRunLauncher:") and "'envSecret' was unexpected" in p
               for p in problems)
    assert any(p.startswith("dagsterDaemon/runCoordinator/config/queuedRunCoordinator/maxConcurrentRuns:")
               for p in problems)
    assert any(p.startswith("runK8sConfig/containerConfig") and "resource" in p for p in problems)
    assert any("dagsterDeamon" in p for p in problems)


def test_a_budget_past_the_server_or_out_of_step_is_caught(objects, values):
    broken = copy.deepcopy(objects)
    by_kind(broken, "HorizontalPodAutoscaler", "stash-mcp")["spec"]["maxReplicas"] = 20
    problems = sizing_problems(broken, values)
    assert "STASH_DB_BUDGET_REPLICAS is not the autoscaler's maxReplicas" in problems
    assert any(p.startswith("connection budget:") for p in problems)
    more_runs = copy.deepcopy(values)
    more_runs["concurrency"]["runs"]["maxConcurrentRuns"] = 64
    assert "STASH_DB_BUDGET_RUNS is not the chart's concurrency.runs.maxConcurrentRuns" in sizing_problems(
        objects, more_runs)
