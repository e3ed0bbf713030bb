"""Context: one short-lived focus per namespace ("what I am working on now").

Always an exact namespace, never a tree. The TTL (default ``STASH_CONTEXT_TTL``, 1 h) is
enforced on read: an expired focus is deleted and reported as absent, so an agent never
acts on a stale focus.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from stash_pipeline import errors
from stash_pipeline.memory import validate
from stash_pipeline.memory.namespaces import resolve_id
from stash_pipeline.models import Context
from stash_pipeline.store import Store

MAX_TTL = timedelta(days=365)


def _ttl(store: Store, ttl: Any) -> timedelta:
    if ttl is None:
        return store.settings.context_ttl
    if isinstance(ttl, bool):
        raise errors.InvalidInput("ttl must be a duration (timedelta or seconds)")
    if isinstance(ttl, int | float):
        ttl = timedelta(seconds=ttl)
    if not isinstance(ttl, timedelta):
        raise errors.InvalidInput("ttl must be a duration (timedelta or seconds)")
    if ttl <= timedelta(0):
        raise errors.InvalidInput("ttl must be positive")
    if ttl > MAX_TTL:
        raise errors.InvalidInput("ttl must be at most 365 days")
    return ttl


def set_(store: Store, namespace: str, focus: str, ttl: timedelta | float | None = None) -> Context:
    """Set (replace) the focus of one exact namespace; it expires after ``ttl``."""
    slug = validate.slug(namespace)
    text = validate.content(store.settings, focus, "focus")
    lifetime = _ttl(store, ttl)
    with store.db.transaction() as tx:
        row = tx.one("context_upsert", namespace_id=resolve_id(tx, slug), focus=text, ttl=lifetime)
    assert row is not None
    return Context.from_row({**row, "namespace": slug})


def get(store: Store, namespace: str) -> Context | None:
    """The namespace's focus, or None when there is none or it has expired (then it is removed)."""
    slug = validate.slug(namespace)
    with store.db.transaction() as tx:
        namespace_id = resolve_id(tx, slug)
        tx.execute("context_delete_expired", namespace_id=namespace_id)
        row = tx.one("context_get", namespace_id=namespace_id)
    return None if row is None else Context.from_row({**row, "namespace": slug})


def clear(store: Store, namespace: str) -> bool:
    """Remove the namespace's focus; True if there was one."""
    slug = validate.slug(namespace)
    with store.db.transaction() as tx:
        return tx.execute("context_clear", namespace_id=resolve_id(tx, slug)) > 0
