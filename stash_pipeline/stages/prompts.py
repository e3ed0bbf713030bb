"""Prompts and answer schemas of the model stages.

Every system prompt is the shared extraction preamble plus one stage section that
starts with ``STAGE: <name>`` (the scripted test model keys on that line). Items are
always listed as ``[id] text`` so answers can cite them and the runner can validate
every cited id against the listing.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

SHARED = """You are a strict extraction engine for an agent's long-term memory.
Rules:
- Use ONLY what the listed items explicitly state. Never infer, guess or add outside knowledge.
- Never invent names, entities, numbers, dates or versions; copy them exactly as written.
- Cite items only by the ids shown in square brackets, e.g. [12]. Never cite an id that is not listed.
- When unsure, leave a field null or return an empty list.
- Answer with ONE JSON object matching the requested schema and nothing else: no prose, no code fences."""


def system(stage: str, rules: str) -> str:
    return f"{SHARED}\n\nSTAGE: {stage}\n{rules.strip()}"


def listing(items: list[tuple[int, str]], limit: int = 600) -> str:
    """``[id] text`` lines, each text cut to ``limit`` characters and kept on one line."""
    return "\n".join(f"[{i}] {' '.join(text.split())[:limit]}" for i, text in items)


# -- facts --------------------------------------------------------------------------------
FACTS = system(
    "facts",
    """Each numbered cluster below is either a group of related observations or a window of a
conversation: the window's participants, its earlier turns (context) and its new turns.
From EACH cluster derive the facts worth keeping about people, things and events — one, or
several when the items state several things. For each fact give:
- "cluster": the cluster number;
- "sources": the ids of the items the fact rests on, all of them and only them; in a
  conversation at least one NEW turn (earlier turns were read before; cite them only with
  a new turn that the fact also rests on);
- "entity": the main subject, copied exactly as written (null if none);
- "property": a short lowercase attribute name such as "uses", "location", "version" (null if none);
- "value": the attribute's value, copied from the items (null if none);
- "summary": one sentence in the third person. Name people instead of "I", "you", "he" or
  "she": a speaker is named before the colon of a turn, and "you" in a turn is the other
  participant. Do not copy any single item verbatim; keep proper nouns, versions, paths
  and numbers exactly;
- "valid_from": only when the items state the date from which the fact holds, that date in
  ISO 8601 ("2024-03-01"); otherwise null.
A window may list facts known from earlier sessions: use them to understand the turns
(who is who, what a plan was), never cite them and do not state them again.
Greetings, small talk and turns that state nothing lasting give no fact. For a cluster that
states nothing worth keeping, give one entry with that cluster number, no sources and an
empty summary.
Schema: {"facts": [{"cluster": 1, "sources": [3, 4], "entity": "...", "property": "...", "value": "...",
"summary": "...", "valid_from": null}]}""",
)


class FactDraft(BaseModel):
    cluster: int
    #: ids of the listed items the fact rests on (its lineage, once checked against the listing)
    sources: list[int] = Field(default_factory=list)
    entity: str | None = None
    property: str | None = None
    value: str | None = None
    summary: str | None = None
    #: the date the sources state the fact holds from (ISO 8601), when they state one
    valid_from: str | None = None


class FactsAnswer(BaseModel):
    facts: list[FactDraft]


# -- contradictions ----------------------------------------------------------------------------
CONTRADICTIONS = system(
    "contradictions",
    """Each numbered pair gives an entity, a property, an OLD value and a NEW value. Classify each pair:
- "replacement": the new value supersedes the old one (the fact changed over time);
- "contradiction": both cannot be true and it is unclear which is right;
- "compatible": both can be true at once.
Give a confidence in [0, 1] and a one-sentence explanation.
Schema: {"pairs": [{"pair": 1, "classification": "replacement", "confidence": 0.9, "explanation": "..."}]}""",
)


class PairVerdict(BaseModel):
    pair: int
    classification: Literal["replacement", "contradiction", "compatible"]
    confidence: float = Field(ge=0, le=1)
    explanation: str = ""


class ContradictionsAnswer(BaseModel):
    pairs: list[PairVerdict]


# -- entities ------------------------------------------------------------------------------
ENTITIES = system(
    "entities",
    """Each numbered pair gives a NAME as just written and a KNOWN entity with the names it goes by.
Decide for each pair whether NAME refers to the same real-world person, thing or place as KNOWN.
Answer "same": true only when they are clearly one and the same; when unsure, answer false.
Schema: {"pairs": [{"pair": 1, "same": false}]}""",
)


class EntityPairVerdict(BaseModel):
    pair: int
    same: bool


class EntitiesAnswer(BaseModel):
    pairs: list[EntityPairVerdict]


# -- relationships --------------------------------------------------------------------------
RELATIONSHIPS = system(
    "relationships",
    """For each listed fact, extract the relationships between entities that the fact states directly.
- "fact_id": the id of the fact that states it;
- "from" and "to": entity names copied verbatim from THAT fact's text;
- "relation_type": a lowercase identifier such as "uses", "works_at", "depends_on";
- "confidence" between 0.7 and 1.0.
No transitive inference. Return an empty list when a fact states no relationship.
Schema: {"relationships": [{"fact_id": 1, "from": "...", "relation_type": "uses", "to": "...", "confidence": 0.9}]}""",
)


class RelationshipDraft(BaseModel):
    fact_id: int
    from_: str = Field(alias="from")
    relation_type: str
    to: str
    confidence: float = 0.8

    model_config = {"populate_by_name": True}


class RelationshipsAnswer(BaseModel):
    relationships: list[RelationshipDraft]


# -- causal links -------------------------------------------------------------------------------
CAUSAL_LINKS = system(
    "causal_links",
    """Find direct cause -> effect links among the listed facts.
- "cause_id" and "effect_id" must be ids from the list; never link a fact to itself;
- only direct causation that the facts state; nothing transitive;
- "confidence" between 0.5 and 1; "rationale": one sentence.
Return an empty list when there is none.
Schema: {"links": [{"cause_id": 1, "effect_id": 2, "confidence": 0.8, "rationale": "..."}]}""",
)


class CausalDraft(BaseModel):
    cause_id: int
    effect_id: int
    confidence: float = 0.7
    rationale: str = ""


class CausalAnswer(BaseModel):
    links: list[CausalDraft]


# -- patterns -------------------------------------------------------------------------------------
PATTERNS = system(
    "patterns",
    """Find recurring patterns across the listed facts (F ids) and relationships (R ids).
- "pattern": one sentence describing the pattern, using only what the sources state;
- "source_facts" / "source_rels": the ids that show it; cite at least 2 sources in total;
- "coherence" in (0, 1]; "rationale": one sentence on why these sources form the pattern.
No generalising beyond the sources. Return an empty list when there is none.
Schema: {"patterns": [{"pattern": "...", "source_facts": [1, 2], "source_rels": [], "coherence": 0.8, "rationale": "..."}]}""",
)


class PatternDraft(BaseModel):
    pattern: str
    source_facts: list[int] = Field(default_factory=list)
    source_rels: list[int] = Field(default_factory=list)
    coherence: float = 0.5
    rationale: str = ""


class PatternsAnswer(BaseModel):
    patterns: list[PatternDraft]


# -- goal progress ---------------------------------------------------------------------------------
GOAL_PROGRESS = system(
    "goal_progress",
    """Judge whether the listed facts show progress on the listed goals (G ids) .
For each relevant (goal, fact) give:
- "goal_id", "fact_id": ids from the lists;
- "assessment": "progress", "suggested_complete" (only when the goal is clearly achieved),
  "contradicted" or "irrelevant";
- "note": one sentence; "confidence" between 0.5 and 1.
Omit irrelevant pairs. Schema: {"notes": [{"goal_id": 1, "fact_id": 2, "assessment": "progress", "note": "...", "confidence": 0.8}]}""",
)


class GoalNoteDraft(BaseModel):
    goal_id: int
    fact_id: int
    assessment: str
    note: str = ""
    confidence: float = 0.7


class GoalProgressAnswer(BaseModel):
    notes: list[GoalNoteDraft]


# -- failure patterns --------------------------------------------------------------------------------
FAILURE_PATTERNS = system(
    "failure_patterns",
    """The failures (X ids: what | why | lesson) are things that went wrong before; the evidence
items (E ids) are new observations. Report:
- "repetition": an evidence item shows a listed failure happening again:
  {"type": "repetition", "failure_id": X, "evidence_id": E, "evidence": "one sentence", "confidence": 0.8};
- "pattern": several failures/evidence items share a cause:
  {"type": "pattern", "failure_id": X, "evidence_id": E, "pattern_fact": "one sentence",
   "entity": "...", "property": "...", "value": "...", "confidence": 0.8}.
Ids must come from the lists. Confidence between 0.5 and 1. Return an empty list when nothing applies.
Schema: {"findings": [...]}""",
)


class FailureFinding(BaseModel):
    type: Literal["repetition", "pattern"]
    failure_id: int
    evidence_id: int | None = None
    evidence: str | None = None
    pattern_fact: str | None = None
    entity: str | None = None
    property: str | None = None
    value: str | None = None
    confidence: float = 0.7


class FailurePatternsAnswer(BaseModel):
    findings: list[FailureFinding]


# -- hypothesis evidence ---------------------------------------------------------------------------------
HYPOTHESIS_EVIDENCE = system(
    "hypothesis_evidence",
    """Judge the listed facts (F ids) as evidence for the listed hypotheses (H ids), each shown
with its status, confidence and verification plan. For each (hypothesis, fact) pair that matters:
- "verdict": "supports", "weakens", "contradicts" or "irrelevant";
- "confidence" in [0, 1]: how sure you are of the verdict;
- "new_confidence" in [0, 1]: the hypothesis's confidence after this evidence (supports raises it,
  weakens lowers it, contradicts puts it below 0.3);
- "reasoning": one or two sentences, referring to the verification plan.
Schema: {"verdicts": [{"hypothesis_id": 1, "fact_id": 2, "verdict": "supports", "confidence": 0.8, "new_confidence": 0.7, "reasoning": "..."}]}""",
)


class VerdictDraft(BaseModel):
    hypothesis_id: int
    fact_id: int
    verdict: str
    confidence: float = 0.5
    new_confidence: float | None = None
    reasoning: str = ""


class HypothesisAnswer(BaseModel):
    verdicts: list[VerdictDraft]


def clamp(value: float | None, low: float, high: float, default: float) -> float:
    if value is None:
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    if number != number:  # NaN
        return default
    return min(max(number, low), high)
