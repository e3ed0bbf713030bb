"""bench/console_paint.py at a tiny size: the store it builds, the pages it loads, its table.

The whole run once (a few hundred memories with the hash embedder's vectors in place of
MiniLM's, the real server, headless Chromium, one warm load a page), so the bench cannot
rot while the console's pages change; and its judging of loads, without a browser.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from bench import common, console_paint
from bench.browser_paint import CHROMIUM, Timing


def _timing(paint: float, status: int = 200, content_type: str = "text/html") -> Timing:
    return Timing(url="http://x/", status=status, first_contentful_paint_ms=paint, response_start_ms=30.0,
                  response_end_ms=40.0, request_start_ms=10.0, content_type=content_type)


def test_a_route_not_there_yet_is_told_from_a_page_that_answers_not_found() -> None:
    assert console_paint.not_there(_timing(50, 404, "text/plain"))
    assert not console_paint.not_there(_timing(50, 404, "text/html"))  # the page's own "not found"
    assert not console_paint.not_there(_timing(50, 200))


def test_the_verdict_takes_the_worst_load_and_the_baseline_is_subtracted() -> None:
    base = console_paint.PageTimes(console_paint.BASELINE, "/console/login", _timing(300), [_timing(100)] * 3)
    slow_first = console_paint.PageTimes("facts", "/console/facts", _timing(1200), [_timing(150), _timing(250)])
    broken = console_paint.PageTimes("fact", "/console/facts/1", _timing(100, 500), [_timing(100, 500)])
    skipped = console_paint.PageTimes("pipeline", "/console/pipeline", skipped="not there yet (404)")
    assert base.verdict() == "met"
    assert slow_first.verdict() == "**missed**"
    assert broken.verdict().startswith("**error**")
    table = console_paint.rows([base, slow_first, broken, skipped])
    assert len(table) == 4 and all(len(row) == len(console_paint.HEADERS) for row in table)
    assert table[1][2:5] == ["1200", "200 / 250", "+100"]
    assert table[1][6] == "20"  # server time: responseStart - requestStart
    assert table[3][-1] == "not there yet (404)"


def test_every_page_has_a_path_under_the_console() -> None:
    targets = console_paint.Targets(episode=7, fact=8, entity=9, word="deploy", question="Who is Bruno?")
    paths = [path for _, path in console_paint.pages(targets)]
    assert paths[0] == "/console/login" and all(p.startswith("/console/") for p in paths)
    assert "/console/episodes/7" in paths and "/console/erase/episode/7" in paths
    assert "/console/facts/8" in paths and "/console/entities/9" in paths
    assert "/console/recall?q=Who%20is%20Bruno%3F&ns=%2Fbench%2Frecall" in paths


def _vectors(texts: list[str], model: str | None = None) -> np.ndarray:
    """Unit vectors, one per text, in place of MiniLM's (no model is loaded)."""
    rng = np.random.default_rng(len(texts))
    out = rng.normal(size=(len(texts), 384)).astype(np.float32)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


@contextlib.contextmanager
def _in_process(store: Any) -> Iterator[tuple[str, str]]:
    """The same app as ``stash serve mcp --transport http`` under uvicorn in a thread (no
    subprocess start to wait for): base URL and an admin token."""
    import uvicorn

    from stash_pipeline.auth import create_token
    from stash_serve.http import build_app
    from stash_serve.mcp.server import build_server

    token = create_token(store, ["/"], ["admin"], name="paint test")["token"]
    port = common._free_port()
    app = build_app(store, build_server(store, auth=True), auth=True, host="127.0.0.1")
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="paint-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", token
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"needs Chromium at {CHROMIUM}")
def test_a_tiny_run_builds_serves_and_loads_every_page(store: Any, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(common, "dataset_vectors", _vectors)
    size = console_paint.SIDE_MEMORIES + 400  # 40 entities: their three relationships never collide
    targets, counts, times = console_paint.run(store, size, runs=1, serve=_in_process)
    assert counts["namespaces"] >= 5 and counts["hub_facts"] > 1 and counts["lineage"] > 0
    assert targets.word and targets.episode and targets.fact and targets.entity
    assert times[0].label == console_paint.BASELINE
    baseline, home = times[0], times[1]
    for page in (baseline, home):  # there from the start
        assert page.first is not None and page.first.status == 200 and len(page.warm) == 1
        assert 0 < page.first.first_contentful_paint_ms < 60_000
    for page in times:
        assert page.skipped or (page.first is not None and len(page.warm) == 1), page.label
    console_paint.report(size, 1, targets, counts, times)
    printed = capsys.readouterr().out
    assert "**Console first paint, " in printed and "**The store the pages read**" in printed
