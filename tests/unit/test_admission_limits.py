"""``stash_serve.limits.Admission``: places, a bounded queue served in order, refusals at once
or after the wait, the expected wait from the recent service time, and Retry-After."""

from __future__ import annotations

import anyio
import pytest

from stash_serve.limits import Admission, retry_after_header

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _hold(admission: Admission, outcomes: list[str | None], release: anyio.Event, order: list[int],
                n: int) -> None:
    async with admission.enter() as refused:
        outcomes.append(refused)
        if refused is None:
            order.append(n)
            await release.wait()


async def test_places_then_a_queue_then_refusal_at_once() -> None:
    admission = Admission(2, 2, wait_s=30)
    outcomes: list[str | None] = []
    order: list[int] = []
    release = anyio.Event()
    async with anyio.create_task_group() as tasks:
        for n in range(5):
            tasks.start_soon(_hold, admission, outcomes, release, order, n)
            await anyio.sleep(0.01)
        assert admission.running == 2 and admission.waiting == 2
        assert outcomes == [None, None, Admission.QUEUE_FULL]  # the fifth: at once
        release.set()
    assert outcomes == [None, None, Admission.QUEUE_FULL, None, None]
    assert order == [0, 1, 2, 3]  # waiters got their places in order of arrival
    assert admission.running == 0 and admission.waiting == 0
    assert admission.service_s is not None


async def test_a_waiter_is_refused_after_the_wait() -> None:
    admission = Admission(1, 5, wait_s=0.2)
    release = anyio.Event()
    outcomes: list[str | None] = []
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_hold, admission, outcomes, release, [], 0)
        await anyio.sleep(0.01)
        started = anyio.current_time()
        async with admission.enter() as refused:
            assert refused == Admission.WAITED
        assert anyio.current_time() - started >= 0.2
        assert admission.waiting == 0
        release.set()
    assert admission.running == 0


async def test_a_request_that_would_wait_past_the_limit_is_refused_at_once() -> None:
    admission = Admission(1, 100, wait_s=1.0)
    admission.service_s = 0.4  # two ahead of a newcomer: 0.8 s expected, 1.2 s with its own call
    release = anyio.Event()
    outcomes: list[str | None] = []
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_hold, admission, outcomes, release, [], 0)
        await anyio.sleep(0.01)
        tasks.start_soon(_hold, admission, outcomes, release, [], 1)  # waits: 0.4 s, answered by 0.8 s
        await anyio.sleep(0.01)
        async with admission.enter() as refused:
            assert refused == Admission.EXPECTED_WAIT
        assert 0 < admission.retry_after_s() <= Admission.RETRY_MAX_S
        release.set()
    assert outcomes == [None, None]


async def test_a_cancelled_waiter_leaves_the_queue_and_no_place_is_lost() -> None:
    admission = Admission(1, 5, wait_s=30)
    release = anyio.Event()
    outcomes: list[str | None] = []
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_hold, admission, outcomes, release, [], 0)
        await anyio.sleep(0.01)
        with anyio.move_on_after(0.05):  # a client that went away while waiting
            async with admission.enter():
                pytest.fail("admitted while the place was held")
        assert admission.waiting == 0 and admission.running == 1
        release.set()
    assert admission.running == 0
    async with admission.enter() as refused:
        assert refused is None


def test_retry_after() -> None:
    admission = Admission(4, 8, wait_s=2.0)
    assert admission.retry_after_s() == 2.0  # nothing timed yet: the longest wait allowed
    admission.service_s = 0.2
    admission.running = 4
    assert admission.retry_after_s() == 0.2  # four running at 0.2 s on four places
    assert admission.retry_after_s() >= Admission.RETRY_MIN_S
    assert retry_after_header(0.2) == b"1" and retry_after_header(2.01) == b"3"


async def test_the_time_before_asking_and_the_service_count_against_the_limit() -> None:
    """A request is answered or refused within ``wait_s`` of its arrival: the time it spent
    before asking and the recent service time are taken from its wait."""
    admission = Admission(1, 100, wait_s=1.0)
    admission.service_s = 0.3
    release = anyio.Event()
    outcomes: list[str | None] = []
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_hold, admission, outcomes, release, [], 0)
        await anyio.sleep(0.01)
        # first in the queue: 0.3 s expected wait + 0.3 s service fits 1 s, but not after 0.5 s spent
        async with admission.enter(0.5) as refused:
            assert refused == Admission.EXPECTED_WAIT
        # after 0.2 s spent it may wait, but only what is left once its service is set aside
        started = anyio.current_time()
        async with admission.enter(0.2) as refused:
            assert refused == Admission.WAITED
        assert 0.45 <= anyio.current_time() - started < 0.7
        release.set()
    # a free place serves a request that still has time, and refuses one already late
    async with admission.enter(0.9) as refused:
        assert refused is None
    async with admission.enter(1.0) as refused:
        assert refused == Admission.WAITED
    assert admission.running == 0


def test_a_request_s_own_call_is_judged_by_the_slow_end_of_the_recent_ones() -> None:
    admission = Admission(1, 100, wait_s=1.0)
    for held in [0.6] * 5 + [0.1] * 45:  # a tenth of the recent calls were slow
        admission.running = 1
        admission._release(held)
    assert admission.service_s is not None and admission.service_s < 0.15  # the mean: for waits
    assert admission.call_s() == 0.6  # one request's own call: the slow end
