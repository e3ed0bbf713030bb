"""After an import or a Go migration, a token scoped to the tenant's tree reaches nothing
outside it through the rows brought in — driven through the real MCP server over HTTP.

The imported rows of ``/gx`` were made (by a hostile operator) to point at rows of
``/gy-secret``: a contradiction and a causal link on the secret fact, the tenant's fact
superseded by it, the tenant's goal under the secret goal, the tenant's fact drawn from
the secret episode. A read-write token for ``/gx`` then resolves every contradiction it
can see, follows every lineage and causal link it is shown, and tries every secret id
directly; each direct attempt fails with a scope error, nothing it is shown names a
secret id, and the secret rows are exactly as before.

Both imports go through the CLI (``stash migrate-from-go``, ``stash export`` then
``stash import`` of the edited file onto a server the tree was deleted from). Both tests
fail on the importers before the catalog and the writer (commit 39b8a5f): the tenant is
shown the secret fact's id through the imported references.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from stash_pipeline import auth
from stash_serve.cli import cli
from tests.integration.test_interchange import _sql
from tests.integration.test_interchange_hostile import SCOPE_ESCAPE, go_database, secret_and_tenant
from tests.mcp.asgi import served, session

pytestmark = pytest.mark.anyio

#: what a tool answers for an id outside the token's trees
SCOPE_ERRORS = {"access_denied", "record_not_found", "not_found"}


def _spread_ids(store: Any) -> None:
    """Each table's ids from their own range, so an id shown is never another table's by chance."""
    tables = _sql(store, "SELECT t FROM (SELECT table_name AS t FROM information_schema.columns "
                  "WHERE table_schema = 'public' AND column_name = 'id' OFFSET 0) c "  # filtered first
                  "WHERE pg_get_serial_sequence(quote_ident(t), 'id') IS NOT NULL ORDER BY 1")
    for i, row in enumerate(tables):
        _sql(store, "SELECT setval(pg_get_serial_sequence(%s, 'id'), %s)", row["t"], 10_000 * (i + 1))


def _stash(database_url: str, home: Path, *args: str) -> dict[str, Any]:
    env = {"STASH_DATABASE_URL": database_url, "STASH_EMBEDDER": "hash", "STASH_HOME": str(home)}
    result = CliRunner().invoke(cli, [*args, "--json"], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


async def _call(client: Any, tool: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
    result = await client.call_tool(tool, arguments)
    return bool(result.is_error), json.loads(result.content[0].text)


def _secret_rows(store: Any, root: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of the secret namespace, as stored (to compare before and after)."""
    rows = {}
    for table in ("facts", "episodes", "goals", "contradictions", "causal_links"):
        rows[table] = _sql(store, f"SELECT t.* FROM {table} t JOIN namespaces n ON n.id = t.namespace_id "
                           f"WHERE n.slug = %s ORDER BY t.id", f"{root}/gy-secret")
        for row in rows[table]:
            row.pop("embedding", None)
            row.pop("search", None)
    return rows


async def _attack(store: Any, root: str) -> None:
    """A /gx token tries every way in to /gy-secret (under ``root``); all must fail."""
    secret = _secret_rows(store, root)
    ids = {table: {r["id"] for r in rows} for table, rows in secret.items()}
    assert ids["facts"] and ids["episodes"] and ids["goals"]
    token = auth.create_token(store, [f"{root}/gx"], ["read", "write"], "tenant")["token"]
    tenant_ns = f"{root}/gx"
    async with served(store) as app, session(app, token) as client:
        denied: list[tuple[str, Any]] = []

        async def refused(tool: str, arguments: dict[str, Any]) -> None:
            failed, body = await _call(client, tool, arguments)
            assert failed and body["error"] in SCOPE_ERRORS, (tool, arguments, body)
            denied.append((tool, body["error"]))

        failed, own = await _call(client, "query_facts", {"include_history": True})
        assert not failed and _items(own), own
        for fact in ids["facts"]:
            await refused("create_causal_link", {"namespace": tenant_ns, "cause_id": fact,
                                                 "effect_id": _items(own)[0]["id"]})
            await refused("get_fact", {"id": fact, "include_lineage": True})
            await refused("withdraw_fact", {"id": fact, "reason": "the tenant says so"})
            await refused("trace_causal_chain", {"fact_id": fact, "direction": "forward"})
        for episode in ids["episodes"]:
            await refused("get_episode", {"id": episode})
        for goal in ids["goals"]:
            await refused("show_goal", {"id": goal})

        # what the token is shown of its own tree: follow it all, resolve what can be resolved
        shown: list[Any] = []
        failed, listed = await _call(client, "list_contradictions", {"include_resolved": True})
        assert not failed, listed
        for contradiction in _items(listed):
            shown.append(contradiction)
            if not contradiction.get("resolved"):
                failed, body = await _call(client, "resolve_contradiction",
                                            {"id": contradiction["id"], "resolution": "keep_new"})
                shown.append(body)
        for fact in _items(own):
            for tool, arguments in (("get_fact", {"id": fact["id"], "include_lineage": True}),
                                    ("trace_causal_chain", {"fact_id": fact["id"], "direction": "backward"}),
                                    ("trace_causal_chain", {"fact_id": fact["id"], "direction": "forward"})):
                failed, body = await _call(client, tool, arguments)
                shown.append(body)
        failed, goals = await _call(client, "list_goals", {})
        shown.append(goals)
        for table, kind_ids in (("facts", ids["facts"]), ("episodes", ids["episodes"]), ("goals", ids["goals"])):
            named = _ids_named(shown)
            assert not (named & kind_ids), f"the token was shown a secret {table} id: {named & kind_ids}"
    assert denied
    assert _secret_rows(store, root) == secret, "a secret row changed"


def _items(body: Any) -> list[Any]:
    """The records of a list answer (a list, or the one list in an object)."""
    if isinstance(body, list):
        return body
    [items] = [v for v in body.values() if isinstance(v, list)]
    return items


def _ids_named(value: Any) -> set[int]:
    """Every integer under a key that names a record id."""
    found: set[int] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, int) and not isinstance(item, bool) and (key == "id" or key.endswith("_id")):
                found.add(item)
            elif isinstance(item, list) and key.endswith("_ids"):
                found |= {i for i in item if isinstance(i, int)}
            found |= _ids_named(item)
    elif isinstance(value, list):
        for item in value:
            found |= _ids_named(item)
    return found


async def test_after_a_go_migration_a_tenant_token_cannot_reach_the_secret_namespace(
        store: Any, database_url: str, pg_admin_dsn: str, tmp_path: Path) -> None:
    _spread_ids(store)
    with go_database(pg_admin_dsn, SCOPE_ESCAPE) as dsn:
        _stash(database_url, tmp_path, "migrate-from-go", "--from", dsn)
    await _attack(store, "")


async def test_after_importing_a_hand_edited_export_a_tenant_token_cannot_reach_the_secret_namespace(
        store: Any, database_url: str, tmp_path: Path) -> None:
    _spread_ids(store)
    secret, old, new, goal = secret_and_tenant(store, "/src")
    _sql(store, "INSERT INTO episodes (namespace_id, content, embedding, embedding_model) SELECT n.id, "
         "'the secret episode', e.embedding, e.embedding_model FROM namespaces n, facts e "
         "WHERE n.slug = '/src/gy-secret' AND e.id = %s", secret)
    [episode] = _sql(store, "SELECT id FROM episodes WHERE content = 'the secret episode'")
    path = tmp_path / "src.jsonl"
    _stash(database_url, tmp_path, "export", str(path), "-n", "/src")
    lines = path.read_text().splitlines()
    edited = [lines[0]]
    for line in lines[1:]:
        record = json.loads(line)
        row = record["row"]
        if record["type"] == "contradiction":
            row["old_fact_id"] = secret
        elif record["type"] == "causal_link":
            row["cause_fact_id"] = secret
        elif record["type"] == "fact" and row["id"] == old:
            row["superseded_by"] = secret
        elif record["type"] == "goal" and row["content"] == "tenant goal":
            row["parent_id"] = goal
        edited.append(json.dumps(record))
    at = next((i for i, line in enumerate(edited) if json.loads(line)["type"] == "dead_letter"), len(edited))
    edited.insert(at, json.dumps({"type": "lineage", "row": {  # the tenant's fact drawn from the secret episode
        "child_kind": "fact", "child_id": new, "parent_kind": "episode", "parent_id": episode["id"],
        "namespace_id": _namespace_id(lines, "/src/gx"), "created_at": "2026-01-01T00:00:00+00:00"}}))
    path.write_text("\n".join(edited) + "\n")
    _sql(store, "DELETE FROM namespaces WHERE slug LIKE '/src/%%' OR slug = '/src'")  # restored onto an empty server
    _stash(database_url, tmp_path, "import", str(path))
    await _attack(store, "/src")


def _namespace_id(lines: list[str], slug: str) -> int:
    for line in lines[1:]:
        record = json.loads(line)
        if record["type"] == "namespace" and record["row"]["slug"] == slug:
            return int(record["row"]["id"])
    raise AssertionError(slug)
