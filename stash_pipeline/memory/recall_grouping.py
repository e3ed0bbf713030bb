"""One result per piece of evidence: recall's hits grouped by lineage, then diversified.

A fact derived from a conversation and the turn it came from say the same thing; ranked
side by side they take two of ten slots to show one piece of evidence. So recall's
result-shaping step (``recall.recall``) works on a few more candidates than asked for
(``GroupingConfig.overfetch``) and:

* **groups by lineage** (``plan``): walking the candidates best first, a fact takes the
  candidates among its source episodes with it; an episode that a fact in the pool cites
  is represented by that fact (the best-ranked one), at the episode's place if that is
  higher. The group ranks by its best member, and its score is that member's. Facts
  rank by ``fact_weight`` times their score (a fact states in plain words what several
  turns say; BM25 and context favour the turns), their score stays their own;
  The fact carries every source episode compactly (``SourceTurn``: id, when, the start of
  its text, and the score of those that were candidates): nothing found is lost from the
  answer, and ``grouped`` names what was folded in for ``include_score_parts``;
* **diversifies** (``diversify``, maximal marginal relevance over sessions): each next
  result is the group with the best ``score - diversity * redundancy``, where redundancy
  is the share of its sessions that results already chosen come from. Questions that
  gather a person's threads ("what does she do in her spare time?") need evidence from
  several sessions, not ten turns of the best one. ``diversity = 0`` keeps the ranking.

Pure functions over ranked ``RecallHit`` records and the rows of one query for the
source turns (``recall_source_turns``); the knobs are one frozen ``GroupingConfig``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stash_pipeline.models import RecallHit, SourceTurn


@dataclass(frozen=True)
class GroupingConfig:
    """How recall groups and diversifies its results (chosen on the DEV split of the
    conversational set in bench/data, see bench/README.md)."""

    #: fold a fact's source episodes into it (off: every hit takes its own slot)
    enabled: bool = True
    #: candidates fetched beyond ``limit``: folding and diversity choose among them
    overfetch: int = 10
    #: characters of a source turn a fact hit carries (the rest is cut, marked "…")
    excerpt_chars: int = 160
    #: maximal marginal relevance: weight of a result's redundancy with those ranked above
    diversity: float = 0.0
    #: rank a fact hit by this times its score: a fact states what several turns say, in
    #: the words people ask with, while BM25 and context favour the turns
    fact_weight: float = 1.2
    #: ... and a fact about an entity the query names (reached by the entity leg) by this too
    subject_weight: float = 1.2
    #: every fact the entity leg found joins the candidates (not only those that outscore
    #: the query's ``limit + overfetch`` best): a person's facts across time
    entity_pool: bool = True


DEFAULT = GroupingConfig()


@dataclass
class Group:
    """A head hit (a fact, or an episode no candidate fact cites) and what it represents."""

    head: RecallHit
    score: float
    folded: list[RecallHit] = field(default_factory=list)
    #: what the group ranks by: its best member's score, facts weighted (``fact_weight``)
    rank: float = 0.0
    sessions: frozenset[tuple[str, str]] = frozenset()


def fetch_limit(limit: int, config: GroupingConfig, entity_facts: int = 0) -> int:
    """How many ranked candidates recall asks its query for (and, given the entity leg's
    fact count, keeps after fusing them: with ``entity_pool`` every one of them)."""
    if not config.enabled:
        return limit
    return limit + config.overfetch + (entity_facts if config.entity_pool else 0)


def cited_episode_ids(hits: list[RecallHit]) -> list[int]:
    """The source episodes of the fact hits, for ``recall_source_turns``."""
    return sorted({i for h in hits if h.kind == "fact" for i in h.source_episode_ids or ()})


def _session(namespace: str, occurred_at: Any, metadata: dict[str, Any] | None) -> tuple[str, str]:
    meta = metadata or {}
    mark = meta.get("session") or meta.get("thread")
    return namespace, str(mark) if mark is not None else f"@{occurred_at}"


def plan(hits: list[RecallHit], sources: dict[int, dict[str, Any]],
         rank: dict[tuple[str, int], float] | None = None) -> list[Group]:
    """Group ranked ``hits`` by lineage (see the module docstring); groups in rank order.

    ``sources`` maps episode id -> its ``recall_source_turns`` row (for sessions); ``rank``
    (kind, id) -> the key ``hits`` are ordered by (default: the score).
    """
    rank = rank or {}
    citing: dict[int, list[int]] = {}
    for index, hit in enumerate(hits):
        if hit.kind == "fact":
            for episode_id in hit.source_episode_ids or ():
                citing.setdefault(episode_id, []).append(index)
    position = {("episode", h.id): i for i, h in enumerate(hits) if h.kind == "episode"}
    taken: set[int] = set()
    groups: list[Group] = []
    for index, hit in enumerate(hits):
        if index in taken:
            continue
        head = index
        if hit.kind == "episode":
            head = next((j for j in citing.get(hit.id, ()) if j not in taken), index)
        members = [head] if head == index else [head, index]
        if hits[head].kind == "fact":
            for episode_id in hits[head].source_episode_ids or ():
                j = position.get(("episode", episode_id))
                if j is not None and j not in taken and j not in members:
                    members.append(j)
        taken.update(members)
        head_hit = hits[head]
        if head_hit.kind == "fact":
            sessions = {_session(head_hit.namespace, sources[i]["occurred_at"], sources[i]["metadata"])
                        for i in head_hit.source_episode_ids or () if i in sources}
        else:
            sessions = {_session(head_hit.namespace, head_hit.occurred_at, head_hit.metadata)}
        member_hits = [hits[m] for m in members]
        groups.append(Group(head=head_hit, score=max(h.score for h in member_hits),
                            folded=[hits[m] for m in sorted(members) if m != head], sessions=frozenset(sessions),
                            rank=max(rank.get((h.kind, h.id), h.score) for h in member_hits)))
    return groups


def diversify(groups: list[Group], limit: int, diversity: float) -> list[tuple[Group, float]]:
    """The best ``limit`` groups by maximal marginal relevance over sessions, each with the
    penalty it took (0 when ``diversity`` is 0: rank order unchanged)."""
    if diversity <= 0:
        return [(g, 0.0) for g in groups[:limit]]
    chosen: list[tuple[Group, float]] = []
    seen: set[tuple[str, str]] = set()
    pool = list(groups)
    while pool and len(chosen) < limit:
        penalties = [diversity * len(g.sessions & seen) / len(g.sessions) if g.sessions else 0.0 for g in pool]
        best = max(range(len(pool)), key=lambda i: (pool[i].rank - penalties[i], -i))
        chosen.append((pool.pop(best), -penalties[best]))
        seen |= chosen[-1][0].sessions
    return chosen


def _weighted(hits: list[RecallHit], config: GroupingConfig) -> tuple[list[RecallHit], dict[tuple[str, int], float]]:
    """Facts ranked by ``fact_weight`` (and ``subject_weight``) times their score: the hits
    re-ordered and each one's rank key. The score itself stays the evidence's own, so
    ``relevance`` keeps its meaning (and its floor); the weight shows in score_parts."""
    rank = {(h.kind, h.id): h.score for h in hits}
    if config.fact_weight == 1.0 and config.subject_weight == 1.0:
        return hits, rank
    out = []
    for hit in hits:
        weight = 1.0
        if hit.kind == "fact":
            weight = config.fact_weight * (config.subject_weight if "entity" in hit.score_parts else 1.0)
        if weight != 1.0:
            rank[(hit.kind, hit.id)] = hit.score * weight
            hit = hit.model_copy(update={"score_parts": hit.score_parts | {"weight": weight}})
        out.append(hit)
    return sorted(out, key=lambda h: -rank[(h.kind, h.id)]), rank


def _excerpt(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"


def shape(
    hits: list[RecallHit], limit: int, sources: dict[int, dict[str, Any]], config: GroupingConfig
) -> list[RecallHit]:
    """The ``limit`` results recall returns: grouped, diversified, fact hits with their sources."""
    if not config.enabled:
        return hits[:limit]
    hits, rank = _weighted(hits, config)
    out: list[RecallHit] = []
    for group, penalty in diversify(plan(hits, sources, rank), limit, config.diversity):
        head = group.head
        update: dict[str, Any] = {}
        folded_scores = {h.id: h.score for h in group.folded if h.kind == "episode"}
        if head.kind == "fact":
            update["sources"] = [
                SourceTurn(id=i, occurred_at=sources[i]["occurred_at"],
                           excerpt=_excerpt(sources[i]["content"], config.excerpt_chars), score=folded_scores.get(i))
                for i in head.source_episode_ids or () if i in sources
            ]
        if group.folded:
            update["grouped"] = [{"kind": h.kind, "id": h.id, "score": round(h.score, 4)} for h in group.folded]
            update["score"] = group.score
            update["score_parts"] = head.score_parts | {"own": head.score}
        if penalty:
            update["score_parts"] = update.get("score_parts", head.score_parts) | {"diversity": penalty}
        out.append(head.model_copy(update=update) if update else head)
    return out


def apply(store: Any, hits: list[RecallHit], limit: int, config: GroupingConfig,
          known_at: Any = None) -> list[RecallHit]:
    """``shape`` with the source turns read in one query (none when no fact hit cites any)."""
    if not config.enabled:
        return hits[:limit]
    ids = cited_episode_ids(hits)
    rows: list[dict[str, Any]] = []
    if ids:
        with store.db.transaction() as tx:
            rows = tx.all("recall_source_turns", ids=ids, excerpt_chars=config.excerpt_chars, known_at=known_at)
    return shape(hits, limit, {int(r["id"]): r for r in rows}, config)


def compact_parts(key: str, value: Any, *, score_parts: bool) -> dict[str, Any]:
    """The lean answer's ``sources`` / ``grouped`` fields (``recall.compact``): no nulls; a
    source's own score and the folded list only with ``score_parts``."""
    if not value:
        return {}
    if key == "grouped":
        return {"grouped": value} if score_parts else {}
    return {"sources": [{k: v for k, v in source.items() if v is not None and (k != "score" or score_parts)}
                        for source in value]}
