"""A small driver for headless Chromium over the Chrome DevTools Protocol (CDP), for tests and bench.

    with Browser() as page:
        page.goto("http://127.0.0.1:3000/")
        page.fill("#token", token)
        page.click(text="Log in")
        page.wait_for_text("Runs")
        page.screenshot(tmp_path / "runs.png")

One Chromium process per ``Browser`` (``--headless --no-sandbox --remote-debugging-port=0``
with a throw-away profile), one page, one WebSocket (the ``websockets`` sync client) over
which every command is sent to that page's session. The rules:

* Nothing waits a fixed time: ``wait_for_text`` / ``wait_for`` / ``wait_until`` poll the
  page until a condition holds, and on timeout fail with the URL and the page's visible text.
* ``click`` and ``hover`` act as a user's mouse (``Input.dispatchMouseEvent`` at the centre
  of the element, scrolled into view if it is not), so menus and tooltips of a React app
  react; an element is found by CSS selector or, with ``text=``, as the innermost visible
  element whose text contains it.
* The viewport is 1280×800 unless told otherwise, so screenshots are comparable.
* ``close`` (or leaving the ``with`` block) ends the browser's whole process group and
  removes its profile, also after a failure.
"""

from __future__ import annotations

import base64
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
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

CHROMIUM = Path("/usr/bin/chromium")


class BrowserError(AssertionError):
    """A page did not do what a test expected (a timeout, a missing element, a script error)."""


#: the first visible element whose visible text contains the given text and none of whose children's does
_FIND_BY_TEXT = """(text) => {
  const visible = (el) => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const hits = [...document.querySelectorAll('body *')].filter((el) => (el.innerText || '').includes(text) && visible(el));
  return hits.find((el) => !hits.some((other) => other !== el && el.contains(other))) || null;
}"""


class Browser:
    """Headless Chromium with one page; a context manager that always cleans up."""

    def __init__(self, executable: Path = CHROMIUM, *, width: int = 1280, height: int = 800,
                 timeout_s: float = 60.0) -> None:
        self.executable, self.width, self.height, self.timeout_s = executable, width, height, timeout_s
        self._profile = Path(tempfile.mkdtemp(prefix="stash-chromium-"))
        self._ids = itertools.count(1)
        self._process: subprocess.Popen[bytes] | None = None
        self._ws: ClientConnection | None = None
        self._session = ""

    # -- lifecycle -------------------------------------------------------------------
    def __enter__(self) -> Browser:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Launch Chromium, connect to it and open a blank page of the configured size."""
        self._process = subprocess.Popen(
            [str(self.executable), "--headless", "--no-sandbox", "--remote-debugging-port=0",
             f"--user-data-dir={self._profile}", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", f"--window-size={self.width},{self.height}",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: close() ends renderers and helpers too
        )
        active = self._profile / "DevToolsActivePort"  # "<port>\n<browser path>"
        self.wait_until("Chromium's DevTools port", lambda: active.exists() and len(active.read_text().split()) == 2)
        port, path = active.read_text().split()
        self._ws = connect(f"ws://127.0.0.1:{port}{path}", max_size=None, open_timeout=self.timeout_s)
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self._session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                  session=False)["sessionId"]
        self.set_viewport(self.width, self.height)

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
            deadline = time.monotonic() + 10  # its helpers die a moment later
            with contextlib.suppress(ProcessLookupError):
                while time.monotonic() < deadline:
                    os.killpg(self._process.pid, 0)
                    time.sleep(0.1)
            self._process = None
        shutil.rmtree(self._profile, ignore_errors=True)

    # -- protocol --------------------------------------------------------------------
    def send(self, method: str, params: dict[str, Any] | None = None, *, session: bool = True,
             timeout_s: float | None = None) -> dict[str, Any]:
        """One CDP command (to the page's session unless ``session=False``); its result. Events are dropped."""
        if self._ws is None:
            raise BrowserError("the browser is not running")
        message: dict[str, Any] = {"id": next(self._ids), "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        self._ws.send(json.dumps(message))
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"no answer to {method} within {timeout_s or self.timeout_s} s")
            answer = json.loads(self._ws.recv(timeout=left))
            if answer.get("id") == message["id"]:
                if "error" in answer:
                    raise BrowserError(f"{method} failed: {answer['error']}")
                return dict(answer.get("result", {}))

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited); a thrown error fails."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise BrowserError(f"script failed: {details.get('exception', {}).get('description') or details}")
        return result.get("result", {}).get("value")

    # -- page ------------------------------------------------------------------------
    def set_viewport(self, width: int, height: int) -> None:
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def set_headers(self, headers: dict[str, str]) -> None:
        """Send these HTTP headers with every request of the page (e.g. ``Authorization``)."""
        self.send("Network.enable")
        self.send("Network.setExtraHTTPHeaders", {"headers": headers})

    def set_cookie(self, url: str, name: str, value: str) -> None:
        """A cookie for ``url``'s origin, as if the server had set it."""
        if not self.send("Network.setCookie", {"url": url, "name": name, "value": value}).get("success", True):
            raise BrowserError(f"cookie {name} refused for {url}")

    def goto(self, url: str) -> None:
        """Navigate and wait until the document has loaded (scripts may still be fetching data)."""
        answer = self.send("Page.navigate", {"url": url})
        if answer.get("errorText"):
            raise BrowserError(f"navigation to {url} failed: {answer['errorText']}")
        self.wait_until(f"{url} to load", lambda: self.evaluate("document.readyState") == "complete")

    @property
    def url(self) -> str:
        return str(self.evaluate("location.href"))

    def text(self) -> str:
        """The page's visible text."""
        return str(self.evaluate("document.body ? document.body.innerText : ''"))

    def wait_for_text(self, text: str, timeout_s: float | None = None) -> None:
        """Wait until the page's visible text contains ``text``."""
        self.wait_until(f"text {text!r}", lambda: text in self.text(), timeout_s)

    def wait_for(self, selector: str, timeout_s: float | None = None) -> None:
        """Wait until an element matches the CSS ``selector``."""
        self.wait_until(f"selector {selector!r}",
                   lambda: self.evaluate(f"!!document.querySelector({json.dumps(selector)})"), timeout_s)

    def fill(self, selector: str, value: str) -> None:
        """Set an input's value as typing would (React's value tracker sees it)."""
        script = f"""(() => {{ const el = document.querySelector({json.dumps(selector)});
          if (!el) return false; el.focus();
          const set = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(el), 'value').set;
          set.call(el, {json.dumps(value)});
          el.dispatchEvent(new Event('input', {{bubbles: true}})); el.dispatchEvent(new Event('change', {{bubbles: true}}));
          return true; }})()"""
        if not self.evaluate(script):
            raise BrowserError(f"no element {selector!r} to fill on {self.url}")

    def click(self, selector: str | None = None, *, text: str | None = None) -> None:
        """A left click at the centre of the element (by CSS selector, or the innermost one showing ``text``)."""
        x, y = self._centre(selector, text)
        self.move_mouse(x, y)
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})

    def hover(self, selector: str | None = None, *, text: str | None = None) -> None:
        """Move the mouse over the element (tooltips open on it)."""
        self.move_mouse(*self._centre(selector, text))

    def move_mouse(self, x: float, y: float) -> None:
        """Move the mouse to a point of the viewport (``0, 0``: away from anything that reacts to it)."""
        self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})

    def screenshot(self, path: Path) -> Path:
        """A PNG of the viewport, written to ``path``."""
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    # -- helpers ---------------------------------------------------------------------
    def _centre(self, selector: str | None, text: str | None) -> tuple[float, float]:
        if (selector is None) == (text is None):
            raise ValueError("give a selector or text=, not both")
        find = f"document.querySelector({json.dumps(selector)})" if selector else f"({_FIND_BY_TEXT})({json.dumps(text)})"
        script = f"""(() => {{ const el = {find}; if (!el) return null;
          el.scrollIntoView({{block: 'nearest', inline: 'nearest'}});  // only if not in view
          const r = el.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }})()"""
        found = self.evaluate(script)
        if not found:
            what = f"selector {selector!r}" if selector else f"text {text!r}"
            raise BrowserError(f"no visible element with {what} on {self.url}; the page shows:\n{self.text()[:3000]}")
        return float(found[0]), float(found[1])

    def wait_until(self, what: str, condition: Callable[[], Any], timeout_s: float | None = None) -> None:
        """Call ``condition`` every 0.25 s until it is true (a ``BrowserError`` counts as false); on timeout
        fail saying ``what`` was awaited and showing the page."""
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            with contextlib.suppress(BrowserError):
                if condition():
                    return
            if self._process is not None and self._process.poll() is not None:
                raise BrowserError(f"Chromium exited ({self._process.returncode}) while waiting for {what}")
            if time.monotonic() > deadline:
                shown = ""
                if self._session:
                    with contextlib.suppress(Exception):
                        shown = f" on {self.url}; the page shows:\n{self.text()[:3000]}"
                raise BrowserError(f"timed out after {timeout_s or self.timeout_s} s waiting for {what}{shown}")
            time.sleep(0.25)
