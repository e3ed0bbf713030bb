from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from stash_pipeline import errors
from stash_pipeline.memory import context, namespaces
from stash_pipeline.operations.context import SET_CONTEXT


@pytest.fixture
def ns(store):
    namespaces.create(store, "/projects/x/api")
    return "/projects/x"


def test_set_get_replace_clear(store, ns):
    assert context.get(store, ns).context is None
    before = datetime.now(UTC)
    ctx = context.set_(store, ns, "refactoring the billing module")
    assert ctx.namespace == ns and ctx.focus == "refactoring the billing module"
    # default TTL is STASH_CONTEXT_TTL (1h)
    assert timedelta(minutes=59) < ctx.expires_at - before < timedelta(minutes=61)
    assert context.get(store, ns).context.focus == "refactoring the billing module"
    context.set_(store, ns, "now: incident ERR-4521", ttl=timedelta(minutes=5))
    got = context.get(store, ns).context
    assert got.focus == "now: incident ERR-4521"
    assert got.expires_at - datetime.now(UTC) < timedelta(minutes=6)
    assert context.clear(store, ns).cleared is True
    assert context.clear(store, ns).cleared is False
    assert context.get(store, ns).context is None


def test_context_is_per_exact_namespace(store, ns):
    context.set_(store, ns, "parent focus")
    assert context.get(store, "/projects/x/api").context is None  # never inherited from a tree
    with pytest.raises(errors.NamespaceNotFound):
        context.set_(store, "/projects/nope", "x")
    with pytest.raises(errors.NamespaceNotFound):
        context.get(store, "/projects/nope")


def test_ttl_expiry_enforced_on_read_and_row_deleted(store, ns):
    context.set_(store, ns, "short lived", ttl=timedelta(seconds=1))
    time.sleep(1.2)
    assert context.get(store, ns).context is None
    with store.db.connection() as conn:
        assert conn.execute("SELECT count(*) FROM contexts").fetchone()["count"] == 0


def test_expired_via_sql(store, ns):
    context.set_(store, ns, "stale")
    with store.db.connection() as conn:
        conn.execute("UPDATE contexts SET expires_at = now() - interval '1 second'")
        conn.commit()
    assert context.get(store, ns).context is None


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
        ("ok", timedelta(days=366), errors.InvalidInput),
    ],
)
def test_bad_input_changes_nothing(store, ns, focus, ttl, error):
    context.set_(store, ns, "keep me")
    with pytest.raises(error):
        context.set_(store, ns, focus, ttl=ttl)
    assert context.get(store, ns).context.focus == "keep me"


@pytest.mark.parametrize("ttl", ["-5", "0", "1 hour", "soon"])
def test_a_ttl_that_is_no_duration_is_refused_by_the_operation(ttl):
    with pytest.raises(errors.InvalidInput, match="ttl"):
        SET_CONTEXT.parse({"focus": "ok", "namespace": "/projects/x", "ttl": ttl})


def test_the_operation_parses_the_ttl_once():
    assert SET_CONTEXT.parse({"focus": "ok", "namespace": "/projects/x", "ttl": "90s"}).ttl == timedelta(seconds=90)


def test_seconds_ttl_accepted(store, ns):
    ctx = context.set_(store, ns, "focus", ttl=timedelta(seconds=90))
    assert timedelta(seconds=80) < ctx.expires_at - datetime.now(UTC) <= timedelta(seconds=90)
