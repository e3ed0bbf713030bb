"""A minimal headless Chromium for the console bench: load a page, read its paint timings.

    with PaintBrowser() as browser:
        browser.set_headers({"Authorization": f"Bearer {token}"})
        timing = browser.load("http://127.0.0.1:8000/console/")
        timing.first_contentful_paint_ms, timing.response_end_ms, timing.status

One Chromium process (``--headless --no-sandbox --remote-debugging-port=0``, a throw-away
profile, its own process group), one page, one WebSocket (the ``websockets`` sync client)
carrying the Chrome DevTools Protocol. The rules:

* ``load`` goes to ``about:blank`` first, so every load is a new document with its own
  paint entries, then navigates and waits (polling, never sleeping a fixed time) until the
  document is complete and its first-contentful-paint entry exists.
* The times are the page's own (``performance``): first contentful paint and the navigation's
  ``responseStart`` / ``responseEnd``, all milliseconds from the navigation's start.
* ``close`` (or leaving the ``with`` block) ends the whole process group and removes the profile.

The tests have a fuller driver of their own; bench and tests do not import each other.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

CHROMIUM = Path("/usr/bin/chromium")

#: the navigation's status and times, and the first contentful paint (null until painted)
_TIMINGS = """(() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const fcp = performance.getEntriesByName('first-contentful-paint')[0];
  if (!nav || document.readyState !== 'complete') return null;
  return {status: nav.responseStatus || 0, responseStart: nav.responseStart, responseEnd: nav.responseEnd,
          requestStart: nav.requestStart, fcp: fcp ? fcp.startTime : null, url: location.href, contentType: document.contentType,
          bytes: nav.transferSize || 0};
})()"""


class PaintError(RuntimeError):
    """Chromium did not answer, a page did not load or never painted."""


@dataclass(frozen=True)
class Timing:
    """One load of one page, milliseconds from the start of its navigation."""

    url: str
    status: int
    first_contentful_paint_ms: float
    response_start_ms: float
    response_end_ms: float
    request_start_ms: float
    content_type: str = "text/html"

    @property
    def server_ms(self) -> float:
        """From sending the request to the first byte of the answer: the server's time plus a loopback trip."""
        return self.response_start_ms - self.request_start_ms


class PaintBrowser:
    """Headless Chromium with one page; a context manager that always cleans up."""

    def __init__(self, executable: Path = CHROMIUM, *, width: int = 1280, height: int = 800,
                 timeout_s: float = 60.0) -> None:
        self.executable, self.width, self.height, self.timeout_s = executable, width, height, timeout_s
        self._profile = Path(tempfile.mkdtemp(prefix="stash-paint-"))
        self._ids = itertools.count(1)
        self._process: subprocess.Popen[bytes] | None = None
        self._ws: ClientConnection | None = None
        self._session = ""

    def __enter__(self) -> PaintBrowser:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Launch Chromium and attach to a blank page of the configured size."""
        if not self.executable.exists():
            raise PaintError(f"no Chromium at {self.executable} (Debian: apt-get install -y chromium)")
        self._process = subprocess.Popen(
            [str(self.executable), "--headless", "--no-sandbox", "--remote-debugging-port=0",
             f"--user-data-dir={self._profile}", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", f"--window-size={self.width},{self.height}",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: close() ends renderers and helpers too
        )
        active = self._profile / "DevToolsActivePort"  # "<port>\n<browser path>"
        self._wait("Chromium's DevTools port", lambda: active.exists() and len(active.read_text().split()) == 2)
        port, path = active.read_text().split()
        self._ws = connect(f"ws://127.0.0.1:{port}{path}", max_size=None, open_timeout=self.timeout_s)
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self._session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                  session=False)["sessionId"]
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})

    def close(self) -> None:
        """Close the connection, end Chromium's process group and remove the profile."""
        if self._ws is not None:
            with contextlib.suppress(Exception):
                self.send("Browser.close", session=False, timeout_s=5)
            with contextlib.suppress(Exception):
                self._ws.close()
            self._ws = None
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait(timeout=30)
            self._process = None
        shutil.rmtree(self._profile, ignore_errors=True)

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: bool = True,
             timeout_s: float | None = None) -> dict[str, Any]:
        """One CDP command (to the page's session unless ``session=False``); its result. Events are dropped."""
        if self._ws is None:
            raise PaintError("the browser is not running")
        message: dict[str, Any] = {"id": next(self._ids), "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        self._ws.send(json.dumps(message))
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PaintError(f"no answer to {method} within {timeout_s or self.timeout_s} s")
            answer = json.loads(self._ws.recv(timeout=left))
            if answer.get("id") == message["id"]:
                if "error" in answer:
                    raise PaintError(f"{method} failed: {answer['error']}")
                return dict(answer.get("result", {}))

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page; a thrown error fails."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise PaintError(f"script failed: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def set_headers(self, headers: dict[str, str]) -> None:
        """Send these HTTP headers with every request of the page (e.g. ``Authorization``)."""
        self.send("Network.enable")
        self.send("Network.setExtraHTTPHeaders", {"headers": headers})

    def load(self, url: str) -> Timing:
        """A fresh load of ``url`` (after about:blank) and its timings, once it has painted."""
        self._navigate("about:blank")
        self._wait("about:blank", lambda: self.evaluate("location.href") == "about:blank")
        self._navigate(url)
        found: dict[str, Any] = {}

        def painted() -> bool:
            value = self.evaluate(_TIMINGS)
            if isinstance(value, dict) and value.get("url") != "about:blank" and value.get("fcp") is not None:
                found.update(value)
                return True
            return False

        self._wait(f"the first paint of {url}", painted, poll_s=0.02)
        return Timing(url=str(found["url"]), status=int(found["status"]),
                      first_contentful_paint_ms=float(found["fcp"]), response_start_ms=float(found["responseStart"]),
                      response_end_ms=float(found["responseEnd"]), request_start_ms=float(found["requestStart"]),
                      content_type=str(found.get("contentType") or ""))

    def _navigate(self, url: str) -> None:
        answer = self.send("Page.navigate", {"url": url})
        if answer.get("errorText"):
            raise PaintError(f"navigation to {url} failed: {answer['errorText']}")

    def _wait(self, what: str, condition: Callable[[], Any], poll_s: float = 0.1) -> None:
        deadline = time.monotonic() + self.timeout_s
        while True:
            with contextlib.suppress(PaintError):
                if condition():
                    return
            if self._process is not None and self._process.poll() is not None:
                raise PaintError(f"Chromium exited ({self._process.returncode}) while waiting for {what}")
            if time.monotonic() > deadline:
                raise PaintError(f"timed out after {self.timeout_s} s waiting for {what}")
            time.sleep(poll_s)
