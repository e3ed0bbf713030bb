from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from stash_pipeline import errors
from stash_pipeline.memory import context, namespaces


@pytest.fixture
def ns(store):
    namespaces.create(store, "/projects/x/api")
    return "/projects/x"


def test_set_get_replace_clear(store, ns):
    assert context.get(store, ns) is None
    before = datetime.now(UTC)
    ctx = context.set_(store, ns, "refactoring the billing module")
    assert ctx.namespace == ns and ctx.focus == "refactoring the billing module"
    # default TTL is STASH_CONTEXT_TTL (1h)
    assert timedelta(minutes=59) < ctx.expires_at - before < timedelta(minutes=61)
    assert context.get(store, ns).focus == "refactoring the billing module"
    context.set_(store, ns, "now: incident ERR-4521", ttl=timedelta(minutes=5))
    got = context.get(store, ns)
    assert got.focus == "now: incident ERR-4521"
    assert got.expires_at - datetime.now(UTC) < timedelta(minutes=6)
    assert context.clear(store, ns) is True
    assert context.clear(store, ns) is False
    assert context.get(store, ns) is None


def test_context_is_per_exact_namespace(store, ns):
    context.set_(store, ns, "parent focus")
    assert context.get(store, "/projects/x/api") is None  # never inherited from a tree
    with pytest.raises(errors.NamespaceNotFound):
        context.set_(store, "/projects/nope", "x")
    with pytest.raises(errors.NamespaceNotFound):
        context.get(store, "/projects/nope")


def test_ttl_expiry_enforced_on_read_and_row_deleted(store, ns):
    context.set_(store, ns, "short lived", ttl=timedelta(seconds=1))
    time.sleep(1.2)
    assert context.get(store, ns) is None
    with store.db.connection() as conn:
        assert conn.execute("SELECT count(*) FROM contexts").fetchone()["count"] == 0


def test_expired_via_sql(store, ns):
    context.set_(store, ns, "stale")
    with store.db.connection() as conn:
        conn.execute("UPDATE contexts SET expires_at = now() - interval '1 second'")
        conn.commit()
    assert context.get(store, ns) is None


def test_ttl_from_settings(make_store, ns):
    s = make_store(context_ttl=timedelta(minutes=2))
    ctx = context.set_(s, ns, "focus")
    assert ctx.expires_at - datetime.now(UTC) < timedelta(minutes=3)


@pytest.mark.parametrize(
    ("focus", "ttl", "error"),
    [
        ("", None, errors.EmptyContent),
        ("a\x00b", None, errors.InvalidInput),
        ("x" * 10_001, None, errors.ContentTooLarge),
        ("ok", timedelta(0), errors.InvalidInput),
        ("ok", -5, errors.InvalidInput),
        ("ok", "1h", errors.InvalidInput),
        ("ok", True, errors.InvalidInput),
    ],
)
def test_bad_input_changes_nothing(store, ns, focus, ttl, error):
    context.set_(store, ns, "keep me")
    with pytest.raises(error):
        context.set_(store, ns, focus, ttl=ttl)
    assert context.get(store, ns).focus == "keep me"


def test_seconds_ttl_accepted(store, ns):
    ctx = context.set_(store, ns, "focus", ttl=90)
    assert timedelta(seconds=80) < ctx.expires_at - datetime.now(UTC) <= timedelta(seconds=90)
