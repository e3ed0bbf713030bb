"""The reliability harness itself: how a suite tells which stage a run was in."""

from __future__ import annotations

from stash_pipeline.stages import STAGE_NAMES
from stash_pipeline.stages.prompts import system
from tests.reliability.test_crash import _stage_of


def _request(system_text: str) -> dict[str, object]:
    return {"messages": [{"role": "system", "content": system_text}, {"role": "user", "content": "x"}]}


def test_stage_of_skips_requests_without_a_stage_line() -> None:
    # the last request a dying worker sent may carry no STAGE: line (a cut-off body);
    # the stage is then the one of the latest request that names one, never "unknown"
    seen = [_request(system("facts", "r")), _request(system("relationships", "r")), {"_raw": "{\"mess"}, _request("")]
    assert _stage_of(seen) == "relationships"
    assert _stage_of(seen) in STAGE_NAMES


def test_stage_of_defaults_to_the_first_stage() -> None:
    assert _stage_of([]) == STAGE_NAMES[0]
    assert _stage_of([{"_raw": "garbage"}, _request("STAGE: nonsense")]) == STAGE_NAMES[0]
