"""Context: one short-lived focus per namespace ("what I am working on now").

Always an exact namespace, never a tree. The TTL (default ``STASH_CONTEXT_TTL``, 1 h) is
enforced on read: an expired focus is deleted and reported as absent, so an agent never
acts on a stale focus.

The functions take parsed values (``validate``'s module docstring says which layer checks
what): a namespace path, a ``timedelta``; they check the focus against the store's limits.
"""

from __future__ import annotations

from datetime import timedelta

from stash_pipeline import errors
from stash_pipeline.memory import validate
from stash_pipeline.memory.namespaces import get as get_namespace
from stash_pipeline.models import Context, ContextCleared, CurrentContext
from stash_pipeline.store import Store

MAX_TTL = timedelta(days=365)


def _ttl(store: Store, ttl: timedelta | None) -> timedelta:
    if ttl is None:
        return store.settings.context_ttl
    if not timedelta(0) < ttl <= MAX_TTL:
        raise errors.InvalidInput("ttl must be positive and at most 365 days")
    return ttl


def set_(store: Store, namespace: str, focus: str, ttl: timedelta | None = None) -> Context:
    """Set (replace) the focus of one exact namespace; it expires after ``ttl``
    (None: ``STASH_CONTEXT_TTL``; at most MAX_TTL)."""
    text = validate.content(store.settings, focus, "focus")
    lifetime = _ttl(store, ttl)
    with store.db.transaction() as tx:
        target = get_namespace(tx, namespace)
        row = tx.one("context_upsert", namespace_id=target["id"], focus=text, ttl=lifetime)
    assert row is not None
    return Context.from_row({**row, "namespace": target["slug"]})


def get(store: Store, namespace: str) -> CurrentContext:
    """The namespace's focus; ``context`` None when there is none or it has expired (then it is removed)."""
    with store.db.transaction() as tx:
        target = get_namespace(tx, namespace)
        tx.execute("context_delete_expired", namespace_id=target["id"])
        row = tx.one("context_get", namespace_id=target["id"])
    return CurrentContext(context=None if row is None else Context.from_row({**row, "namespace": target["slug"]}))


def clear(store: Store, namespace: str) -> ContextCleared:
    """Remove the namespace's focus; ``cleared`` says whether there was one."""
    with store.db.transaction() as tx:
        cleared = tx.execute("context_clear", namespace_id=get_namespace(tx, namespace)["id"]) > 0
    return ContextCleared(ok=True, cleared=cleared)
