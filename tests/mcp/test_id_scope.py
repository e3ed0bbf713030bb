"""Reads and writes by id stay inside the token's trees, even between a parent and its child.

A token for ``/a/b`` (the child) must learn nothing about ``/a`` (its parent) that the
parent's records alone hold: not through an entity's lists, a goal or failure attached
by id, a fact's lineage, the report of a cascade, nor recall's scores and context. The
records are written by an admin token for ``/``; each test then calls as the child (or,
for a link written in ``/``, as a token for ``/a``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest

from stash_pipeline import auth
from stash_pipeline.memory import namespaces
from tests.mcp.asgi import served, session

pytestmark = pytest.mark.anyio


async def _call(client: Any, tool: str, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    result = await client.call_tool(tool, arguments)
    return bool(result.is_error), json.loads(result.content[0].text)


async def _ok(client: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    failed, body = await _call(client, tool, arguments)
    assert not failed, f"{tool}: {body}"
    return body


def _tokens(store: Any) -> tuple[str, str, str]:
    """(admin of /, writer of /a, writer of /a/b), with /a, /a/b and /b made."""
    for slug in ("/a", "/a/b", "/b"):
        namespaces.create(store, slug)
    admin = auth.create_token(store, ["/"], ["read", "write", "admin"], "admin")["token"]
    parent = auth.create_token(store, ["/a"], ["read", "write"], "parent")["token"]
    child = auth.create_token(store, ["/a/b"], ["read", "write"], "child")["token"]
    return admin, parent, child


async def _fact(client: Any, namespace: str, content: str, **more: Any) -> int:
    made = await _ok(client, "assert_fact", {"namespace": namespace, "content": content, **more})
    return int(made["fact"]["id"])


async def test_get_entity_lists_no_causal_link_outside_the_trees(store: Any) -> None:
    """An entity's causal links are those inside the caller's trees."""
    admin, parent, child = _tokens(store)
    async with served(store) as app:
        async with session(app, admin) as client:
            # an /a/b entity whose fact is the cause of an /a link to an /a fact
            cause = await _fact(client, "/a/b", "Alice reviews releases", entity="Alice", property="role",
                                value="reviewer")
            effect = await _fact(client, "/a", "Releases ship late", entity="releases", property="pace",
                                 value="late")
            link = await _ok(client, "create_causal_link", {
                "namespace": "/a", "cause_id": cause, "effect_id": effect, "rationale": "parent-only reasoning"})
            # an /a entity whose fact causes a /b fact, by a link written in /
            own = await _fact(client, "/a", "Bob owns the build", entity="Bob", property="owns", value="build")
            foreign = await _fact(client, "/b", "The /b build is red", entity="build", property="state", value="red")
            await _ok(client, "create_causal_link", {"namespace": "/", "cause_id": own, "effect_id": foreign})
            seen = await _ok(client, "get_entity", {"name": "Alice"})
            assert [c["id"] for c in seen["causal_links"]] == [link["id"]]  # the admin sees it
        async with session(app, child) as client:
            body = await _ok(client, "get_entity", {"name": "Alice"})
            assert body["causal_links"] == [], body
            text = json.dumps(body)
            assert "parent-only reasoning" not in text and f'"effect_fact_id": {effect}' not in text
        async with session(app, parent) as client:
            body = await _ok(client, "get_entity", {"name": "Bob"})
            assert body["causal_links"] == [], body  # the / link and its /b id stay out


async def test_a_goal_outside_the_trees_is_no_parent_and_no_goal_of_a_failure(store: Any) -> None:
    """An /a goal is record_not_found to the /a/b token whatever the call."""
    admin, _, child = _tokens(store)
    async with served(store) as app:
        async with session(app, admin) as client:
            active = (await _ok(client, "create_goal", {"namespace": "/a", "content": "Ship the parent plan"}))["id"]
            done = (await _ok(client, "create_goal", {"namespace": "/a", "content": "Finished parent work"}))["id"]
            step = (await _ok(client, "create_goal", {"namespace": "/a", "content": "Its one step",
                                                      "parent_id": active}))["id"]
            await _ok(client, "complete_goal", {"id": done})
        async with session(app, child) as client:
            for goal in (active, done):
                failed, body = await _call(client, "show_goal", {"id": goal})
                assert failed and body["error"] == "record_not_found", body
                for tool, arguments in (
                    ("create_goal", {"namespace": "/a/b", "content": "A child step", "parent_id": goal}),
                    ("create_failure", {"namespace": "/a/b", "content": "It broke", "reason": "no canary",
                                        "lesson": "canary first", "goal_id": goal}),
                ):
                    failed, body = await _call(client, tool, arguments)
                    assert failed and body["error"] == "record_not_found", (tool, body)
                    assert "completed" not in body["message"], body  # the status stays unknown
            assert (await _ok(client, "list_goals", {}))["items"] == []
            assert (await _ok(client, "list_failures", {}))["items"] == []
        async with session(app, admin) as client:
            # no child of /a/b holds the /a goal open: its last step completes it
            finished = await _ok(client, "complete_goal", {"id": step})
            assert finished["auto_completed"] == [active], finished


async def test_a_record_in_the_trees_shows_no_goal_id_above_them(store: Any) -> None:
    """An /a/b goal or failure attached by the admin to an /a goal shows the /a/b token no
    parent_id / goal_id, in show and list alike, and cannot be filtered by that id; the
    /a token, whose trees hold the /a goal, still sees it."""
    admin, parent, child = _tokens(store)
    async with served(store) as app:
        async with session(app, admin) as client:
            above = (await _ok(client, "create_goal", {"namespace": "/a", "content": "Parent plan"}))["id"]
            below = await _ok(client, "create_goal", {"namespace": "/a/b", "content": "Child step",
                                                      "parent_id": above})
            failure = await _ok(client, "create_failure", {"namespace": "/a/b", "content": "It broke",
                                                           "reason": "no canary", "lesson": "canary first",
                                                           "goal_id": above})
            assert below["parent_id"] == above and failure["goal_id"] == above
        async with session(app, child) as client:
            shown = await _ok(client, "show_goal", {"id": below["id"]})
            listed = (await _ok(client, "list_goals", {}))["items"]
            assert shown["parent_id"] is None and [g["parent_id"] for g in listed] == [None], (shown, listed)
            shown = await _ok(client, "show_failure", {"id": failure["id"]})
            listed = (await _ok(client, "list_failures", {}))["items"]
            assert shown["goal_id"] is None and [f["goal_id"] for f in listed] == [None], (shown, listed)
            assert (await _ok(client, "list_goals", {"parent_id": above}))["items"] == []
            assert (await _ok(client, "list_failures", {"goal_id": above}))["items"] == []
            assert (await _ok(client, "update_goal", {"id": below["id"], "priority": 3}))["parent_id"] is None
        async with session(app, parent) as client:
            assert (await _ok(client, "show_goal", {"id": below["id"]}))["parent_id"] == above
            listed = (await _ok(client, "list_goals", {"namespaces": ["/a/b"]}))["items"]
            assert [g["parent_id"] for g in listed] == [above]
            listed = (await _ok(client, "list_failures", {"goal_id": above}))["items"]
            assert [f["goal_id"] for f in listed] == [above]


async def test_recall_known_at_gives_no_context_turn_stored_after_it(store: Any) -> None:
    """A turn stored after known_at (or occurring after as_of) is no context either."""
    admin, _, _ = _tokens(store)
    session_meta = {"session": "s-1"}
    async with served(store) as app, session(app, admin) as client:
        first = (await _ok(client, "remember", {"namespace": "/a/b", "metadata": session_meta,
                                                "content": "The nightly export times out at midnight",
                                                "occurred_at": "2024-01-01T10:00:00+00:00"}))["id"]
        await anyio.sleep(0.05)
        between = datetime.now(UTC).isoformat()
        await anyio.sleep(0.05)
        later = (await _ok(client, "remember", {"namespace": "/a/b", "metadata": session_meta,
                                                "content": "Raised the statement timeout; fixed",
                                                "occurred_at": "2024-06-01T10:00:00+00:00"}))["id"]
        # one result, so the later turn can only come back as its context
        asked = {"query": "nightly export times out", "namespaces": "/a/b", "limit": 1}
        now = await _ok(client, "recall", asked)
        hit = next(r for r in now["results"] if r["id"] == first)
        assert later in [c["id"] for c in hit.get("context", [])], now  # today the later turn is context
        for when in ({"known_at": between}, {"as_of": "2024-03-01T00:00:00+00:00"}):
            then = await _ok(client, "recall", {**asked, **when})
            assert later not in [r["id"] for r in then["results"]], (when, then)
            hit = next(r for r in then["results"] if r["id"] == first)
            assert later not in [c["id"] for c in hit.get("context", [])], (when, then)


async def test_lineage_and_cascades_hand_out_no_id_outside_the_trees(store: Any) -> None:
    """Get_fact's lineage, withdraw_fact's cascade and purge_episode's erasure reports name
    only records in the caller's trees; the cascade and the erasure still run across the boundary."""
    admin, _, child = _tokens(store)
    async with served(store) as app:
        async with session(app, admin) as client:
            turn = (await _ok(client, "remember", {"namespace": "/a/b", "content": "Deploys happen on Fridays"}))["id"]
            derived = await _fact(client, "/a", "Deploys are on Fridays", source_episode_ids=[turn])
            mine = await _fact(client, "/a/b", "Carol runs the deploys", entity="Carol", property="runs",
                               value="deploys")
            theirs = await _fact(client, "/a", "Deploys page the parent on-call")
            link = (await _ok(client, "create_causal_link", {"namespace": "/a", "cause_id": mine,
                                                             "effect_id": theirs}))["id"]
            lineage = await _ok(client, "get_fact", {"id": mine, "include_lineage": True})
            assert {"kind": "causal_link", "id": link} in lineage["children"], lineage  # the admin sees it
        async with session(app, child) as client:
            lineage = await _ok(client, "get_fact", {"id": mine, "include_lineage": True})
            assert lineage["children"] == [] and lineage["parents"] == [], lineage
            withdrawn = await _ok(client, "withdraw_fact", {"id": mine, "reason": "Carol left"})
            assert withdrawn["cascade"]["withdrawn"].get("causal_link", 0) == 0, withdrawn
            assert withdrawn["cascade"]["withdrawn_fact_ids"] == [], withdrawn
            purged = await _ok(client, "purge_episode", {"id": turn})
            assert purged["erased"] == {"erased_fact_ids": [], "erased": {"episode": 1}}, purged
        async with session(app, admin) as client:
            # the cascade ran: nothing derived from a purged source survives, no link on a withdrawn cause
            failed, body = await _call(client, "get_fact", {"id": derived})
            assert failed and body["error"] == "record_not_found", body
            links = await _ok(client, "list_causal_links", {"namespaces": "/a", "include_withdrawn": True})
            assert [c["withdrawn_at"] is not None for c in links["items"] if c["id"] == link] == [True], links


async def test_a_parent_withdrawal_does_not_demote_a_child_episode_in_its_recall(store: Any) -> None:
    """Stale demotion counts only the facts the recall can see."""
    admin, _, child = _tokens(store)
    query = {"query": "when do deploys happen", "namespaces": "/a/b"}
    async with served(store) as app:
        async with session(app, admin) as client:
            turn = (await _ok(client, "remember", {"namespace": "/a/b", "content": "Deploys happen on Fridays"}))["id"]
            derived = await _fact(client, "/a", "Deploys are on Fridays", source_episode_ids=[turn])
        async with session(app, child) as client:
            before = next(r["score"] for r in (await _ok(client, "recall", query))["results"] if r["id"] == turn)
        async with session(app, admin) as client:
            await _ok(client, "withdraw_fact", {"id": derived, "reason": "the parent moved deploys"})
        async with session(app, child) as client:
            after = next(r["score"] for r in (await _ok(client, "recall", query))["results"] if r["id"] == turn)
    assert after == pytest.approx(before, rel=0.01), (before, after)
