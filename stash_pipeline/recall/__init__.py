"""Recall: hybrid retrieval over facts and episodes, each step a module with one job.

    request.py     RecallRequest: one recall, built and checked once, then carried through
    config.py      RecallConfig: the ranking's tuning as one frozen value (DEFAULT, VARIANTS)
    parameters.py  the recall statement's parameters from a request
    entities.py    the entity leg's phrases; names masked out of the query's vector
    vectors.py     the text the query's vector is made from, its cache key, the vector
    statement.py   the recall statements in one round trip; prepared on each connection
    queries/recall.sql  the recall statement PostgreSQL runs: legs, scoring, context, entity leg, fusion
    queries/recall_before.sql  the statements pipelined before it: settings, the scope check, names
    rerank.py      an optional reranking endpoint reorders the best candidates
    grouping.py    one result per piece of evidence (lineage), then diversity
    shape.py       the agent's answer: compact hits, context turns, token budgets
    pipeline.py    search → rank → hits / answer: the steps in order
"""

from __future__ import annotations

from stash_pipeline.recall.config import DEFAULT, VARIANTS, RecallConfig
from stash_pipeline.recall.parameters import asks_about_time, statement_parameters
from stash_pipeline.recall.pipeline import Ranked, answer, hits, rank, recall, recall_results, search
from stash_pipeline.recall.request import MODES, RecallRequest
from stash_pipeline.recall.shape import (
    compact,
    estimate_tokens,
    serialised_tokens,
    shape_results,
    to_hit,
    within_budget,
)
from stash_pipeline.recall.statement import prepare_on_connect, round_trip, statements
from stash_pipeline.recall.vectors import embedded_text, prepared, query_vector

__all__ = [
    "DEFAULT", "MODES", "VARIANTS", "Ranked", "RecallConfig", "RecallRequest", "answer", "asks_about_time", "compact",
    "embedded_text", "estimate_tokens", "hits", "prepare_on_connect", "prepared", "query_vector", "rank", "recall",
    "recall_results", "round_trip", "search", "serialised_tokens", "shape_results", "statement_parameters",
    "statements", "to_hit", "within_budget",
]
