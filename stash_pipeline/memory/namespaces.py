"""Namespaces: paths like ``/projects/x``; a path read covers its descendants.

Writes (remember, set_context, create_*) take one exact namespace. Reads take a list of
paths and expand each to its tree; ``/`` means everything. The root ``/`` exists from
the first migration.

The functions that take the store take parsed values (``validate``'s module docstring says
which layer checks what) and return the models the operations publish. Each normalises
the path it creates, lists or deletes, as the lookups do, so a path means one row whoever
passes it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Protocol

from stash_pipeline import errors
from stash_pipeline.db.gateway import Row, Session
from stash_pipeline.memory import erasure, validate
from stash_pipeline.models import Namespace, NamespaceCreation, NamespaceDeletion, NamespaceView, SelfTree
from stash_pipeline.store import Store

SELF_TREE = {
    "/self": ("Self", "The agent's self-model: what it can do, where it fails, what it was told."),
    "/self/capabilities": ("Capabilities", "Proven strengths: approaches and tools that worked."),
    "/self/limits": ("Limits", "Known failure modes and blind spots."),
    "/self/preferences": ("Preferences", "Standing instructions and corrections from the user."),
}


class Token(Protocol):
    """The caller a namespace is created for (``stash_pipeline.auth.TokenInfo``)."""

    @property
    def id(self) -> int: ...

    def covers(self, path: str) -> bool: ...


class Allowance(Protocol):
    """How many namespaces a token may create in a window (``stash_serve.limits.SlidingWindow``)."""

    limit: int

    def acquire(self, key: Hashable, count: int = 1) -> bool: ...

    def release(self, key: Hashable, count: int = 1) -> None: ...

    def record(self, key: Hashable, count: int = 1) -> None: ...


def get(tx: Session, slug: str) -> Row:
    """The namespace row for an exact slug, or NamespaceNotFound."""
    row = tx.one("get_namespace_by_slug", slug=validate.slug(slug))
    if row is None:
        raise errors.NamespaceNotFound.create_first(slug)
    return row


def resolve_id(tx: Session, slug: str) -> int:
    return int(get(tx, slug)["id"])


def resolve_trees(tx: Session, paths: str | Sequence[str] | None) -> dict[int, str]:
    """Expand paths (list or comma string) to {namespace_id: slug} including descendants."""
    out: dict[int, str] = {}
    for path in validate.slugs(paths):
        rows = tx.all("resolve_namespace_tree", slug=path)
        if not rows and path != "/":
            raise errors.NamespaceNotFound(f"namespace {path!r} not found")
        out.update({int(r["id"]): r["slug"] for r in rows})
    return out


def create(
    store: Store,
    slug: str,
    name: str | None = None,
    description: str | None = None,
    *,
    may_create: Callable[[str], bool] | None = None,
) -> NamespaceCreation:
    """Create a namespace and any missing ancestors (mkdir -p).

    With ``may_create`` (a token's scope
    check), an ancestor it refuses must already exist: a token for /z/q creating /z/q/r
    must not bring /z into being. The check and the inserts share one transaction.
    """
    path = validate.slug(slug)
    name = (name or "").strip()
    description = (description or "").strip()
    if len(name) > 200 or len(description) > 2000:
        raise errors.InvalidInput("name is limited to 200 and description to 2000 characters")
    with store.db.transaction() as tx:
        parts = path.strip("/").split("/") if path != "/" else []
        ancestors = ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]
        if may_create is not None:
            missing = [
                a for a in ancestors
                if not may_create(a) and tx.one("get_namespace_by_slug", slug=a) is None
            ]
            if missing:
                raise errors.AccessDenied(
                    f"access denied: creating {path} would create {', '.join(missing)}, outside this "
                    "token's namespaces; an admin must create it first"
                )
        ancestors_created = sum(tx.execute("ensure_namespace", slug=a) for a in ancestors)
        row = tx.one(
            "upsert_namespace",
            slug=path,
            name=name or path,
            description=description,
            name_update=name,
            description_update=description,
        )
    assert row is not None
    created = bool(row.pop("created"))
    return NamespaceCreation(
        namespace=Namespace.from_row(row), created=created, ancestors_created=ancestors_created
    )


def create_for_token(
    store: Store,
    token: Token,
    slug: str,
    name: str | None = None,
    description: str | None = None,
    *,
    allowance: Allowance | None = None,
) -> NamespaceCreation:
    """``create`` for a token: ancestors outside its
    trees must already exist, and with an ``allowance`` (a sliding window keyed by token id,
    ``stash_serve.limits.SlidingWindow``) it creates at most ``allowance.limit`` namespaces
    a window, STASH_NAMESPACES_PER_TOKEN_PER_HOUR. Updating a namespace counts nothing.
    """
    if allowance is None:
        return create(store, slug, name, description, may_create=token.covers)
    if not allowance.acquire(token.id):
        if store.db.one("get_namespace_by_slug", slug=validate.slug(slug)) is None:
            raise errors.RateLimited(
                f"this token created {allowance.limit} namespaces in the last hour "
                "(STASH_NAMESPACES_PER_TOKEN_PER_HOUR); retry later"
            )
        return create(store, slug, name, description, may_create=lambda _: False)
    try:
        result = create(store, slug, name, description, may_create=token.covers)
    except BaseException:
        allowance.release(token.id)
        raise
    made = int(result.created) + result.ancestors_created
    if made == 0:
        allowance.release(token.id)
    elif made > 1:  # the one reserved above, and the ancestors it brought into being
        allowance.record(token.id, made - 1)
    return result


def list_(
    store: Store,
    paths: Sequence[str] | None = None,
    limit: int = validate.LIST_LIMIT_DEFAULT,
    offset: int = 0,
) -> list[Namespace]:
    """Namespaces in the given trees (all when no path is given), ordered by slug."""
    selected = list(dict.fromkeys(validate.slug(path) for path in paths)) if paths else ["/"]
    rows = store.db.all(
        "list_namespaces", all="/" in selected, slugs=selected, limit=limit, offset=offset
    )
    return [Namespace.from_row(r) for r in rows]


def show(store: Store, slug: str) -> NamespaceView:
    """A namespace with the row counts of its tree."""
    with store.db.transaction() as tx:
        row = get(tx, slug)
        ids = list(resolve_trees(tx, slug))
        counts = tx.one("namespace_counts", ids=ids)
    assert counts is not None
    return NamespaceView(namespace=Namespace.from_row(row), counts=counts)


def delete(store: Store, slug: str, *, confirm: bool = False) -> NamespaceDeletion:
    """Delete a namespace tree and everything in it, with what rows elsewhere derived from it
    (``erasure.erase_trees``). Without confirm, only report what would go."""
    path = validate.slug(slug)
    if path == "/":
        raise errors.InvalidInput("the root namespace '/' cannot be deleted")
    with store.db.transaction() as tx:
        tree = resolve_trees(tx, path)
        counts = tx.one("namespace_counts", ids=list(tree))
        if confirm:
            erasure.erase_trees(tx, store, list(tree))
            tx.execute("delete_namespaces", ids=list(tree))
    assert counts is not None
    return NamespaceDeletion(deleted=confirm, namespaces=sorted(tree.values()), counts=counts)


def init_self(store: Store) -> SelfTree:
    """Create the /self tree (idempotent). Returns the slugs that were newly created."""
    created = []
    for slug_, (name, description) in SELF_TREE.items():
        result = create(store, slug_, name, description)
        if result.created:
            created.append(slug_)
    return SelfTree(ok=True, namespaces=list(SELF_TREE), namespaces_created=created, self_available=True)
