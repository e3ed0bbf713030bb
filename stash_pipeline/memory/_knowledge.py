"""Helpers shared by the typed-knowledge operations (graph, contradictions, hypotheses,
goals, failures): scope resolution for by-id operations, namespace-line checks, and
the lookups those modules use to validate ids a caller passes in.

Scope rule (COMMON conventions): every by-id operation accepts ``namespaces=None``.
``None`` means "no restriction"; otherwise a record outside those trees is reported as
``RecordNotFound`` — exactly as if it did not exist, so a scoped token learns nothing
about other namespaces.
"""

from __future__ import annotations

from typing import Any

from stash_pipeline import errors
from stash_pipeline.db import Session
from stash_pipeline.memory import _validate as v
from stash_pipeline.memory import namespaces as ns


def scope_ids(tx: Session, namespaces: Any) -> set[int] | None:
    """Namespace ids covered by a by-id scope, or None for "unrestricted".

    A path that does not exist covers nothing (rather than raising NamespaceNotFound):
    a scope naming a missing namespace simply matches no record.
    """
    if namespaces is None:
        return None
    out: set[int] = set()
    for path in v.slugs(namespaces):
        out.update(int(r["id"]) for r in tx.all("resolve_namespace_tree", slug=path))
    return out


def in_scope(scope: set[int] | None, namespace_id: int) -> bool:
    return scope is None or int(namespace_id) in scope


def read_ids(tx: Session, namespaces: Any) -> list[int]:
    """Namespace ids of a read's trees (default '/'); unknown paths raise NamespaceNotFound."""
    return list(ns.resolve_trees(tx, "/" if namespaces in (None, "", []) else namespaces))


def is_ancestor_or_self(ancestor: str, slug: str) -> bool:
    """True when ``ancestor`` is ``slug`` itself or one of its ancestors ('/' is everyone's)."""
    return ancestor == "/" or slug == ancestor or slug.startswith(ancestor + "/")


def on_one_line(a: str, b: str) -> bool:
    """True when one namespace is the other, or an ancestor/descendant of it."""
    return is_ancestor_or_self(a, b) or is_ancestor_or_self(b, a)


def ids(value: Any, field: str) -> list[int]:
    """A list (or comma-separated string) of positive ids; de-duplicated, order kept.

    Unlike the reference, an entry that is not an id is an error, not silently dropped.
    """
    if value is None or value == "" or value == []:
        return []
    if isinstance(value, str):
        items: list[Any] = [p.strip() for p in value.split(",") if p.strip()]
    elif isinstance(value, list | tuple | set | frozenset):
        items = list(value)
    else:
        raise errors.InvalidInput(f"{field} must be a list of ids or a comma-separated string")
    out: list[int] = []
    for item in items:
        i = v.record_id(item, field)
        if i not in out:
            out.append(i)
    return out
