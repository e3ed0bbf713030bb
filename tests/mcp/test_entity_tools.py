"""Entity tools over the real MCP client: get_entity, merge_entities, split_entity."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from tests.mcp.conftest import fails, ok

pytestmark = pytest.mark.anyio


async def _assert(client: Client, content: str, entity: str) -> int:
    made = await ok(client, "assert_fact", {"content": content, "namespace": "/team", "entity": entity,
                                            "property": "note", "value": content.split()[-1]})
    return made["fact"]["id"]


async def test_merge_and_split_through_the_tools(server: Any) -> None:
    async with Client(server) as client:
        await ok(client, "create_namespace", {"namespace": "/team", "description": "people"})
        first = await _assert(client, "Alice reviews every release on Tuesday", "Alice")
        second = await _assert(client, "alice owns the billing runbook", "alice")  # same alias
        third = await _assert(client, "Ally leads the Lisbon office", "Ally")

        alice = await ok(client, "get_entity", {"name": "ALICE", "namespaces": "/team"})
        assert [f["id"] for f in alice["facts"]] == [first, second]
        ally = await ok(client, "get_entity", {"name": "Ally"})
        assert ally["entity"]["id"] != alice["entity"]["id"]

        merged = await ok(client, "merge_entities", {"id": alice["entity"]["id"], "merge_id": ally["entity"]["id"],
                                                     "note": "same person"})
        assert merged["moved"]["aliases"] == ["ally"] and merged["moved"]["facts"] == 1
        both = await ok(client, "get_entity", {"id": ally["entity"]["id"]})
        assert both["entity"]["id"] == alice["entity"]["id"] and both["requested_id"] == ally["entity"]["id"]
        assert [f["id"] for f in both["facts"]] == [first, second, third]

        split = await ok(client, "split_entity", {"id": alice["entity"]["id"], "aliases": ["Ally"]})
        assert split["revived"] is True and split["new_id"] == ally["entity"]["id"]
        again = await ok(client, "get_entity", {"id": ally["entity"]["id"]})
        assert [f["id"] for f in again["facts"]] == [third]
        assert [c["action"] for c in again["corrections"]] == ["merge", "split"]

        same = await fails(client, "merge_entities", {"id": alice["entity"]["id"], "merge_id": alice["entity"]["id"]})
        assert same["error"] == "invalid_input"
        last = await fails(client, "split_entity", {"id": ally["entity"]["id"], "aliases": ["ally"]})
        assert last["error"] == "invalid_input" and "at least one alias" in last["message"]
        nobody = await fails(client, "get_entity", {"name": "Zed"})
        assert nobody["error"] == "record_not_found"


async def test_get_entity_pages_every_list(server: Any) -> None:
    async with Client(server) as client:
        await ok(client, "create_namespace", {"namespace": "/team", "description": "people"})
        await _assert(client, "Alice reviews every release", "Alice")
        alice = (await ok(client, "get_entity", {"name": "Alice"}))["entity"]["id"]
        for i in range(4):  # four more names, each merged in: five aliases, five facts
            await _assert(client, f"Alice {i} keeps notes number {i}", f"Alice {i}")
            other = (await ok(client, "get_entity", {"name": f"Alice {i}"}))["entity"]["id"]
            await ok(client, "merge_entities", {"id": alice, "merge_id": other})
        everything = await ok(client, "get_entity", {"name": "Alice"})
        assert len(everything["aliases"]) == 5 and len(everything["timeline"]) == 5
        assert everything["next_offset"] is None
        seen: dict[str, list[Any]] = {"aliases": [], "timeline": [], "merged_from": []}
        offset: int | None = 0
        pages = 0
        while offset is not None:
            page = await ok(client, "get_entity", {"name": "Alice", "limit": 2, "offset": offset})
            assert all(len(page[key]) <= 2 for key in seen)
            for key in seen:
                seen[key] += page[key]
            offset, pages = page["next_offset"], pages + 1
        assert pages == 3  # 2 + 2 + 1
        for key in seen:
            assert seen[key] == everything[key], key
        too_many = await fails(client, "get_entity", {"name": "Alice", "limit": 501})
        assert too_many["error"] == "invalid_input"
