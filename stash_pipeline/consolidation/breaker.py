"""An endpoint's failed requests in a row, shared by every run, stage and process.

A reasoner counts each request that did not get an answer (connection error, timeout,
5xx, unreadable body); ``BREAKER_FAILURES`` in a row mark the endpoint down until
``BREAKER_COOLDOWN_S`` after the last one, and any answer clears it. While it is down a
run makes one request instead of a round of retries, and the watermark sensor requests
no model-stage run (``down_reason`` is its skip reason). Kept apart from the reasoner so
a sensor tick reads it without loading the OpenAI client.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stash_pipeline.db.gateway import Database

#: failed requests in a row (connection errors, timeouts, 5xx, unreadable bodies) that mark
#: an endpoint down
BREAKER_FAILURES = 3
#: how long an endpoint stays down after its last failed request
BREAKER_COOLDOWN_S = 600.0


class Breaker:
    """Failed requests in a row to one endpoint, shared by every run and process.

    ``BREAKER_FAILURES`` failures in a row mark the endpoint down until
    ``BREAKER_COOLDOWN_S`` after the last one; any answer clears it. The state is a row
    of ``settings`` (in memory only without a database), read once per reasoner.
    """

    def __init__(self, db: Database | None, endpoint: str) -> None:
        self.db = db
        self.endpoint = endpoint
        self.key = f"reasoner_breaker {endpoint}"
        self._lock = threading.Lock()
        self._loaded = db is None
        self.failures = 0
        self.since = ""
        self.error = ""  # the last failure, as model_calls records it
        self._last = 0.0  # monotonic time of the last failure

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        assert self.db is not None
        row = self.db.one("reasoner_breaker_get", key=self.key)
        if row:
            self.failures, self.since = int(row["failures"]), str(row["since"])
            self.error = str(row.get("error") or "")
            self._last = time.monotonic() - float(row["age_s"])

    def down(self) -> bool:
        """Whether the endpoint counts as down now."""
        with self._lock:
            self._load()
            return self.failures >= BREAKER_FAILURES and time.monotonic() - self._last < BREAKER_COOLDOWN_S

    def failed(self, error: str) -> int:
        """Count one failed request; returns the failures in a row."""
        with self._lock:
            self._load()
            self.error = error
            if self.db is not None:
                row = self.db.one("reasoner_breaker_fail", key=self.key, error=error, cooldown_s=BREAKER_COOLDOWN_S)
                assert row is not None
                self.failures, self.since = int(row["failures"]), str(row["since"])
            else:
                stale = time.monotonic() - self._last >= BREAKER_COOLDOWN_S
                self.failures = 1 if stale else self.failures + 1
                self.since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()) if stale else self.since
            self._last = time.monotonic()
            return self.failures

    def answered(self) -> None:
        """The endpoint answered (any HTTP response but 429/5xx): it is up."""
        with self._lock:
            self._load()
            if self.failures and self.db is not None:
                self.db.execute("reasoner_breaker_clear", key=self.key)
            self.failures = 0

    def down_reason(self) -> str:
        """Why model stages wait ("" while the endpoint is not down), for a sensor's skip reason."""
        if not self.down():
            return ""
        retry_in = max(0.0, BREAKER_COOLDOWN_S - (time.monotonic() - self._last))
        error = f": {self.error}" if self.error else ""
        return (
            f"model endpoint {self.endpoint} is down since {self.since} "
            f"({self.failures} failed requests in a row{error}); model stages wait, next try in {retry_in:.0f} s"
        )
