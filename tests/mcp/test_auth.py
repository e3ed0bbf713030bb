"""API tokens: creation shows the secret once and stores only its hash; scope and rights checks."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from stash_pipeline import auth, errors


def test_create_stores_only_the_hash_and_lists_without_secrets(store: Any) -> None:
    made = auth.create_token(store, "/projects/x, /users/alice", "write,read", "ci agent")
    assert made["token"].startswith(f"stash_{made['prefix']}_")
    assert made["namespaces"] == ["/projects/x", "/users/alice"] and made["rights"] == ["read", "write"]
    row = store.db.one("auth_find_token", token_hash=hashlib.sha256(made["token"].encode()).hexdigest())
    assert row is not None and row["id"] == made["id"]
    with store.db.transaction() as tx:
        stored = tx.conn.execute("SELECT token_hash FROM api_tokens WHERE id = %s", (made["id"],)).fetchone()
    assert made["token"] not in stored["token_hash"]
    listed = auth.list_tokens(store)
    assert [t["id"] for t in listed] == [made["id"]]
    assert set(listed[0]) == {
        "id",
        "name",
        "prefix",
        "namespaces",
        "rights",
        "created_at",
        "last_used_at",
        "revoked_at",
    }


@pytest.mark.parametrize(
    ("namespaces", "rights", "name", "error"),
    [
        ([], ["read"], "", errors.InvalidInput),
        (["projects/x"], ["read"], "", errors.InvalidNamespace),
        (["/x"], [], "", errors.InvalidInput),
        (["/x"], ["read", "root"], "", errors.InvalidInput),
        (["/x"], 5, "", errors.InvalidInput),
        (["/x"], ["read"], "n\x00", errors.InvalidInput),
    ],
)
def test_create_rejects_bad_input(store: Any, namespaces: Any, rights: Any, name: str, error: type) -> None:
    with pytest.raises(error):
        auth.create_token(store, namespaces, rights, name)
    assert auth.list_tokens(store) == []


def test_authenticate_touch_and_revoke(store: Any) -> None:
    made = auth.create_token(store, ["/projects/x"], ["read"])
    info = auth.authenticate(store, made["token"])
    assert (info.id, info.namespaces, info.rights) == (made["id"], ("/projects/x",), frozenset({"read"}))
    assert auth.list_tokens(store)[0]["last_used_at"] is not None
    for secret in (None, "", "stash_deadbeef_nope", made["token"] + "x", "a\x00b", "x" * 1000):
        with pytest.raises(errors.AccessDenied):
            auth.authenticate(store, secret)
    assert auth.revoke_token(store, made["id"]) is True
    assert auth.revoke_token(store, made["id"]) is False  # already revoked
    assert auth.revoke_token(store, 999_999) is False
    with pytest.raises(errors.AccessDenied, match="revoked"):
        auth.authenticate(store, made["token"])
    with pytest.raises(errors.InvalidInput):
        auth.revoke_token(store, -1)


def test_require_checks_trees_and_rights() -> None:
    reader = auth.TokenInfo(1, "r", ("/projects/x",), frozenset({"read"}))
    reader.require("read", ["/projects/x", "/projects/x/api"])
    reader.require("read", "/projects/x/api,/projects/x")
    for paths in (["/projects/xy"], ["/projects"], ["/"], ["/projects/x", "/other"]):
        with pytest.raises(errors.AccessDenied, match="outside"):
            reader.require("read", paths)
    with pytest.raises(errors.AccessDenied, match="write"):
        reader.require("write", ["/projects/x"])
    admin = auth.TokenInfo(2, "a", ("/",), frozenset({"admin"}))
    admin.require("write", ["/anything/at/all"])
    admin.require("read")
    with pytest.raises(errors.InvalidNamespace):
        admin.require("read", ["not-a-path"])
