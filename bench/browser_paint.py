"""Paint timings of a page load in headless Chromium, for the console bench.

    with Browser() as browser:                 # testkit.browser: the tests' driver too
        browser.set_headers({"Authorization": f"Bearer {token}"})
        timing = load(browser, "http://127.0.0.1:8000/console/")
        timing.first_contentful_paint_ms, timing.response_end_ms, timing.status

``load`` goes to ``about:blank`` first, so every load is a new document with its own paint
entries, then navigates and waits until the document is complete and its
first-contentful-paint entry exists. The times are the page's own (``performance``): first
contentful paint and the navigation's ``responseStart`` / ``responseEnd``, all
milliseconds from the navigation's start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from testkit.browser import CHROMIUM, Browser, BrowserError

#: the navigation's status and times, and the first contentful paint (null until painted)
_TIMINGS = """(() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const fcp = performance.getEntriesByName('first-contentful-paint')[0];
  if (!nav || document.readyState !== 'complete') return null;
  return {status: nav.responseStatus || 0, responseStart: nav.responseStart, responseEnd: nav.responseEnd,
          requestStart: nav.requestStart, fcp: fcp ? fcp.startTime : null, url: location.href, contentType: document.contentType,
          bytes: nav.transferSize || 0};
})()"""


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


def load(browser: Browser, url: str) -> Timing:
    """A fresh load of ``url`` (after about:blank) and its timings, once it has painted."""
    browser.goto("about:blank")
    answer = browser.send("Page.navigate", {"url": url})
    if answer.get("errorText"):
        raise BrowserError(f"navigation to {url} failed: {answer['errorText']}")
    found: dict[str, Any] = {}

    def painted() -> bool:
        value = browser.evaluate(_TIMINGS)
        if isinstance(value, dict) and value.get("url") != "about:blank" and value.get("fcp") is not None:
            found.update(value)
            return True
        return False

    browser.wait_until(f"the first paint of {url}", painted)
    return Timing(url=str(found["url"]), status=int(found["status"]),
                  first_contentful_paint_ms=float(found["fcp"]), response_start_ms=float(found["responseStart"]),
                  response_end_ms=float(found["responseEnd"]), request_start_ms=float(found["requestStart"]),
                  content_type=str(found.get("contentType") or ""))


__all__ = ["CHROMIUM", "Browser", "Timing", "load"]
