"""In-process limits: at most N events per key within a window (``SlidingWindow``), at
most N things in progress per key (``InFlight``), at most N turns a second per key, taken
one at a time (``Pacer``), at most N requests running and M waiting in all (``Admission``).

Used by the HTTP surface for what must stay cheap for the server and bounded for a
caller: failed bearer-token checks per client address, namespaces created per token,
requests in flight per token, token lookups of an address that keeps failing them, and
the requests one server process takes on at once.
Counts live in this process (a replica counts its own traffic); the number of keys is
bounded so a flood of distinct keys cannot grow memory without limit.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Hashable

import anyio


class SlidingWindow:
    """At most ``limit`` events per key in any ``window_s`` seconds."""

    def __init__(
        self,
        limit: int,
        window_s: float,
        *,
        max_keys: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window_s = window_s
        self.max_keys = max_keys
        self._clock = clock
        self._events: OrderedDict[Hashable, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def _recent(self, key: Hashable, now: float) -> deque[float]:
        events = self._events.get(key)
        if events is None:
            events = self._events[key] = deque()
            while len(self._events) > self.max_keys:  # forget the least recently used key
                self._events.popitem(last=False)
        else:
            self._events.move_to_end(key)
        while events and events[0] <= now - self.window_s:
            events.popleft()
        return events

    def allowed(self, key: Hashable) -> bool:
        """Whether one more event for ``key`` would stay within the limit (records nothing)."""
        with self._lock:
            return len(self._recent(key, self._clock())) < self.limit

    def acquire(self, key: Hashable, count: int = 1) -> bool:
        """Record ``count`` events if they fit in the window; False (nothing recorded) if not."""
        with self._lock:
            now = self._clock()
            events = self._recent(key, now)
            if len(events) + count > self.limit:
                return False
            events.extend([now] * count)
            return True

    def record(self, key: Hashable, count: int = 1) -> None:
        """Record ``count`` events whether or not they fit (they happened)."""
        with self._lock:
            now = self._clock()
            self._recent(key, now).extend([now] * count)

    def release(self, key: Hashable, count: int = 1) -> None:
        """Take back up to ``count`` of the latest events (a reservation that was not used)."""
        with self._lock:
            events = self._events.get(key)
            for _ in range(min(count, len(events or ()))):
                assert events is not None
                events.pop()


class InFlight:
    """At most ``limit`` things in progress per key at once, on the event loop.

    ``async with in_flight.slot(key) as got``: ``got`` is True once a place is taken
    (held until the block ends), or False when none came free within ``wait_s`` (a short
    burst waits; a key whose places are all held by slow work is refused). Keys with
    nothing in progress or waiting are forgotten.
    """

    def __init__(self, limit: int, wait_s: float) -> None:
        self.limit = limit
        self.wait_s = wait_s
        self._places: dict[Hashable, _Places] = {}

    @contextlib.asynccontextmanager
    async def slot(self, key: Hashable) -> AsyncIterator[bool]:
        places = self._places.get(key)
        if places is None:
            places = self._places[key] = _Places(self.limit)
        places.users += 1
        got = False
        try:
            with anyio.move_on_after(self.wait_s):
                await places.free.acquire()
                got = True
            try:
                yield got
            finally:
                if got:
                    places.free.release()
        finally:
            places.users -= 1
            if places.users == 0:
                del self._places[key]


class _Places:
    __slots__ = ("free", "users")

    def __init__(self, limit: int) -> None:
        self.free = anyio.Semaphore(limit)
        self.users = 0  # holding a place or waiting for one


class _Lane:
    __slots__ = ("lock", "next", "users")

    def __init__(self) -> None:
        self.lock = anyio.Lock()
        self.next = 0.0  # when the next turn may begin (event-loop time)
        self.users = 0


class Pacer:
    """At most ``rate`` turns a second per key, one at a time, in order of arrival.

    Nothing is refused: a caller waits for its turn (``async with pacer.turn(key)``). Lanes
    live on the event loop; one with no caller whose pace has run out is forgotten once
    there are more than ``max_keys``.
    """

    def __init__(self, rate: float, *, max_keys: int = 10_000) -> None:
        self.interval = 1.0 / rate
        self.max_keys = max_keys
        self._lanes: OrderedDict[Hashable, _Lane] = OrderedDict()

    @contextlib.asynccontextmanager
    async def turn(self, key: Hashable) -> AsyncIterator[None]:
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane()
            if len(self._lanes) > self.max_keys:
                self._forget_idle()
        lane.users += 1
        try:
            async with lane.lock:  # anyio's lock is fair: turns are taken in order of arrival
                wait = lane.next - anyio.current_time()
                if wait > 0:
                    await anyio.sleep(wait)
                lane.next = anyio.current_time() + self.interval
                yield
        finally:
            lane.users -= 1

    def _forget_idle(self) -> None:
        now = anyio.current_time()
        for key in [k for k, lane in self._lanes.items() if lane.users == 0 and lane.next <= now]:
            del self._lanes[key]


class Admission:
    """At most ``limit`` requests running at once, at most ``max_queue`` more waiting for a
    place, and each answered or refused within ``wait_s`` of its arrival; on the event loop.

    ``async with admission.enter(elapsed) as refused``: ``refused`` is None once the request
    holds a place (until the block ends); ``elapsed`` is the time it spent before asking
    (the token check, the body). It is why not otherwise: at once ``QUEUE_FULL``, or
    ``EXPECTED_WAIT`` when its expected wait (its place in the queue times the recent
    service time, over ``limit``) and then its own call (the slow end of the recent ones,
    ``call_s``: a wait is the sum of many calls, its own is one) would end past ``wait_s``,
    since it would only wait to be late; ``WAITED`` when no place came in time to serve it before
    then, or it arrived at a free place already that late. Places go to waiters in order of
    arrival. ``retry_after_s()`` is when a refused request may expect a place: the time the
    requests ahead of it take, from the recent service time.
    """

    QUEUE_FULL = "queue_full"
    EXPECTED_WAIT = "expected_wait"
    WAITED = "waited"
    #: weight of the latest request in the service-time average
    SMOOTHING = 0.2
    #: the shortest and longest Retry-After in seconds; before any request has been timed,
    #: the longest wait allowed
    RETRY_MIN_S = 0.05
    RETRY_MAX_S = 30.0
    #: the recent calls ``call_s`` looks at, and its quantile of their times
    RECENT = 50
    SLOW_QUANTILE = 0.9

    def __init__(
        self, limit: int, max_queue: int, wait_s: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit = limit
        self.max_queue = max_queue
        self.wait_s = wait_s
        self.running = 0
        #: the recent time a request holds its place, seconds (None until one has finished)
        self.service_s: float | None = None
        self._recent: deque[float] = deque(maxlen=self.RECENT)
        self._clock = clock
        self._waiters: deque[anyio.Event] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def expected_wait_s(self, position: int) -> float:
        """How long the ``position``-th waiter (1 = next) can expect to wait for a place."""
        return 0.0 if self.service_s is None else position * self.service_s / self.limit

    def call_s(self) -> float:
        """How long one request's own call may take: the slow end of the recent calls."""
        if not self._recent:
            return self.service_s or 0.0
        ordered = sorted(self._recent)
        return ordered[min(len(ordered) - 1, int(self.SLOW_QUANTILE * len(ordered)))]

    def retry_after_s(self) -> float:
        """When a request refused now may expect a place: what runs and waits ahead of it, done."""
        if self.service_s is None:
            return min(self.wait_s, self.RETRY_MAX_S)
        ahead = (self.running + self.waiting) * self.service_s / self.limit
        return round(min(max(ahead, self.RETRY_MIN_S), self.RETRY_MAX_S), 2)

    @contextlib.asynccontextmanager
    async def enter(self, elapsed: float = 0.0) -> AsyncIterator[str | None]:
        refused = await self._take(elapsed)
        if refused is not None:
            yield refused
            return
        started = self._clock()
        try:
            yield None
        finally:
            self._release(self._clock() - started)

    async def _take(self, elapsed: float) -> str | None:
        if self.running < self.limit and not self._waiters:
            if elapsed >= self.wait_s:  # late before it asked: the caller has its refusal at once
                return self.WAITED
            self.running += 1
            return None
        position = self.waiting + 1
        if position > self.max_queue:
            return self.QUEUE_FULL
        # what is left of its time once its own service is set aside
        budget = self.wait_s - elapsed - self.call_s()
        if budget <= 0 or self.expected_wait_s(position) > budget:
            return self.EXPECTED_WAIT
        turn = anyio.Event()
        self._waiters.append(turn)
        try:
            with anyio.move_on_after(budget):
                await turn.wait()
        except BaseException:  # cancelled (the client went away): give back a place handed over
            if turn.is_set():
                self._release(None)
            else:
                self._waiters.remove(turn)
            raise
        if turn.is_set():  # the releaser counted this request as running
            return None
        self._waiters.remove(turn)
        return self.WAITED

    def _release(self, held_s: float | None) -> None:
        if held_s is not None:
            self._recent.append(held_s)
            self.service_s = held_s if self.service_s is None else (
                self.SMOOTHING * held_s + (1 - self.SMOOTHING) * self.service_s
            )
        if self._waiters:  # the place passes to the first waiter: running stays the same
            self._waiters.popleft().set()
        else:
            self.running -= 1


def retry_after_header(seconds: float) -> bytes:
    """An HTTP Retry-After value (whole seconds, at least 1) for a wait of ``seconds``."""
    return str(max(1, math.ceil(seconds))).encode()


__all__ = ["Admission", "InFlight", "Pacer", "SlidingWindow", "retry_after_header"]
