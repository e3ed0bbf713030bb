"""Finding Dagster: configured, recorded by `stash up`, or absent (then callers fall back)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from stash_pipeline.config import load_settings
from stash_serve.runs import URL_FILE, BackgroundJobs, DagsterRuns, dagster_url
from tests.conftest import free_port


def test_the_url_comes_from_the_setting_then_the_file_stash_up_writes(tmp_path: Path) -> None:
    settings = load_settings(home=tmp_path, embedder="hash")
    assert dagster_url(settings) is None
    (tmp_path / URL_FILE).parent.mkdir(parents=True)
    (tmp_path / URL_FILE).write_text("http://127.0.0.1:3999/\n")
    assert dagster_url(settings) == "http://127.0.0.1:3999"
    configured = load_settings(home=tmp_path, embedder="hash", dagster_url="http://dagster.internal:3000")
    assert dagster_url(configured) == "http://dagster.internal:3000"


def test_an_unreachable_webserver_means_no_dagster_quickly(tmp_path: Path) -> None:
    settings = load_settings(home=tmp_path, embedder="hash", dagster_url=f"http://127.0.0.1:{free_port()}")
    started = time.monotonic()
    assert DagsterRuns.find(settings) is None
    assert time.monotonic() - started < 5


def test_background_jobs_return_at_once_and_record_the_outcome() -> None:
    jobs = BackgroundJobs()
    release = threading.Event()

    def slow(job: object) -> list[dict[str, object]]:
        release.wait(5)
        return [{"stage": "facts"}]

    job = jobs.start(["/a"], None, slow)
    assert job.status in {"queued", "running"}
    assert [j["job_id"] for j in jobs.list(["/a/b"])] == [job.id]  # inside the job's tree
    assert jobs.list(["/other"]) == []
    release.set()
    deadline = time.monotonic() + 5
    while job.status not in {"done", "failed"} and time.monotonic() < deadline:
        time.sleep(0.01)
    assert job.view()["status"] == "done" and job.reports == [{"stage": "facts"}]

    failing = jobs.start(["/a"], "facts", lambda job: 1 / 0)  # type: ignore[arg-type,return-value]
    while failing.status not in {"done", "failed"}:
        time.sleep(0.01)
    assert failing.status == "failed" and "ZeroDivisionError" in (failing.error or "")
