"""The one patch on psycopg's private API: its placeholder cache takes every named query.

psycopg converts a query's ``%(name)s`` placeholders to ``$n`` on each execute and caches
the result only for texts up to ``MAX_CACHED_STATEMENT_LENGTH`` bytes with at most
``MAX_CACHED_STATEMENT_PARAMS`` parameters (a guard against ORM-made SQL, each text used
once). Stash runs a fixed set of named queries, some longer than that, so the limits are
raised to cover them: each is converted once per process. psycopg has no public knob for
it; ``tests/unit/test_query_cache.py`` fails on the psycopg release that moves these names.
"""

from __future__ import annotations

from psycopg import _queries

#: psycopg's module constants and the least each must allow
LIMITS = {"MAX_CACHED_STATEMENT_LENGTH": 64 * 1024, "MAX_CACHED_STATEMENT_PARAMS": 200}


def cache_named_queries() -> None:
    """Raise psycopg's cache limits to ``LIMITS`` (never lower them)."""
    for name, at_least in LIMITS.items():
        setattr(_queries, name, max(getattr(_queries, name), at_least))
