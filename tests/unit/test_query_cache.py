"""psycopg's placeholder cache holds every named query (``stash_pipeline.db.query_cache``).

The patch sets two of psycopg's private module constants; these tests fail on the psycopg
release that renames them or stops consulting them, and when a named query outgrows them.
"""

from __future__ import annotations

import re

import psycopg
from psycopg import _queries
from psycopg.adapt import Transformer

from stash_pipeline.db import gateway  # noqa: F401  (importing the gateway applies the patch)
from stash_pipeline.db.query_cache import LIMITS
from stash_pipeline.db.sql import QUERIES

PLACEHOLDER = re.compile(r"%\(([^)]+)\)[sbt]")


def test_psycopg_still_has_the_constants_and_the_cache_the_patch_relies_on() -> None:
    for name, at_least in LIMITS.items():
        value = getattr(_queries, name, None)
        assert isinstance(value, int), f"psycopg {psycopg.__version__} has no int _queries.{name}"
        assert value >= at_least
    assert hasattr(_queries._query2pg, "cache_info"), "psycopg's placeholder split is no longer an lru_cache"


def test_every_named_query_fits_the_raised_limits() -> None:
    for name, statement in QUERIES.items():
        assert len(statement.encode()) <= LIMITS["MAX_CACHED_STATEMENT_LENGTH"], name
        assert len(set(PLACEHOLDER.findall(statement))) <= LIMITS["MAX_CACHED_STATEMENT_PARAMS"], name


def test_the_longest_named_query_is_split_once_then_read_from_psycopg_cache() -> None:
    name = max(QUERIES, key=lambda n: len(QUERIES[n]))
    statement = QUERIES[name]
    assert len(statement.encode()) > 4096  # over psycopg's own limit: the patch is what caches it
    params = dict.fromkeys(PLACEHOLDER.findall(statement))
    convert = _queries.PostgresQuery(Transformer()).convert
    convert(statement, params)
    before = _queries._query2pg.cache_info()
    convert(statement, params)
    after = _queries._query2pg.cache_info()
    assert (after.hits - before.hits, after.misses - before.misses) == (1, 0)
