"""Tolerant parsing of model answers (no database, no network)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from stash_pipeline import errors
from stash_pipeline.consolidation.reasoner import RunLedger, extract_json, parse_answer


class Answer(BaseModel):
    items: list[int]


@pytest.mark.parametrize(
    "text",
    [
        '{"items": [1, 2]}',
        '<think>maybe {"items": [9]} is wrong</think>{"items": [1, 2]}',
        '<THINK>\nreasoning\n</THINK>\n\nHere is the answer: {"items": [1, 2]} hope it helps',
        'reasoning without an opening tag</think>{"items": [1, 2]}',
        '```json\n{"items": [1, 2]}\n```',
        'Sure! ```\n{"items": [1, 2]}\n``` done',
        'The answer is {"items": [1, 2]} and {"other": 3}',
        '<think>still thinking {"items": [7]} ... then {"items": [1, 2]}',
        'prose with a brace } first, then {"items": [1, 2]}',
    ],
)
def test_extracts_the_answer(text):
    assert parse_answer(text, Answer) == Answer(items=[1, 2])


def test_strings_with_braces_do_not_confuse_the_scanner():
    assert extract_json('noise {"a": "x } y {", "b": [1]} tail') == {"a": "x } y {", "b": [1]}


def test_bare_array_is_accepted_for_a_single_list_schema():
    assert parse_answer("[3, 4]", Answer) == Answer(items=[3, 4])


@pytest.mark.parametrize("text", ["", "   ", "no json here", "<think>thinking {never closed", '{"items": [1,'])
def test_unparseable_answers_raise_value_error(text):
    with pytest.raises(ValueError):
        extract_json(text)


def test_schema_violations_raise_validation_error():
    with pytest.raises(ValidationError):
        parse_answer('{"items": ["a"]}', Answer)
    with pytest.raises(ValidationError):
        parse_answer('{"unexpected": 1}', Answer)


def test_ledger_budget():
    ledger = RunLedger(token_budget=10)
    ledger.check_budget()
    ledger.add(6, 4)
    assert (ledger.calls, ledger.tokens) == (1, 10)
    with pytest.raises(errors.TokenBudgetExceeded):
        ledger.check_budget()
    RunLedger(token_budget=None).check_budget()
