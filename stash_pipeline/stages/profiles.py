"""Profiles stage: per entity and aspect, its current facts gathered across sessions (no model).

A question about a person's hobbies or trips has its answer in many facts from many
sessions, each phrased around its own event; no one of them ranks for "What hobbies
does Evan pursue?". A profile fact gathers them: "Evan's hobbies and interests: took up
watercolour painting; goes kayaking on weekends; ...", and recall finds it like any fact.

Input: the entities whose profiles were withdrawn (``profile_requests``, the second
source: a member retired, a source forgotten; deleted once handled), then those
(``facts.entity_id``) of the facts after the stage's cursor, read in chunks of
``BATCH``; for each, its current facts (profiles aside).
Assignment: a fact joins the aspect of ``ASPECTS`` its vector is nearest to, if at least
``MIN_SIMILARITY`` (cosine, the stored embedding against the aspect's description);
an aspect keeps its ``MEMBERS`` nearest facts, skipping one at ``DUPLICATE`` cosine or
more to a fact already kept, and becomes a profile when it keeps two or more.
Output: one fact per (entity, aspect), origin 'profile', confidence the members' mean,
event time from the latest member's start to the earliest member's end; lineage to each
member and to the members' source episodes (recall shows those as its sources). An
entity's current profiles that its facts no longer give are withdrawn, identical ones kept.
A profile never outlives a member: a member withdrawn, superseded or expired withdraws
it and asks for the entity again (migration 0020). The batch share-locks the members it
writes profiles of; one retired since the read keeps the entity's profiles out of the
batch and asks for it again.
Cursor: the last fact id read; aux cursor: the last request id handled. Profiles are no
stage's input (nor in any stage's backlog).
Idempotency: a second run over the same facts writes nothing (contents compare equal).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

from stash_pipeline.embedding.vectors import unit_vector
from stash_pipeline.memory import facts

if TYPE_CHECKING:
    from stash_pipeline.stages.context import Batch, StageContext

#: aspect -> the description its facts are compared with (by cosine of the embeddings)
ASPECTS: dict[str, str] = {
    "hobbies and interests": "hobbies, pastimes and interests: what they do for fun in their free time",
    "achievements": "achievements and milestones: something they accomplished, finished, passed or won",
    "setbacks": "setbacks and problems: an injury, illness, accident, loss or something that went wrong",
    "learning": "learning: a course, class, lessons or studies they signed up for",
    "work": "work and career: their job, role, promotion, colleagues, workplace",
    "family and friends": "family, partner, friends and pets",
    "travel": "travel: trips, places visited, vacations planned",
    "health": "health and fitness: exercise, diet, sleep, doctor",
    "home": "home: where they live, moving house, the garden",
    "plans": "plans and goals: what they intend, hope or plan to do",
    "likes": "likes and preferences: favourite food, music, books, things they love",
}
#: a fact nearer than this to every aspect belongs to none
MIN_SIMILARITY = 0.15
#: facts one profile gathers, at most
MEMBERS = 8
#: a fact this similar to one already gathered says the same again
DUPLICATE = 0.85
#: facts read per batch (their entities' profiles are written together)
BATCH = 1000


def run(ctx: StageContext) -> None:
    aspects = np.asarray([unit_vector(v) for v in ctx.embed(list(ASPECTS.values()))])
    (head,) = ctx.read("stage_profiles_requests_head", namespace_id=ctx.namespace_id)
    after, upto = 0, int(head["id"])
    while requests := ctx.read("stage_profiles_requests", namespace_id=ctx.namespace_id, after=after, upto=upto,
                               limit=BATCH):
        after = int(requests[-1]["id"])
        _gather_and_write(ctx, aspects, sorted({int(r["entity_id"]) for r in requests}),
                          aux_cursor=after, handled=[int(r["id"]) for r in requests])
    while True:
        (touched,) = ctx.read("stage_profiles_touched", namespace_id=ctx.namespace_id, cursor=ctx.cursor, limit=BATCH)
        if touched["last_id"] is None:
            return
        _gather_and_write(ctx, aspects, list(touched["entity_ids"]), cursor=int(touched["last_id"]))


def _gather_and_write(ctx: StageContext, aspects: np.ndarray, entity_ids: list[int], *, cursor: int | None = None,
                      aux_cursor: int | None = None, handled: list[int] | None = None) -> None:
    """The entities' profiles from their current facts, in one batch with the cursor moved
    and the requests ``handled`` deleted."""
    members = ctx.read("stage_profiles_members", namespace_id=ctx.namespace_id, entity_ids=entity_ids)
    ctx.report.rows_in += len(members)
    wanted = [draft for entity_facts in _by_entity(members).values() for draft in gather(entity_facts, aspects)]
    for draft, vector in zip(wanted, ctx.embed([d["content"] for d in wanted]), strict=True):
        draft["embedding"] = vector
    with ctx.batch(cursor=cursor, aux_cursor=aux_cursor) as batch:
        written, withdrawn = _write(ctx, batch, wanted, entity_ids)
        if handled:
            batch.tx.execute("stage_profiles_requests_done", ids=handled)
        batch.wrote(written)
    for key, count in (("profiles_written", written), ("profiles_withdrawn", withdrawn)):
        ctx.report.details[key] = ctx.report.details.get(key, 0) + count


def _write(ctx: StageContext, batch: Batch, wanted: list[dict[str, Any]], entity_ids: list[int]) -> tuple[int, int]:
    """The entities' profiles as ``wanted`` (those whose members are all still current; an
    entity with a member retired meanwhile is asked for again): new ones inserted,
    identical ones kept, the rest withdrawn. Returns (written, withdrawn)."""
    member_ids = sorted({i for d in wanted for kind, i in d["parents"] if kind == "fact"})
    live = {int(r["id"]) for r in batch.tx.all("stage_profiles_lock_members", ids=member_ids)}
    moved = sorted({d["entity_id"] for d in wanted if any(i not in live for kind, i in d["parents"] if kind == "fact")})
    wanted = [d for d in wanted if d["entity_id"] not in moved]
    if moved:
        batch.tx.execute("stage_profiles_request", namespace_id=ctx.namespace_id, entity_ids=moved)
    current = batch.tx.all("stage_profiles_current", namespace_id=ctx.namespace_id,
                           entity_ids=[i for i in entity_ids if i not in moved])
    given = {(d["entity_id"], d["content"]) for d in wanted}
    kept = {(int(r["entity_id"]), r["content"]) for r in current}
    stale = [int(r["id"]) for r in current if (int(r["entity_id"]), r["content"]) not in given]
    batch.tx.execute("stage_profiles_withdraw", ids=stale)
    written = 0
    for draft in wanted:
        if (draft["entity_id"], draft["content"]) in kept:
            continue
        row = facts.insert_fact(
            batch.tx, ctx.store, namespace_id=ctx.namespace_id, content=draft["content"], origin="profile",
            confidence=draft["confidence"], entity=draft["entity"], parents=draft["parents"],
            embedding=draft["embedding"], valid_from=draft["valid_from"], valid_until=draft["valid_until"],
        )
        batch.tx.execute("entity_link_fact", id=int(row["id"]), entity_id=draft["entity_id"])
        written += 1
    return written, len(stale)


def _by_entity(rows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    grouped: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[int(row["entity_id"])].append(row)
    return grouped


def gather(entity_facts: list[dict[str, Any]], aspects: np.ndarray) -> list[dict[str, Any]]:
    """The profiles one entity's current facts give: one per aspect with two or more members."""
    names = list(ASPECTS)
    vectors = np.asarray([unit_vector(f["embedding"]) for f in entity_facts])
    similarity = vectors @ aspects.T
    by_aspect: dict[int, list[int]] = defaultdict(list)
    for i, row in enumerate(similarity):
        best = int(np.argmax(row))
        if row[best] >= MIN_SIMILARITY:
            by_aspect[best].append(i)
    name = Counter(f["entity"] for f in entity_facts).most_common(1)[0][0]
    drafts = []
    for aspect, candidates in sorted(by_aspect.items()):
        chosen: list[int] = []
        for i in sorted(candidates, key=lambda i: (-similarity[i, aspect], entity_facts[i]["id"])):
            if all(float(vectors[i] @ vectors[j]) < DUPLICATE for j in chosen):
                chosen.append(i)
                if len(chosen) == MEMBERS:
                    break
        if len(chosen) < 2:
            continue
        members = [entity_facts[i] for i in chosen]
        ends = [m["valid_until"] for m in members if m["valid_until"] is not None]
        drafts.append({
            "entity_id": int(members[0]["entity_id"]),
            "entity": name,
            "content": f"{name}'s {names[aspect]}: " + "; ".join(_about(m["content"], name) for m in members),
            "confidence": float(np.mean([m["confidence"] for m in members])),
            "parents": [("fact", int(m["id"])) for m in members]
            + sorted({("episode", int(e)) for m in members for e in m["episode_ids"]}),
            "valid_from": max(m["valid_from"] for m in members),
            "valid_until": min(ends) if ends else None,
        })
    return drafts


def _about(content: str, name: str) -> str:
    """A member's text without its leading subject ("Evan took up ..." -> "took up ...")."""
    return content.removeprefix(f"{name} ").removeprefix(f"{name}'s ").rstrip(".")
