"""Namespace scopes: which namespace ids a read or a by-id operation may touch, and
namespace-line checks. Used by every memory operation that takes ``namespaces``.

Scope rule (COMMON conventions): every by-id operation accepts ``namespaces=None``.
``None`` means "no restriction"; otherwise a record outside those trees is reported as
``RecordNotFound`` — exactly as if it did not exist, so a scoped token learns nothing
about other namespaces.
"""

from __future__ import annotations

from collections.abc import Sequence

from stash_pipeline import errors
from stash_pipeline.db.gateway import Row, Session
from stash_pipeline.memory import validate
from stash_pipeline.memory.namespaces import resolve_trees


def scope_ids(tx: Session, namespaces: str | Sequence[str] | None) -> set[int] | None:
    """Namespace ids covered by a by-id scope, or None for "unrestricted".

    A path that does not exist covers nothing (rather than raising NamespaceNotFound):
    a scope naming a missing namespace simply matches no record.
    """
    if namespaces is None:
        return None
    out: set[int] = set()
    for path in validate.slugs(namespaces):
        out.update(int(r["id"]) for r in tx.all("resolve_namespace_tree", slug=path))
    return out


def visible(scope: set[int] | None) -> dict[str, object]:
    """The ``all_visible`` / ``visible_ids`` parameters of a query that shows a reference
    (a parent goal, a failure's goal) only when it points inside the caller's scope."""
    return {"all_visible": scope is None, "visible_ids": sorted(scope or ())}


def read_scope(tx: Session, namespaces: str | Sequence[str] | None) -> tuple[bool, list[int]]:
    """(all_namespaces, ids) for a read over trees; unknown paths raise NamespaceNotFound."""
    selected = validate.slugs(namespaces)
    if "/" in selected:
        return True, []
    return False, list(resolve_trees(tx, selected))


def in_scope(scope: set[int] | None, namespace_id: int) -> bool:
    return scope is None or int(namespace_id) in scope


def found_in_scope(
    row: Row | None, scope: set[int] | None, label: str, *, include_deleted: bool = False
) -> Row:
    """``row`` when it exists, lies in ``scope`` and is not soft-deleted (unless
    ``include_deleted``); otherwise ``RecordNotFound("<label> not found")`` — the same
    answer for a missing record and one outside the caller's scope."""
    if (
        row is None
        or not in_scope(scope, row["namespace_id"])
        or (row.get("deleted_at") is not None and not include_deleted)
    ):
        raise errors.RecordNotFound(f"{label} not found")
    return row


def read_ids(tx: Session, namespaces: str | Sequence[str] | None) -> list[int]:
    """Namespace ids of a read's trees (default '/'); unknown paths raise NamespaceNotFound."""
    return list(resolve_trees(tx, "/" if namespaces in (None, "", []) else namespaces))


def is_ancestor_or_self(ancestor: str, slug: str) -> bool:
    """True when ``ancestor`` is ``slug`` itself or one of its ancestors ('/' is everyone's)."""
    return ancestor == "/" or slug == ancestor or slug.startswith(ancestor + "/")


def on_one_line(a: str, b: str) -> bool:
    """True when one namespace is the other, or an ancestor/descendant of it."""
    return is_ancestor_or_self(a, b) or is_ancestor_or_self(b, a)
