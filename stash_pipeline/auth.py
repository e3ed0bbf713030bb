"""API tokens for the HTTP transport: create, list, revoke, authenticate, check scope.

A token is a random secret shown once at creation (``stash_<prefix>_<secret>``); only its
sha256 is stored, with the namespace trees it may touch and its rights (``read``,
``write``, ``admin``; admin implies read and write). The MCP server authenticates every
HTTP request with ``authenticate`` and checks each tool call with ``TokenInfo.require``.
stdio is local and trusted and uses no token.

A console sign-in opens a session (``open_session``): its own random secret, kept in the
browser's cookie instead of the token, stored as a sha256 with the token's id and an end.
``session_token`` answers the session's token while the session lives and the token is
not revoked; ``close_session`` ends it.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from stash_pipeline import errors
from stash_pipeline.db.sql import query
from stash_pipeline.memory import validate
from stash_pipeline.store import Store

RIGHTS = ("read", "write", "admin")
TOKEN_PREFIX = "stash_"


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _inside(path: str, tree: str) -> bool:
    """Whether namespace ``path`` lies in the tree rooted at ``tree`` (itself included)."""
    return tree == "/" or path == tree or path.startswith(tree + "/")


def _rights(value: Any) -> list[str]:
    if isinstance(value, str):
        parts = [p.strip().lower() for p in value.split(",")]
    elif isinstance(value, list | tuple):
        parts = [str(p).strip().lower() for p in value]
    else:
        raise errors.InvalidInput("rights must be a list or a comma-separated string of read, write, admin")
    out = [p for p in dict.fromkeys(parts) if p]
    if not out:
        raise errors.InvalidInput("at least one right is required (read, write, admin)")
    unknown = [p for p in out if p not in RIGHTS]
    if unknown:
        raise errors.InvalidInput(f"unknown right(s) {', '.join(unknown)}; use read, write, admin")
    return sorted(out, key=RIGHTS.index)


def _public(row: dict[str, Any]) -> dict[str, Any]:
    out = {
        "id": int(row["id"]),
        "name": row["name"],
        "prefix": row["prefix"],
        "namespaces": list(row["namespaces"]),
        "rights": list(row["rights"]),
    }
    for key in ("created_at", "last_used_at", "revoked_at"):
        if key in row:
            value = row[key]
            out[key] = value.isoformat() if value is not None else None
    return out


@dataclass(frozen=True)
class TokenInfo:
    """An authenticated token: its id, name, namespace trees and rights."""

    id: int
    name: str
    namespaces: tuple[str, ...]
    rights: frozenset[str]

    def has(self, right: str) -> bool:
        return "admin" in self.rights or right in self.rights

    def covers(self, path: str) -> bool:
        return any(_inside(path, tree) for tree in self.namespaces)

    def require(self, right: str, paths: Any = ()) -> None:
        """Raise AccessDenied unless the token has ``right`` and covers every path in ``paths``."""
        if right not in RIGHTS:
            raise ValueError(f"unknown right {right!r}")
        if not self.has(right):
            raise errors.AccessDenied(f"access denied: this token lacks the {right!r} right")
        selected = [] if paths in (None, "", [], ()) else validate.slugs(paths)
        outside = [p for p in selected if not self.covers(p)]
        if outside:
            raise errors.AccessDenied(
                f"access denied: {', '.join(outside)} is outside this token's namespaces "
                f"({', '.join(self.namespaces)})"
            )


def create_token(store: Store, namespaces: list[str], rights: list[str], name: str = "") -> dict[str, Any]:
    """Create a token; the returned ``token`` is the only time the secret is shown."""
    trees = validate.slugs(namespaces) if namespaces not in (None, "", []) else None
    if not trees:
        raise errors.InvalidInput("at least one namespace is required for a token")
    granted = _rights(rights)
    label = (name or "").strip()
    if len(label) > 200 or "\x00" in label:
        raise errors.InvalidInput("token name is limited to 200 characters, without NUL bytes")
    prefix = secrets.token_hex(4)
    secret = f"{TOKEN_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    row = store.db.one(
        "auth_insert_token",
        name=label,
        token_hash=_hash(secret),
        prefix=prefix,
        namespaces=trees,
        rights=granted,
    )
    assert row is not None
    return {"token": secret, **_public(row)}


def list_tokens(store: Store) -> list[dict[str, Any]]:
    """Every token with its scope and use times; never a secret or hash."""
    return [_public(r) for r in store.db.all("auth_list_tokens")]


def revoke_token(store: Store, token_id: int) -> bool:
    """Revoke a token; False if there is no active token with that id."""
    return store.db.one("auth_revoke_token", id=validate.record_id(token_id, "token id")) is not None


#: what a console session's secret starts with (tells it apart from a token's)
SESSION_PREFIX = "stash-session_"


def open_session(store: Store, token: TokenInfo, ttl_s: int) -> str:
    """A new console session of ``token`` for ``ttl_s`` seconds; its secret, shown once."""
    secret = f"{SESSION_PREFIX}{secrets.token_urlsafe(32)}"
    store.db.execute("auth_open_session", secret_hash=_hash(secret), token_id=token.id, ttl_s=ttl_s)
    return secret


def session_token(store: Store, secret: str | None) -> TokenInfo:
    """The token of a live console session, or AccessDenied (ended, unknown, token revoked)."""
    row = store.db.one("auth_check_session", secret_hash=_hash(_presented(secret)))
    if row is None:
        raise errors.AccessDenied("access denied: the session has ended; sign in again")
    return _token_info(row)


def close_session(store: Store, secret: str | None) -> None:
    """End a console session (nothing happens for an unknown one)."""
    if secret and isinstance(secret, str) and len(secret) <= 512 and "\x00" not in secret:
        store.db.execute("auth_close_session", secret_hash=_hash(secret.strip()))


def _presented(secret: str | None) -> str:
    if not secret or not isinstance(secret, str) or len(secret) > 512 or "\x00" in secret:
        raise errors.AccessDenied("access denied: a valid bearer token is required")
    return secret.strip()


def _token_info(row: dict[str, Any] | None) -> TokenInfo:
    if row is None:
        raise errors.AccessDenied("access denied: unknown or revoked token")
    return TokenInfo(
        id=int(row["id"]),
        name=row["name"],
        namespaces=tuple(row["namespaces"]),
        rights=frozenset(row["rights"]),
    )


def authenticate(store: Store, secret: str | None) -> TokenInfo:
    """The token for a presented secret, or AccessDenied if unknown or revoked."""
    token_hash = _hash(_presented(secret))
    with store.db.transaction() as tx:
        row = tx.one("auth_find_token", token_hash=token_hash)
        if row is not None:
            tx.execute("auth_touch_token", id=row["id"])
    return _token_info(row)


async def authenticate_on(conn: Any, secret: str | None) -> TokenInfo:
    """``authenticate`` on an autocommit ``psycopg.AsyncConnection`` with dict rows: one
    round trip, no worker thread.

    The HTTP server checks the token of every request; this lets it do so from its event
    loop. Database errors are raised as psycopg's (the caller owns the connection).
    """
    token_hash = _hash(_presented(secret))
    cursor = await conn.execute(query("auth_check_token"), {"token_hash": token_hash})
    return _token_info(await cursor.fetchone())
