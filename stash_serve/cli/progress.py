"""Progress of long imports and exports on stderr: rows done, rows/s and ETA, redrawn in
place on a terminal and silent otherwise (so scripts and pipes see only the result)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

import click


class Meter:
    """``meter(label, done, total)`` callbacks drawn as one line per label."""

    #: seconds between redraws, so a fast loop does not spend its time printing
    INTERVAL = 0.2

    def __init__(self, verb: str, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.verb = verb
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self._label: str | None = None
        self._started = self._drawn = 0.0

    def __call__(self, label: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if label != self._label:
            self._end_line()
            self._label, self._started = label, now
        elif done < total and now - self._drawn < self.INTERVAL:
            return
        self._drawn = now
        elapsed = max(now - self._started, 1e-6)
        rate = done / elapsed
        eta = f"{(total - done) / rate:.0f}s" if rate > 0 and done < total else "–"
        click.echo(f"\r{self.verb} {label}: {done}/{total} rows, {rate:,.0f} rows/s, ETA {eta}   ",
                   nl=False, file=self.stream)

    def _end_line(self) -> None:
        if self._label is not None:
            click.echo("", file=self.stream)

    def close(self) -> None:
        if self.enabled:
            self._end_line()
            self._label = None
