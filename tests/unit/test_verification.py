"""``stash_serve.token_check.Verification``: a seen token's check looks the token up only
once its request is admitted (``start``) or something waits for the result, so a request
refused before that costs no lookup; a failed or changed token fails it."""

from __future__ import annotations

import anyio
import pytest

from stash_pipeline import errors
from stash_pipeline.auth import TokenInfo
from stash_serve.token_check import Verification

pytestmark = pytest.mark.anyio

TOKEN = TokenInfo(id=1, name="agent", namespaces=("/a",), rights=frozenset({"read"}))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Lookups:
    """A token lookup that counts its calls and answers ``answer`` (a token or an error)."""

    def __init__(self, answer: TokenInfo | errors.StashError) -> None:
        self.answer = answer
        self.calls = 0

    async def __call__(self, secret: str) -> TokenInfo:
        self.calls += 1
        if isinstance(self.answer, errors.StashError):
            raise self.answer
        return self.answer


async def test_no_lookup_before_admission_and_none_for_a_request_turned_away() -> None:
    lookups = Lookups(TOKEN)
    check = Verification(TOKEN)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(check.run, lookups, "secret")
        await anyio.sleep(0.05)
        assert lookups.calls == 0  # not admitted, nobody waiting: no lookup yet
        tasks.cancel_scope.cancel()  # refused busy: the check is dropped
    assert lookups.calls == 0


async def test_admission_starts_the_lookup_and_a_wait_does_too() -> None:
    for begin in ("start", "passed"):
        lookups = Lookups(TOKEN)
        check = Verification(TOKEN)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(check.run, lookups, "secret")
            await anyio.sleep(0.01)
            if begin == "start":
                check.start()
            with anyio.fail_after(5):
                assert await check.passed()
        assert lookups.calls == 1, begin


async def test_a_revoked_or_changed_token_fails_the_check() -> None:
    for answer in (errors.AccessDenied("access denied: unknown or revoked token"),
                   TokenInfo(id=1, name="agent", namespaces=("/a", "/b"), rights=frozenset({"read"}))):
        check = Verification(TOKEN)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(check.run, Lookups(answer), "secret")
            check.start()
            with anyio.fail_after(5):
                assert not await check.passed()
        assert isinstance(check.error, errors.AccessDenied)
