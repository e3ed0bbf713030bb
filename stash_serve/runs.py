"""Consolidation through runs: submit to Dagster when it runs, else a background worker.

``consolidate`` (MCP) and ``stash consolidate run`` must never wait on a model. When a
Dagster webserver is reachable — ``STASH_DAGSTER_URL``, or the one ``stash up`` started
(it writes its address to ``$STASH_HOME/dagster/webserver_url``) — they submit one run
per namespace through its GraphQL API, exactly what the UI's "Materialize" does, and
return the run ids at once; the runs appear in Dagster's run history, under its
concurrency limits. ``DagsterRuns.in_flight`` lists queued and running runs for
``consolidation_status``.

Without Dagster, the CLI runs inline (the operator's own terminal), and the MCP server
hands the work to ``BackgroundJobs``: a worker thread per call, a job handle returned at
once, progress visible in ``consolidation_status``.

Neither waits to find out that no model is configured: the ``consolidate`` operation
(``stash_pipeline.operations.consolidation``) chooses the stages up front
(``consolidation.runner.choose_stages``: without a model only those that need none, a
model stage asked for by name refused with the next step a Dagster run of it would fail
with), so a run id or job handle is only ever returned for work that can run.

This module speaks HTTP only (no Dagster import): the Dagster layer stays in
``stash_pipeline/defs``.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stash_pipeline import errors
from stash_pipeline.config import Settings

__all__ = ["BackgroundJobs", "DagsterRuns", "Job", "dagster_url"]

#: where `stash up` records its webserver's address, under STASH_HOME
URL_FILE = Path("dagster") / "webserver_url"
#: the admin token `stash up` writes (``stash_serve.up.ensure_admin_token``)
TOKEN_FILE = Path("admin-token")
#: a job of the stage table's code location (how the location is recognised)
MARKER_JOB = "rebuild_facts"
#: Dagster's implicit job that materializes any asset selection
ASSET_JOB = "__ASSET_JOB"
IN_FLIGHT = ["QUEUED", "NOT_STARTED", "STARTING", "STARTED"]
#: seconds to wait for the webserver before deciding Dagster is not running
PROBE_TIMEOUT_S = 2.0

_LOCATIONS = """
{ workspaceOrError { __typename ... on Workspace { locationEntries { name
    locationOrLoadError { __typename ... on RepositoryLocation { repositories { name jobs { name } } } } } } } }
"""
_ADD_PARTITION = """
mutation Add($name: String!, $key: String!, $repo: RepositorySelector!) {
  addDynamicPartition(partitionsDefName: $name, partitionKey: $key, repositorySelector: $repo) {
    __typename ... on PythonError { message } ... on UnauthorizedError { message } } }
"""
_LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on Error { message }
    ... on RunConfigValidationInvalid { errors { message } } } }
"""
_RUNS = """
query Runs($filter: RunsFilter!) {
  runsOrError(filter: $filter, limit: 500) {
    __typename ... on Runs { results { runId status creationTime tags { key value } } } } }
"""


def dagster_url(settings: Settings) -> str | None:
    """The configured webserver address, or the one `stash up` recorded (None: neither)."""
    if settings.dagster_url:
        return settings.dagster_url.rstrip("/")
    recorded = settings.home / URL_FILE
    if recorded.is_file():
        text = recorded.read_text(encoding="utf-8").strip()
        return text.rstrip("/") or None
    return None


def dagster_token(settings: Settings) -> str | None:
    """The admin token to present to the guarded UI: the setting, else the one `stash up` wrote."""
    if settings.dagster_token is not None:
        return settings.dagster_token.get_secret_value()
    path = settings.home / TOKEN_FILE
    with contextlib.suppress(OSError):
        return path.read_text(encoding="utf-8").strip() or None
    return None


@dataclass
class DagsterRuns:
    """Submits and lists consolidation runs through a Dagster webserver's GraphQL API,
    presenting an admin token (the UI `stash up` and compose start requires one)."""

    url: str
    timeout_s: float = 10.0
    token: str | None = field(default=None, repr=False)
    _repository: dict[str, str] | None = field(default=None, repr=False)

    @classmethod
    def find(cls, settings: Settings) -> DagsterRuns | None:
        """A client for the running webserver, or None when none answers."""
        url = dagster_url(settings)
        if url is None:
            return None
        client = cls(url, token=dagster_token(settings))
        try:
            client.repository()
        except errors.StashError:
            return None
        return client

    def post(self, query: str, variables: dict[str, Any] | None = None, timeout: float | None = None) -> Any:
        request = urllib.request.Request(
            f"{self.url}/graphql",
            data=json.dumps({"query": query, "variables": variables or {}}).encode(),
            headers={"Content-Type": "application/json",
                     **({"Authorization": f"Bearer {self.token}"} if self.token else {})},
        )
        try:
            # only http(s) URLs reach here: the setting or the file `stash up` writes
            with urllib.request.urlopen(request, timeout=timeout or self.timeout_s) as response:
                body = json.loads(response.read())
        except (OSError, ValueError) as exc:
            raise errors.ConfigurationError(f"Dagster at {self.url} did not answer: {exc}") from exc
        if body.get("errors"):
            raise errors.ConfigurationError(f"Dagster at {self.url} refused the request: {body['errors'][0]}")
        return body["data"]

    def repository(self) -> dict[str, str]:
        """``{"repositoryLocationName", "repositoryName"}`` of Stash's code location."""
        if self._repository is None:
            data = self.post(_LOCATIONS, timeout=PROBE_TIMEOUT_S)["workspaceOrError"]
            for entry in data.get("locationEntries") or []:
                location = entry.get("locationOrLoadError") or {}
                for repo in location.get("repositories") or []:
                    if any(job["name"] == MARKER_JOB for job in repo["jobs"]):
                        self._repository = {"repositoryLocationName": entry["name"], "repositoryName": repo["name"]}
                        return self._repository
            raise errors.ConfigurationError(f"Dagster at {self.url} has no Stash code location loaded")
        return self._repository

    def launch(self, slug: str, stages: Sequence[str], *, trigger: str) -> str:
        """Submit one run of ``stages`` for namespace ``slug``; returns its run id at once."""
        repo = self.repository()
        # the discovery sensor adds partitions every 30 s; a brand-new namespace may not have one yet
        added = self.post(_ADD_PARTITION, {"name": "namespaces", "key": slug, "repo": repo})["addDynamicPartition"]
        if added["__typename"] not in ("AddDynamicPartitionSuccess", "DuplicateDynamicPartitionError"):
            raise errors.ConfigurationError(f"Dagster refused partition {slug}: {added.get('message', added)}")
        params = {
            "selector": {**repo, "jobName": ASSET_JOB, "assetSelection": [{"path": [stage]} for stage in stages]},
            "runConfigData": {},
            "mode": "default",
            "executionMetadata": {
                "tags": [
                    {"key": "dagster/partition", "value": slug},
                    {"key": "stash/trigger", "value": trigger},
                    {"key": "stash/stages", "value": ",".join(stages)},
                ]
            },
        }
        result = self.post(_LAUNCH, {"params": params})["launchRun"]
        if result["__typename"] != "LaunchRunSuccess":
            detail = result.get("message") or "; ".join(e["message"] for e in result.get("errors") or [])
            raise errors.ConfigurationError(f"Dagster did not launch the run for {slug}: {detail}")
        return str(result["run"]["runId"])

    def in_flight(self, slugs: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Queued and running stage runs, optionally only those of the given namespaces."""
        data = self.post(_RUNS, {"filter": {"statuses": IN_FLIGHT}})["runsOrError"]
        wanted = None if slugs is None else set(slugs)
        out = []
        for run in data.get("results") or []:
            tags = {t["key"]: t["value"] for t in run["tags"]}
            slug = tags.get("dagster/partition")
            if wanted is not None and slug not in wanted:
                continue
            out.append(
                {
                    "run_id": run["runId"],
                    "status": run["status"].lower(),
                    "namespace": slug,
                    "stages": tags.get("stash/stages", ""),
                    "trigger": tags.get("stash/trigger", ""),
                    "created_at": run["creationTime"],
                    "url": f"{self.url}/runs/{run['runId']}",
                }
            )
        return out


@dataclass
class Job:
    """One background consolidation (no Dagster): what it covers and how far it got."""

    id: str
    namespaces: list[str]
    stage: str | None  # the stages it runs, comma-separated (None: all)
    status: str = "queued"  # queued | running | done | failed
    created_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    reports: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    def view(self, within: Sequence[str] | None = None) -> dict[str, Any]:
        """The job as a caller whose trees are ``within`` (None: all) may see it.

        A job started on ``/`` covers other callers' trees too: a caller sees its own
        part of it (the roots inside its trees, or its trees inside the roots, and the
        reports of its namespaces), never another namespace's name or figures.
        """
        roots, reports, error = self.namespaces, self.reports, self.error
        if within is not None:
            inside = [ns for ns in roots if any(_within(ns, tree) for tree in within)]
            below = [tree for tree in within if any(_within(tree, ns) for ns in roots)]
            roots = sorted(set(inside) | set(below))
            reports = [r for r in reports if any(_within(str(r.get("namespace", "")), t) for t in within)]
            if error is not None and len(inside) < len(self.namespaces):
                error = "failed; the details concern namespaces outside your reach"
        return {
            "job_id": self.id,
            "status": self.status,
            "namespaces": roots,
            "stage": self.stage,
            "created_at": self.created_at,
            "finished_at": self.finished_at,
            "reports": reports,
            "error": error,
        }


class BackgroundJobs:
    """Consolidations running in worker threads of this process, newest kept (bounded)."""

    def __init__(self, keep: int = 100) -> None:
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._keep = keep

    def start(self, namespaces: list[str], stage: str | None, work: Callable[[Job], list[dict[str, Any]]]) -> Job:
        """Run ``work`` in a daemon thread; returns the job at once."""
        job = Job(id=uuid.uuid4().hex[:12], namespaces=namespaces, stage=stage)
        with self._lock:
            self._jobs[job.id] = job
            for old in sorted(self._jobs.values(), key=lambda j: j.created_at)[: max(0, len(self._jobs) - self._keep)]:
                if old.status in ("done", "failed"):
                    del self._jobs[old.id]

        def body() -> None:
            job.status = "running"
            try:
                job.reports = work(job)
                job.status = "done"
            except Exception as exc:  # the job records it; nobody waits on this thread
                job.error = f"{type(exc).__name__}: {exc}"
                job.status = "failed"
            finally:
                job.finished_at = time.time()

        threading.Thread(target=body, name=f"consolidate-{job.id}", daemon=True).start()
        return job

    def consolidate(
        self, store: Any, roots: list[str], slugs: list[str], stages: list[str] | None
    ) -> dict[str, Any]:
        """Start consolidating ``stages`` (None: all), checked by the caller, and answer at once:
        one Dagster run per namespace of ``slugs`` when Dagster runs, else a background job over
        ``roots``."""
        from stash_pipeline.consolidation import runner
        from stash_pipeline.stages import STAGE_NAMES

        dagster = DagsterRuns.find(store.settings)
        if dagster is not None:
            selected = list(stages) if stages else list(STAGE_NAMES)
            runs = [
                {"namespace": slug, "run_id": dagster.launch(slug, selected, trigger="mcp"), "stages": selected}
                for slug in slugs
            ]
            return {"mode": "dagster", "runs": runs, "dagster_url": dagster.url}

        def background(job: Job) -> list[dict[str, Any]]:
            reports: list[dict[str, Any]] = []
            for path in roots:
                reports.extend(r.to_json() for r in runner.run_tree(store, path, stages=stages))
                job.reports = list(reports)  # progress, tree by tree
            return reports

        return {"mode": "background", "job": self.start(roots, ",".join(stages) if stages else None, background).view()}

    def in_flight(self, settings: Settings, paths: list[str], slugs: list[str]) -> dict[str, Any]:
        """Runs queued or in flight for ``consolidation_status``: Dagster's (of ``slugs``) when
        it runs, else this process's jobs touching ``paths``."""
        dagster = DagsterRuns.find(settings)
        if dagster is not None:
            return {"mode": "dagster", "runs": dagster.in_flight(slugs)}
        return {"mode": "background", "runs": self.list(paths)}

    def list(self, namespaces: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Jobs touching any of ``namespaces`` (all when None), newest first, each showing only
        what lies in those trees (``Job.view``)."""
        wanted = None if namespaces is None else sorted(set(namespaces))
        with self._lock:
            jobs = sorted(self._jobs.values(), key=lambda j: j.created_at, reverse=True)
        return [
            job.view(wanted)
            for job in jobs
            if wanted is None or any(_within(ns, root) or _within(root, ns) for ns in wanted for root in job.namespaces)
        ]


def _within(slug: str, root: str) -> bool:
    return root == "/" or slug == root or slug.startswith(root + "/")
