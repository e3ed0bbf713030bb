"""Recall's tuning is one frozen value, and every ranking field reaches the SQL as a parameter."""

from __future__ import annotations

import dataclasses

import pytest

from stash_pipeline import recall
from stash_pipeline.recall.config import DEFAULT, VARIANTS, RecallConfig

#: fields that do not go into the recall statement's parameters, and where they go instead
ELSEWHERE = {
    "ef_search": "recall_search_params",
    "relevance_floor": "the documented threshold for RecallHit.relevance (no ranking effect)",
    "diversity": "recall.grouping.diversify, over the statement's rows (tests/unit/test_recall_grouping_shape.py)",
    "mask_names": "recall.vectors.embedded_text: whether a hybrid query's vector is mixed with its names masked",
    "mask_weight": "recall.vectors.query_vector: the masked text's share of the query vector",
    "w_vector_masked": "recall.vectors.prepared: the w_vector sent for a query whose names were masked",
}


def parameters(config: RecallConfig, text: str = "what does Alice own for the deploy in 2025") -> dict:
    return recall.statement_parameters(recall.RecallRequest(text, ("/",), limit=10, context=1, config=config))


def test_the_config_is_frozen_and_variants_differ_from_the_default_only_where_named():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT.w_vector = 0.9  # type: ignore[misc]
    assert VARIANTS["default"] is DEFAULT
    assert VARIANTS["no_entity_leg"] == DEFAULT.replace(entity_leg=False)


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(RecallConfig) if f.name not in ELSEWHERE])
def test_every_ranking_field_changes_the_statement_parameters(field):
    value = getattr(DEFAULT, field)
    if isinstance(value, bool):
        tried = [not value]
    elif isinstance(value, int):
        tried = [value * 4 + 1, 1]  # a bound may only bite one way (a minimum, a cap)
    else:
        tried = [value * 0.5]
    # (time_guard matters for a query naming a time: this one names 2025)
    assert any(parameters(DEFAULT) != parameters(DEFAULT.replace(**{field: t})) for t in tried), field
