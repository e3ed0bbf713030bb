"""bench.text_index builds its BM25-index variant of the recall statement from the shipped statement.

The variant is the shipped statement with its three text CTEs swapped for the index's
top-k, so that it follows every other change to recall_hybrid; these tests fail when the
statement no longer has the seams the swap relies on.
"""

from __future__ import annotations

from bench import text_index
from stash_pipeline.db import sql


def test_index_statement_swaps_only_the_text_ctes() -> None:
    base = sql.QUERIES["recall"]
    variant = text_index.index_statement(base)
    assert "fact_text AS (" not in variant and "episode_text AS (" not in variant
    assert "to_bm25query(%(query)s, 'episodes_content_bm25')" in variant
    assert "to_bm25query(%(query)s, 'facts_content_bm25')" in variant
    # everything from the candidates on is the shipped statement, unchanged
    tail = base[base.index("candidates AS ("):]
    assert variant.endswith(tail)
    assert variant.startswith(base[:base.index("fact_text AS (")])


def test_text_leg_statement_stops_after_text_top() -> None:
    for statement in (sql.QUERIES["recall"], text_index.index_statement(sql.QUERIES["recall"])):
        leg = text_index.text_leg_statement(statement)
        assert "candidates AS (" not in leg
        assert leg.endswith("SELECT count(*) AS n FROM text_top")


def test_text_leg_restores_the_shipped_statement() -> None:
    base = sql.QUERIES["recall"]
    with text_index.text_leg("bm25_index"):
        assert sql.query("recall") == text_index.index_statement(base)
    assert sql.query("recall") == base
    with text_index.text_leg("sql_bm25"):
        assert sql.query("recall") == base
