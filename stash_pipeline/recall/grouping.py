"""One result per piece of evidence: recall's hits grouped by lineage, then diversified.

A fact derived from a conversation and the turn it came from say the same thing; ranked
side by side they take two of ten slots to show one piece of evidence. So the ``recall``
statement (``queries/recall.sql``) returns ``fetch_limit`` candidates — ``overfetch``
more than asked for, and with ``entity_pool`` every fact the entity leg found — ranked
with facts weighted (the statement's ``fusion`` part: a fact states in plain words what
several turns say, while BM25 and context favour the turns), each fact with its source
turns. The score stays the evidence's own, so ``relevance`` and its floor keep their
meaning (``score_parts["weight"]`` shows the weight). Then recall's post-ranking step
(``group``, between turning rows into hits and ``recall_shape.shape_results``):

* **groups by lineage** (``plan``): walking the candidates best first, a fact takes the
  candidates among its source episodes with it; an episode that a fact in the pool cites
  is represented by that fact (the best-ranked one), at the episode's place if that is
  higher; a profile's member ranked below it folds into it (the profile holds its words),
  a profile whose members all rank above it folds into the best of them (it says nothing
  new), as does a hit saying what a better one says word for word (the same "lol" in
  another session, a fact restated), and a fact saying a better-ranked fact's thing again
  in other words (``repeat_similarity``: the statement's ``repeats``). The group ranks by
  its best member, and its score is that member's. The fact carries every source episode
  compactly, and the source turns of the facts folded into it as ``repeated_in``
  (``SourceTurn``: id, when, the start of its text, and the score of those that were
  candidates): nothing found is lost from the answer, and ``grouped`` names what was
  folded in for ``include_score_parts``;
* **diversifies** (``diversify``, maximal marginal relevance over sessions): each next
  result is the group with the best ``rank - diversity * redundancy``, where redundancy
  is the share of its sessions that results already chosen come from. Questions that
  gather a person's threads need evidence from several sessions, not ten turns of the
  best one. ``diversity = 0`` (shipped) keeps the ranking;
* **context**: an episode result's context turns leave out the results and the sources
  already sent.

Pure functions over ranked ``RecallHit`` records and the statement's rows; the knobs are
``RecallConfig`` fields (``recall/config.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from stash_pipeline.models import RecallHit, SourceTurn
from stash_pipeline.recall.config import RecallConfig


@dataclass
class Group:
    """A head hit (a fact, or an episode no candidate fact cites) and what it represents."""

    head: RecallHit
    score: float
    folded: list[RecallHit] = field(default_factory=list)
    #: what the group ranks by: its best member's score, facts weighted (``fact_weight``)
    rank: float = 0.0
    sessions: frozenset[tuple[str, str]] = frozenset()


def fetch_limit(limit: int, config: RecallConfig) -> int:
    """How many ranked candidates the ``recall`` statement returns (beyond them, with
    ``entity_pool``, the entity leg's facts)."""
    return limit + config.overfetch if config.grouping else limit


def cited_episode_ids(hits: list[RecallHit]) -> list[int]:
    """The source episodes of the fact hits (the ids their ``sources`` rows may hold)."""
    return sorted({i for h in hits if h.kind == "fact" for i in h.source_episode_ids or ()})


def _session(namespace: str, occurred_at: Any, metadata: dict[str, Any] | None) -> tuple[str, str]:
    meta = metadata or {}
    mark = meta.get("session") or meta.get("thread")
    return namespace, str(mark) if mark is not None else f"@{occurred_at}"


def plan(hits: list[RecallHit], sources: dict[int, dict[str, Any]],
         rank: dict[tuple[str, int], float] | None = None, repeats: dict[int, list[int]] | None = None,
         ) -> list[Group]:
    """Group ranked ``hits`` by lineage (see the module docstring); groups in rank order.

    ``sources`` maps episode id -> its source-turn row (``source_rows``, for sessions); ``rank``
    (kind, id) -> the key ``hits`` are ordered by (default: the score); ``repeats`` fact id
    -> the better-ranked facts it says again (``repeat_rows``).
    """
    rank, repeats = rank or {}, repeats or {}
    citing: dict[int, list[int]] = {}
    for index, hit in enumerate(hits):
        if hit.kind == "fact":
            for episode_id in hit.source_episode_ids or ():
                citing.setdefault(episode_id, []).append(index)
    position = {("episode", h.id): i for i, h in enumerate(hits) if h.kind == "episode"}
    taken: set[int] = set()
    groups: list[Group] = []
    # each to the index in ``groups``: what a group's head says; (member fact id, current)
    # -> the best-ranked profile gathering it; fact id -> where it was placed (head or folded)
    said: dict[tuple[str, str, bool | None], int] = {}
    gathered: dict[tuple[int, bool | None], int] = {}
    placed: dict[int, int] = {}
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
        # a profile's member below it, the same words again (another session's "lol", a fact
        # restated), a profile below all its members; never a retired statement into a current
        # one, nor the reverse
        same = gathered.get((head_hit.id, head_hit.current)) if head_hit.kind == "fact" else None
        if same is None:
            same = said.get(_said(head_hit))
        if same is None:
            same = _members_shown(head_hit, placed, groups)
        if same is None and head_hit.kind == "fact":
            same = _repeated(head_hit, repeats.get(head_hit.id, ()), placed, groups)
        if same is not None:
            groups[same].folded.extend(hits[m] for m in sorted(members))
            placed.update((hits[m].id, same) for m in members if hits[m].kind == "fact")
            continue
        if head_hit.kind == "fact":
            sessions = {_session(head_hit.namespace, sources[i]["occurred_at"], sources[i]["metadata"])
                        for i in head_hit.source_episode_ids or () if i in sources}
        else:
            sessions = {_session(head_hit.namespace, head_hit.occurred_at, head_hit.metadata)}
        member_hits = [hits[m] for m in members]
        groups.append(Group(head=head_hit, score=max(h.score for h in member_hits),
                            folded=[hits[m] for m in sorted(members) if m != head], sessions=frozenset(sessions),
                            rank=max(rank.get((h.kind, h.id), h.score) for h in member_hits)))
        said[_said(head_hit)] = len(groups) - 1
        placed.update((h.id, len(groups) - 1) for h in member_hits if h.kind == "fact")
        for fact_id in head_hit.member_fact_ids or ():
            gathered.setdefault((fact_id, head_hit.current), len(groups) - 1)
    return groups


def _members_shown(hit: RecallHit, placed: dict[int, int], groups: list[Group]) -> int | None:
    """For a profile whose every member fact a better-ranked group already shows, the best
    such group if it has the profile's ``current``: the profile would say nothing new."""
    members = hit.member_fact_ids
    if not members or any(i not in placed for i in members):
        return None
    best = min(placed[i] for i in members)
    return best if groups[best].head.current == hit.current else None


def _repeated(hit: RecallHit, repeated: Any, placed: dict[int, int], groups: list[Group]) -> int | None:
    """The best group already showing a fact ``hit`` says again, if a fact (not a profile,
    which would not show the hit's source turns) heads it with the hit's ``current``: a
    retired statement never folds into a current one, nor the reverse."""
    best = min((placed[i] for i in repeated if i in placed), default=None)
    if best is None:
        return None
    head = groups[best].head
    return best if head.kind == "fact" and head.member_fact_ids is None and head.current == hit.current else None


def _said(hit: RecallHit) -> tuple[str, str, bool | None]:
    """What a hit says, for telling repeats apart: its kind and words (case and spacing
    aside) and, for a fact, whether it is current: a retired statement never hides behind
    the same words still true, nor they behind it."""
    return hit.kind, " ".join((hit.content or "").lower().split()).rstrip(".!?"), hit.current


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


def _rank(hits: list[RecallHit], order: dict[tuple[str, int], float] | None = None,
          ) -> tuple[list[RecallHit], dict[tuple[str, int], float]]:
    """The hits in rank order and each one's rank key: ``order``'s (a reranker's, ``rerank.py``),
    else the score times the weight the statement ranked it by (``score_parts["weight"]``,
    facts only)."""
    rank = order if order is not None else {
        (h.kind, h.id): h.score * (h.score_parts.get("weight") or 1.0) for h in hits}
    return sorted(hits, key=lambda h: -rank[(h.kind, h.id)]), rank


def _turns(ids: Any, sources: dict[int, dict[str, Any]], scores: dict[int, float],
           config: RecallConfig) -> list[SourceTurn]:
    """Episodes ``ids`` as a fact result shows them: id, when, the start of the text, and the
    score of those that were candidates."""
    return [SourceTurn(id=i, occurred_at=sources[i]["occurred_at"], score=scores.get(i),
                       excerpt=_excerpt(sources[i]["content"], config.excerpt_chars))
            for i in ids if i in sources]


def _excerpt(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"


def shape(
    hits: list[RecallHit], limit: int, sources: dict[int, dict[str, Any]], config: RecallConfig,
    order: dict[tuple[str, int], float] | None = None, repeats: dict[int, list[int]] | None = None,
) -> list[RecallHit]:
    """The ``limit`` results recall returns: grouped, diversified, fact hits with their sources;
    ranked by ``order`` when given ((kind, id) -> rank key, every hit's); ``repeats`` as
    ``plan`` takes it."""
    if not config.grouping:
        return _rank(hits, order)[0][:limit] if order is not None else hits[:limit]
    hits, rank = _rank(hits, order)
    out: list[RecallHit] = []
    for group, penalty in diversify(plan(hits, sources, rank, repeats), limit, config.diversity):
        head = group.head
        update: dict[str, Any] = {}
        folded_scores = {h.id: h.score for h in group.folded if h.kind == "episode"}
        if head.kind == "fact" and head.member_fact_ids is None:  # a profile sends only the ids
            update["sources"] = _turns(head.source_episode_ids or (), sources, folded_scores, config)
            # the facts folded into it (its words again): their turns, apart from its lineage
            own = set(head.source_episode_ids or ())
            again = dict.fromkeys(i for h in group.folded if h.kind == "fact" and h.member_fact_ids is None
                                  for i in h.source_episode_ids or () if i not in own)
            if again:
                update["repeated_in"] = _turns(again, sources, folded_scores, config)
        if group.folded:
            update["grouped"] = [{"kind": h.kind, "id": h.id, "score": round(h.score, 4)} for h in group.folded]
            update["score"] = group.score
            update["score_parts"] = head.score_parts | {"own": head.score}
        if penalty:
            update["score_parts"] = update.get("score_parts", head.score_parts) | {"diversity": penalty}
        out.append(head.model_copy(update=update) if update else head)
    return out


def source_rows(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Episode id -> its source-turn row, from the fact rows' ``sources`` column (JSON: the
    time comes as text and is read back, so sessions compare as episodes' do)."""
    out: dict[int, dict[str, Any]] = {}
    for row in rows:
        for source in row.get("sources") or ():
            when = source.get("occurred_at")
            out[int(source["id"])] = source | {"occurred_at": datetime.fromisoformat(when) if when else None}
    return out


def repeat_rows(rows: list[dict[str, Any]]) -> dict[int, list[int]]:
    """Fact id -> the better-ranked facts it says again, from the rows' ``repeats`` column."""
    return {int(row["id"]): [int(i) for i in row["repeats"]] for row in rows if row.get("repeats")}


def group(
    ranked: list[tuple[RecallHit, list[dict[str, Any]]]], limit: int, sources: dict[int, dict[str, Any]],
    config: RecallConfig, order: dict[tuple[str, int], float] | None = None,
    repeats: dict[int, list[int]] | None = None,
) -> list[tuple[RecallHit, list[dict[str, Any]]]]:
    """Recall's post-ranking step: the ``limit`` results (``shape``, in ``order`` when given),
    each episode result with its context turns minus the results and sources sent with it."""
    context = {(hit.kind, hit.id): around for hit, around in ranked}
    hits = shape([hit for hit, _ in ranked], limit, sources, config, order, repeats)
    shown = {h.id for h in hits if h.kind == "episode"} | {s.id for h in hits for s in h.sources or ()}
    return [(hit, [turn for turn in context.get((hit.kind, hit.id)) or () if int(turn["id"]) not in shown])
            for hit in hits]


def compact_parts(key: str, value: Any, *, score_parts: bool) -> dict[str, Any]:
    """The lean answer's ``sources`` / ``repeated_in`` / ``grouped`` fields (``recall_shape.compact``):
    no nulls; a source's own score and the folded list only with ``score_parts``."""
    if not value:
        return {}
    if key == "grouped":
        return {"grouped": value} if score_parts else {}
    return {key: [{k: v for k, v in source.items() if v is not None and (k != "score" or score_parts)}
                        for source in value]}
