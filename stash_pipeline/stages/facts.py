"""Facts stage: cluster new episodes and synthesise one grounded fact per cluster.

Input: live episodes after the stage's cursor (``episodes.id``), ``consolidation_batch_size``
per batch; dead-lettered episodes (status pending) are retried first.
Clustering: greedy centroid clustering at ``STASH_CONSOLIDATION_SIMILARITY_THRESHOLD``
followed by one reassignment pass to the nearest centroid, so membership depends on
the data rather than on id order as far as practical.
Model: several clusters per call (``STASH_FACTS_CLUSTERS_PER_CALL``); each answer gives
``{entity, property, value, summary}``. An answer cut off at max_tokens is retried as two
halves of the batch; a single cluster's cut-off answer is retried once, then dead-lettered.
An empty summary — or, for a cluster asked about alone, no entry at all — means the
cluster states nothing worth keeping (chatter): processed, no fact, no dead letter.
Validation: anti-verbatim (a summary may not copy a source) and grounding — every
capitalised word / proper noun and every number in summary, entity and value must occur
in the sources, and most content words too ("Alice uses Python" cannot become "Bob owns
elephants").
Output: a fact (origin synthesis, confidence n/(n+2) + structure boost) through
``memory.facts.insert_fact`` with lineage to every source episode. Its event time starts
at its evidence: the date the model says the sources state (``valid_from``), else the
earliest ``occurred_at`` of the cluster, never later than now (a plan is not yet a
fact); it ends where a newer fact on its key begins when it arrives late (history, see
``stages.contradictions``). Or, when the nearest
current fact is at least ``STASH_CONSOLIDATION_DEDUP_THRESHOLD`` similar, that fact is
REINFORCED (confidence toward 1, reinforcements + 1, updated_at) and gains lineage to the
new episodes. New facts then go through the shared contradiction check, and each new
fact's ``entity`` is resolved to an entity of the namespace (``entity_resolution``).
Cursor: max episode id of the batch, committed with the outputs in one transaction.
Idempotency: a committed batch is never selected again (cursor); a rolled-back batch
wrote nothing; a cluster that fails is dead-lettered per episode and the cursor moves on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from stash_pipeline import errors
from stash_pipeline.embedding.vectors import unit_vector
from stash_pipeline.memory import lineage
from stash_pipeline.memory.facts import insert_fact
from stash_pipeline.memory.validate import MAX_TIMESTAMP, MIN_TIMESTAMP
from stash_pipeline.stages import contradictions, prompts
from stash_pipeline.stages.entity_resolution import Resolver

if TYPE_CHECKING:
    from stash_pipeline.stages.context import StageContext

MAX_CLUSTER_SIZE = 12

# -- grounding ----------------------------------------------------------------------------------
_WORD = re.compile(r"[A-Za-z0-9]+")
_CAPITALISED = re.compile(r"\b[A-Z][A-Za-z0-9]*")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
#: capitalised function words that may start a sentence without being a proper noun
_FUNCTION_WORDS = frozenset(
    """a an the this that these those it its they them their there he she his her we our i you
    in on at for of and or but to with by from as is are was were be been being has have had
    after before when while during all both each every some no not if then also according
    based since until about into over under between across per via one two several many most""".split()
)


def _stem_match(word: str, vocabulary: set[str]) -> bool:
    if word in vocabulary:
        return True
    if len(word) < 5:
        return False
    stem = word[: max(4, len(word) - 3)]
    return any(v.startswith(stem) for v in vocabulary)


def grounding_errors(fields: dict[str, str | None], sources: list[str]) -> list[str]:
    """Why ``fields`` are not grounded in ``sources`` (empty list = grounded)."""
    source_text = " ".join(sources)
    vocabulary = {w.lower() for w in _WORD.findall(source_text)}
    numbers = set(_NUMBER.findall(source_text))
    problems: list[str] = []
    for name, text in fields.items():
        if not text:
            continue
        for word in _CAPITALISED.findall(text):
            low = word.lower()
            if low not in _FUNCTION_WORDS and not _stem_match(low, vocabulary):
                problems.append(f"{name} names {word!r}, which no source mentions")
        for number in _NUMBER.findall(text):
            if number not in numbers and number not in source_text:
                problems.append(f"{name} has the number {number!r}, which no source contains")
        content = [w.lower() for w in _WORD.findall(text) if len(w) >= 4 and w.lower() not in _FUNCTION_WORDS]
        if content:
            absent = [w for w in content if not _stem_match(w, vocabulary)]
            limit = 0.5 if name == "summary" else 0.34
            if len(absent) / len(content) > limit:
                problems.append(f"{name} uses words absent from the sources: {', '.join(sorted(set(absent))[:6])}")
    return problems


def _normalise(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def verbatim_error(summary: str, sources: list[str]) -> str | None:
    """A summary that copies (or is an excerpt of) one source is not a synthesis."""
    norm = _normalise(summary)
    if not norm:
        return "summary is empty"
    for source in sources:
        src = _normalise(source)
        if norm in src:
            return "summary copies a source verbatim"
        if src and src in norm and len(src) >= 0.8 * len(norm):
            return "summary is a source with trivial additions"
    return None


def validate(draft: prompts.FactDraft, sources: list[str]) -> list[str]:
    problems = []
    copy = verbatim_error(draft.summary or "", sources)
    if copy:
        problems.append(copy)
    problems += grounding_errors(
        {"summary": draft.summary, "entity": draft.entity, "value": draft.value}, sources
    )
    return problems


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
    clusters = cluster(rows, settings.consolidation_similarity_threshold)
    failures: dict[int, str] = {}
    drafts: dict[int, prompts.FactDraft] = {}
    per_call = per_call or settings.facts_clusters_per_call
    groups = [list(range(s, min(s + per_call, len(clusters)))) for s in range(0, len(clusters), per_call)]
    while groups:
        group = groups.pop(0)
        user = "\n\n".join(
            f"Cluster {n}:\n" + prompts.listing([(int(r["id"]), r["content"]) for r in clusters[c]])
            for n, c in enumerate(group, 1)
        )
        try:
            answer = ctx.call(prompts.FACTS, user, prompts.FactsAnswer, split_on_truncation=len(group) > 1)
        except errors.ModelResponseInvalid as exc:
            if isinstance(exc, errors.ModelOutputTruncated) and len(group) > 1:
                # Cut off at max_tokens: retry as two smaller batches (each a smaller answer).
                groups[:0] = [group[: len(group) // 2], group[len(group) // 2 :]]
                continue
            for c in group:
                failures[c] = f"ModelResponseInvalid: {exc.message}"
            continue
        by_cluster = {d.cluster: d for d in answer.facts}
        for n, c in enumerate(group, 1):
            draft = by_cluster.get(n)
            if draft is not None:
                drafts[c] = draft
            elif len(group) == 1 and not answer.facts:
                # Asked about this cluster alone, the model derived nothing: chatter, not a
                # failure (an omission among several clusters may be a slip, so that one
                # goes back for a call of its own).
                drafts[c] = prompts.FactDraft(cluster=n, summary="")
            else:
                failures[c] = "ModelResponseInvalid: the answer has no fact for this cluster"

    proposals: dict[int, _Proposal] = {}
    for c, draft in drafts.items():
        if not (draft.summary or "").strip():
            continue  # nothing worth keeping: processed, no fact
        sources = [r["content"] for r in clusters[c]]
        problems = validate(draft, sources)
        if problems:
            failures[c] = "grounding: " + "; ".join(problems)
            continue
        structured = bool(draft.entity and draft.property)
        proposals[c] = _Proposal(
            key=c,
            draft=draft,
            episodes=[int(r["id"]) for r in clusters[c]],
            confidence=base_confidence(len(clusters[c]), structured),
            valid_from=event_start(draft, clusters[c]),
        )

    ordered = [proposals[c] for c in sorted(proposals)]
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
    resolver.plan(p.draft.entity for p in created if p.key in proposals)

    checked = {
        p.key: contradictions.NewFact(p.key, p.draft.entity, p.draft.property, p.draft.value, p.valid_from,
                                      entity_id=resolver.known_entity(p.draft.entity))
        for p in created
    }
    verdicts, failed_keys = contradictions.plan(ctx, list(checked.values()))
    for key in failed_keys:
        failures[key] = "ModelResponseInvalid: the contradiction check got no valid answer"
        proposals.pop(key, None)

    with ctx.batch(cursor=cursor) as batch:
        if resolved:
            batch.done("episode", resolved)
        fact_ids: dict[int, int] = {}
        for c, members in enumerate(clusters):
            ids = [int(r["id"]) for r in members]
            if c in failures:
                batch.fail("episode", ids, failures[c])
                continue
            proposal = proposals.get(c)
            with batch.item("episode", ids):
                if proposal is None:
                    continue
                target = proposal.reinforce_id
                if target is None and proposal.reinforce_key is not None:
                    target = fact_ids.get(proposal.reinforce_key)
                if target is not None:
                    _reinforce(ctx, batch, target, proposal)
                    continue
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
                    valid_until=checked[c].valid_until if c in checked else None,
                )
                resolver.link_fact(batch.tx, int(row["id"]), draft.entity)  # entity resolution
                batch.wrote(1)
                ctx.report.details["facts_created"] = ctx.report.details.get("facts_created", 0) + 1
                fact_ids[c] = int(row["id"])
        contradictions.apply(ctx, batch, verdicts, fact_ids)


def _reinforce(ctx: StageContext, batch: Any, fact_id: int, proposal: _Proposal) -> None:
    gain = 0.5 * len(proposal.episodes) / (len(proposal.episodes) + 2)
    batch.tx.execute("stage_facts_reinforce", id=fact_id, namespace_id=ctx.namespace_id, gain=gain)
    lineage.add(batch.tx, ctx.namespace_id, "fact", fact_id, [("episode", i) for i in proposal.episodes])
    batch.wrote(1)
    ctx.report.details["facts_reinforced"] = ctx.report.details.get("facts_reinforced", 0) + 1
