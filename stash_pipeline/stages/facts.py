"""Facts stage: read new episodes with what they belong to and synthesise grounded facts.

Input: live episodes after the stage's cursor (``episodes.id``), ``consolidation_batch_size``
per batch; dead-lettered episodes (status pending) are retried first.
Grouping (``stages.conversations``): conversational episodes (a session or thread named in
metadata, or "Name: text" turns close in time) are read as WINDOWS of their thread — at
most ``WINDOW_TURNS`` new turns, shown after up to ``CONTEXT_TURNS`` earlier turns of the
thread and with its participants; everything else is clustered by meaning: greedy
centroid clustering at ``STASH_CONSOLIDATION_SIMILARITY_THRESHOLD`` followed by one
reassignment pass to the nearest centroid, so membership depends on the data rather than
on id order as far as practical.
Model: several clusters per call (``STASH_FACTS_CLUSTERS_PER_CALL``); windows go one per
call, except that short ones (a thread with few new turns) share a call up to the turns of
one full window (``conversations.pack``).
The answer may hold several facts per cluster or window, each
``{cluster, sources, entity, property, value, summary, valid_from}``, ``sources`` being the
ids of the items it rests on. An answer cut off at max_tokens is retried as two halves of
the batch (a window: two half windows, the second seeing the first as context); a single
cluster's cut-off answer is retried once, then dead-lettered. A cluster with no fact but
an empty summary — or, asked about alone, no entry at all — states nothing worth keeping
(chatter): processed, no fact, no dead letter.
Validation, per fact: its sources must be items of its cluster or window (ids it cites
outside it are dropped and counted); a fact citing none of them dead-letters the whole
cluster or window ("cites none of its items"), and a fact resting on earlier turns only is
skipped (those were consolidated when they were new). Then anti-verbatim (a summary may
not copy a source) and grounding against what the model was shown — the cluster, or the
window's turns and participants: every capitalised word / proper noun and every number in
summary, entity and value must occur there (or in the facts shown as known about the
participants), and most content words too ("Alice uses Python" cannot become "Bob owns
elephants"; a fact may name the participant a turn calls "you", but not a name the
conversation never mentions). A fact that fails dead-letters the
new turns it cites that no kept fact rests on; the cluster's other facts are kept.
Output: a fact (origin synthesis, confidence n/(n+2) + structure boost, n = its sources)
through ``memory.facts.insert_fact`` with lineage to exactly the episodes it cites. Its
event time starts at its evidence: the date the model says the sources state
(``valid_from``), else the earliest ``occurred_at`` of its sources, never later than now (a
plan is not yet a fact); it ends where a newer fact on its key begins when it arrives late
(history, see ``stages.contradictions``). Or, when the nearest current fact is at least
``STASH_CONSOLIDATION_DEDUP_THRESHOLD`` similar, that fact is REINFORCED (confidence toward
1, reinforcements + 1, updated_at) and gains lineage to the cited episodes. New facts then
go through the shared contradiction check, and each new fact's ``entity`` is resolved to
an entity of the namespace (``entity_resolution``).
Cursor: max episode id of the batch, committed with the outputs in one transaction.
Idempotency: a committed batch is never selected again (cursor); a rolled-back batch
wrote nothing; a cluster or fact that fails is dead-lettered per episode and the cursor
moves on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from stash_pipeline import errors
from stash_pipeline.embedding.vectors import unit_vector
from stash_pipeline.memory import lineage
from stash_pipeline.memory.facts import insert_fact
from stash_pipeline.memory.validate import MAX_TIMESTAMP, MIN_TIMESTAMP
from stash_pipeline.stages import common, contradictions, conversations, prompts
from stash_pipeline.stages.entity_resolution import Resolver
from stash_pipeline.stages.grounding import grounding_errors, validate, verbatim_error

if TYPE_CHECKING:
    from stash_pipeline.stages.context import StageContext

__all__ = ["grounding_errors", "process_episodes", "run", "validate", "verbatim_error"]

MAX_CLUSTER_SIZE = 12

# -- clustering -----------------------------------------------------------------------------------
def cluster(rows: list[dict[str, Any]], threshold: float) -> list[list[dict[str, Any]]]:
    """Greedy centroid clustering, then one pass moving every episode to its nearest centroid."""
    if not rows:
        return []
    vectors = [unit_vector(r["embedding"]) for r in rows]
    members: list[list[int]] = []
    sums: list[np.ndarray] = []
    for i, vec in enumerate(vectors):
        best, best_sim = -1, threshold
        for c, total in enumerate(sums):
            sim = float(np.dot(unit_vector(total), vec))
            if sim >= best_sim:
                best, best_sim = c, sim
        if best < 0:
            members.append([i])
            sums.append(vec.copy())
        else:
            members[best].append(i)
            sums[best] = sums[best] + vec
    centroids = [unit_vector(s) for s in sums]
    assigned: dict[int, list[int]] = {}
    for i, vec in enumerate(vectors):
        sims = [float(np.dot(c, vec)) for c in centroids]
        best = int(np.argmax(sims))
        home = next(c for c, m in enumerate(members) if i in m)
        target = best if sims[best] >= threshold else home
        assigned.setdefault(target, []).append(i)
    groups = sorted((sorted(m) for m in assigned.values() if m), key=lambda m: rows[m[0]]["id"])
    out: list[list[dict[str, Any]]] = []
    for group in groups:
        for start in range(0, len(group), MAX_CLUSTER_SIZE):
            out.append([rows[i] for i in group[start : start + MAX_CLUSTER_SIZE]])
    return out


def base_confidence(count: int, structured: bool) -> float:
    base = count / (count + 2)
    return base + 0.3 * (1 - base) if structured else base


# -- the stage ----------------------------------------------------------------------------------
@dataclass
class _Proposal:
    key: int
    draft: prompts.FactDraft
    episodes: list[int]
    confidence: float
    embedding: Any = None
    reinforce_id: int | None = None
    reinforce_key: int | None = None
    valid_from: datetime | None = None
    #: the group (cluster or window) it came from, and the NEW episodes among its sources
    group: int = 0
    new_episodes: list[int] = field(default_factory=list)


def event_start(draft: prompts.FactDraft, members: list[dict[str, Any]]) -> datetime:
    """When a drafted fact began to hold: the date the sources state (as the model read
    it), else the earliest source's occurred_at; never later than now."""
    now = datetime.now(UTC)
    stated = _stated_date(draft.valid_from)
    if stated is not None:
        return min(stated, now)
    return min([now, *(r["occurred_at"] for r in members if r.get("occurred_at") is not None)])


def _stated_date(text: str | None) -> datetime | None:
    """An ISO-8601 date or time from the model (UTC when it names no zone); None when unreadable."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    when = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    return when if MIN_TIMESTAMP <= when < MAX_TIMESTAMP else None


def run(ctx: StageContext) -> None:
    size = ctx.settings.consolidation_batch_size
    retry_ids = ctx.pending("episode", size)
    if retry_ids:
        rows = ctx.read("stage_facts_episodes_by_ids", namespace_id=ctx.namespace_id, ids=retry_ids)
        gone = sorted(set(retry_ids) - {int(r["id"]) for r in rows})
        # One cluster per call on a retry: a poison episode must not take the clusters that
        # once shared its model call down with it (they would be dead-lettered together).
        process_episodes(ctx, rows, cursor=None, resolved=gone, per_call=1)
    while True:
        rows = ctx.read("stage_facts_episodes_after", namespace_id=ctx.namespace_id, cursor=ctx.cursor, limit=size)
        if not rows:
            return
        process_episodes(ctx, rows, cursor=int(rows[-1]["id"]))


def group_episodes(ctx: StageContext, rows: list[dict[str, Any]]) -> list[conversations.Group]:
    """The batch as conversation windows (with their context) and embedding clusters, by first id."""
    found, rest = conversations.threads(rows)
    groups: list[conversations.Group] = []
    for thread, run_ in found:
        windows = conversations.windows(ctx, run_, thread)
        if windows is None:
            rest += run_  # one speaker, found by time alone: not a conversation
        else:
            groups += windows
    rest.sort(key=lambda r: int(r["id"]))
    groups += [conversations.Group(new=members) for members in cluster(rest, ctx.settings.consolidation_similarity_threshold)]
    groups.sort(key=lambda g: int(g.new[0]["id"]))
    common.bump(ctx, "windows", sum(g.conversational for g in groups))
    common.bump(ctx, "clusters", sum(not g.conversational for g in groups))
    return groups


def describe(number: int, group: conversations.Group) -> str:
    """One cluster or window of the user prompt, its items listed as ``[id] text``."""
    if not group.conversational:
        return f"Cluster {number} (related observations):\n" + prompts.listing(
            [(int(r["id"]), r["content"]) for r in group.new])
    when = conversations.header_date(group)
    head = f"Cluster {number} (a conversation window{', ' + when if when else ''})"
    lines = [f"{head}:", f"Participants: {', '.join(group.participants) or 'unknown'}"]
    if group.known:
        lines += ["Known from earlier sessions (for reference, not citable):",
                  *(f"- {' '.join(text.split())[:300]}" for text in group.known)]
    if group.context:
        lines += ["Earlier turns (context):",
                  prompts.listing([(int(r["id"]), conversations.text(r)) for r in group.context])]
    lines += ["New turns:", prompts.listing([(int(r["id"]), conversations.text(r)) for r in group.new])]
    return "\n".join(lines)


def ask(
    ctx: StageContext, groups: list[conversations.Group], per_call: int
) -> tuple[dict[int, list[prompts.FactDraft]], dict[int, str]]:
    """The model's drafts per group index, and the groups whose call failed (index -> reason).

    A window cut off at max_tokens is replaced by its two halves, appended to ``groups``.
    """
    drafts: dict[int, list[prompts.FactDraft]] = {}
    failures: dict[int, str] = {}
    windows = conversations.pack([i for i, g in enumerate(groups) if g.conversational],
                                 [len(g.shown) for g in groups], per_call)
    clusters = [i for i, g in enumerate(groups) if not g.conversational]
    calls = windows + [clusters[s : s + per_call] for s in range(0, len(clusters), per_call)]
    while calls:
        call = calls.pop(0)
        user = "\n\n".join(describe(n, groups[i]) for n, i in enumerate(call, 1))
        halvable = len(call) == 1 and groups[call[0]].conversational and len(groups[call[0]].new) > 1
        try:
            answer = ctx.call(prompts.FACTS, user, prompts.FactsAnswer, split_on_truncation=len(call) > 1 or halvable)
        except errors.ModelResponseInvalid as exc:
            if isinstance(exc, errors.ModelOutputTruncated) and len(call) > 1:
                # Cut off at max_tokens: retry as two smaller batches (each a smaller answer).
                calls[:0] = [call[: len(call) // 2], call[len(call) // 2 :]]
                continue
            if isinstance(exc, errors.ModelOutputTruncated) and halvable:
                first, second = conversations.halves(groups[call[0]])
                groups[call[0]] = conversations.Group(new=[])  # replaced by its halves
                groups += [first, second]
                calls[:0] = [[len(groups) - 2], [len(groups) - 1]]
                continue
            for i in call:
                failures[i] = f"ModelResponseInvalid: {exc.message}"
            continue
        by_number: dict[int, list[prompts.FactDraft]] = {}
        for draft in answer.facts:
            by_number.setdefault(draft.cluster, []).append(draft)
        for n, i in enumerate(call, 1):
            if n in by_number:
                drafts[i] = by_number[n]
            elif len(call) == 1:
                # Asked about this group alone, the model derived nothing: chatter, not a
                # failure (an omission among several clusters may be a slip, so that one
                # goes back for a call of its own).
                drafts[i] = []
            else:
                failures[i] = "ModelResponseInvalid: the answer has no fact for this cluster"
    return drafts, failures


def check(
    ctx: StageContext, index: int, group: conversations.Group, drafts: list[prompts.FactDraft], first_key: int
) -> tuple[list[_Proposal], list[tuple[list[int], str]], str | None]:
    """A group's drafts as proposals; the facts refused (their new episodes, why); a group failure."""
    shown = {int(r["id"]): r for r in group.shown}
    new = set(group.new_ids)
    texts = [conversations.text(r) for r in group.shown]
    proposals: list[_Proposal] = []
    refused: list[tuple[list[int], str]] = []
    for n, draft in enumerate(drafts, 1):
        summary = (draft.summary or "").strip()
        if not summary:
            continue  # nothing worth keeping
        cited = [i for i in dict.fromkeys(draft.sources) if i in shown]
        common.bump(ctx, "citations_dropped", len(set(draft.sources)) - len(cited))
        if not cited:
            what = "cluster" if not group.conversational else "window"
            return [], [], (f"fact {n} of the {what} ({summary[:80]!r}) cites none of its items "
                            f"(cited {sorted(set(draft.sources))}; listed {sorted(shown)})")
        cited_new = [i for i in cited if i in new]
        if not cited_new:
            common.bump(ctx, "facts_on_earlier_turns")
            continue
        problems = validate(draft, texts, [*group.participants, *group.known])
        if problems:
            common.bump(ctx, "facts_refused")
            refused.append((cited_new, f"grounding of {summary[:80]!r}: " + "; ".join(problems)))
            continue
        members = [shown[i] for i in cited]
        proposals.append(_Proposal(
            key=first_key + len(proposals),
            draft=draft,
            episodes=sorted(cited),
            confidence=base_confidence(len(cited), bool(draft.entity and draft.property)),
            valid_from=event_start(draft, members),
            group=index,
            new_episodes=sorted(cited_new),
        ))
    return proposals, refused, None


def process_episodes(
    ctx: StageContext,
    rows: list[dict[str, Any]],
    *,
    cursor: int | None,
    resolved: list[int] | None = None,
    per_call: int | None = None,
) -> None:
    settings = ctx.settings
    ctx.report.rows_in += len(rows)
    groups = group_episodes(ctx, rows)
    drafts, failures = ask(ctx, groups, per_call or settings.facts_clusters_per_call)

    proposals: dict[int, _Proposal] = {}
    refused: dict[int, list[tuple[list[int], str]]] = {}
    for index in sorted(drafts):
        kept, refused[index], failure = check(ctx, index, groups[index], drafts[index], len(proposals))
        if failure:
            failures[index] = failure
            continue
        proposals |= {p.key: p for p in kept}

    ordered = list(proposals.values())
    vectors = ctx.embed([(p.draft.summary or "").strip() for p in ordered])
    dedup = settings.consolidation_dedup_threshold
    created: list[_Proposal] = []
    for proposal, vector in zip(ordered, vectors, strict=True):
        proposal.embedding = vector
        nearest = ctx.nearest_fact(vector)
        if nearest and float(nearest["similarity"]) >= dedup:
            proposal.reinforce_id = int(nearest["id"])
            continue
        unit = unit_vector(vector)
        twin = next((p for p in created if float(np.dot(unit_vector(p.embedding), unit)) >= dedup), None)
        if twin is not None:
            proposal.reinforce_key = twin.key
            continue
        created.append(proposal)

    # entity resolution: decided before the transaction (it may ask the model), and before
    # the contradiction check, which also compares facts stated under another alias
    resolver = Resolver(ctx)
    resolver.plan(p.draft.entity for p in created)

    checked = {
        p.key: contradictions.NewFact(p.key, p.draft.entity, p.draft.property, p.draft.value, p.valid_from,
                                      entity_id=resolver.known_entity(p.draft.entity))
        for p in created
    }
    verdicts, failed_keys = contradictions.plan(ctx, list(checked.values()))
    for key in failed_keys:
        proposal = proposals.pop(key)
        refused.setdefault(proposal.group, []).append(
            (proposal.new_episodes, "ModelResponseInvalid: the contradiction check got no valid answer"))

    by_group: dict[int, list[_Proposal]] = {}
    for proposal in proposals.values():
        by_group.setdefault(proposal.group, []).append(proposal)
    with ctx.batch(cursor=cursor) as batch:
        if resolved:
            batch.done("episode", resolved)
        fact_ids: dict[int, int] = {}
        for index, group in enumerate(groups):
            if not group.new:
                continue  # a window replaced by its halves
            if index in failures:
                batch.fail("episode", group.new_ids, failures[index])
                continue
            # a refused fact dead-letters the turns it cites that no kept fact rests on: a
            # retry of the others would only derive their facts again
            kept = {i for proposal in by_group.get(index, []) for i in proposal.episodes}
            for ids, reason in refused.get(index, []):
                if orphaned := [i for i in ids if i not in kept]:
                    batch.fail("episode", orphaned, reason)
            for proposal in by_group.get(index, []):
                with batch.item("episode", proposal.new_episodes):
                    _write(ctx, batch, proposal, fact_ids, resolver, checked)
            batch.done("episode", group.new_ids)  # a failure recorded above wins over this
        contradictions.apply(ctx, batch, verdicts, fact_ids)


def _write(ctx: StageContext, batch: Any, proposal: _Proposal, fact_ids: dict[int, int], resolver: Resolver,
           checked: dict[int, contradictions.NewFact]) -> None:
    """One proposal: reinforce the fact it repeats, or insert it (lineage, entity link)."""
    target = proposal.reinforce_id
    if target is None and proposal.reinforce_key is not None:
        target = fact_ids.get(proposal.reinforce_key)
    if target is not None:
        _reinforce(ctx, batch, target, proposal)
        return
    draft = proposal.draft
    row = insert_fact(
        batch.tx,
        ctx.store,
        namespace_id=ctx.namespace_id,
        content=(draft.summary or "").strip(),
        origin="synthesis",
        confidence=proposal.confidence,
        entity=(draft.entity or "").strip() or None,
        property=(draft.property or "").strip() or None,
        value=(draft.value or "").strip() or None,
        parents=[("episode", i) for i in proposal.episodes],
        embedding=proposal.embedding,
        valid_from=proposal.valid_from,
        valid_until=checked[proposal.key].valid_until if proposal.key in checked else None,
    )
    resolver.link_fact(batch.tx, int(row["id"]), draft.entity)  # entity resolution
    batch.wrote(1)
    common.bump(ctx, "facts_created")
    fact_ids[proposal.key] = int(row["id"])


def _reinforce(ctx: StageContext, batch: Any, fact_id: int, proposal: _Proposal) -> None:
    gain = 0.5 * len(proposal.episodes) / (len(proposal.episodes) + 2)
    batch.tx.execute("stage_facts_reinforce", id=fact_id, namespace_id=ctx.namespace_id, gain=gain)
    lineage.add(batch.tx, ctx.namespace_id, "fact", fact_id, [("episode", i) for i in proposal.episodes])
    batch.wrote(1)
    common.bump(ctx, "facts_reinforced")
