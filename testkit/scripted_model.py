"""A deterministic reasoning "model" for ``ScriptedOpenAI``: valid, grounded JSON for every stage.

It reads ``STAGE: <name>`` from the system prompt and the ``[id] text`` listings from
the user prompt, so the whole pipeline runs through the real ``openai`` client and the
real parsing/validation code. Knobs inject faults into chosen calls::

    model = ScriptedModel()
    model.inject("facts", "garbage", times=2)       # the next 2 facts calls answer garbage
    model.inject_at(5, "status500")                  # the 5th chat request fails with HTTP 500
    with ScriptedOpenAI(model) as server: ...

Facts prompts list clusters and conversation windows (``facts_blocks`` reads them back:
new items, earlier turns, participants); by default each gets one fact citing all its new
items, and ``model.facts_script = fn`` answers instead (``fn(user prompt) -> answer``).

Fault kinds: garbage, think (valid JSON wrapped in <think>… plus prose), fence,
wrong_ids (ids not in the listing), schema (valid JSON, wrong shape), invent (facts:
an ungrounded "Bob owns 42 elephants"), status400, status500, status429, timeout (sleeps
``timeout_s``), ramble (never stops: cut off at the request's max_tokens).
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from testkit.openai_server import Reply, last_user_message, system_prompt

_STAGE = re.compile(r"^STAGE:\s*([a-z_]+)", re.MULTILINE)
_ITEM = re.compile(r"^\[(\d+)\]\s?(.*)$", re.MULTILINE)
_CAP = re.compile(r"\b[A-Z][A-Za-z0-9]*")
_WORD = re.compile(r"[A-Za-z0-9]+")
_STOP = frozenset(
    "a an the this that it its in on at for of and or but to with by from as is are was were be "
    "has have had after before when while not no".split()
)
_NEGATIONS = ("not ", "never ", "no longer", "failed to")
#: "as of 2026-05-01" / "since 2026-05-01" in an observation: the date the fact holds from
_STATED_DATE = re.compile(r"\b(?:as of|since|from|on) (\d{4}-\d{2}-\d{2})\b")


@dataclass
class FactsBlock:
    """One cluster or conversation window of a facts-stage prompt."""

    number: int
    #: the items to derive facts from: a cluster's observations, a window's new turns
    new: list[tuple[int, str]]
    #: a window's earlier turns (context) and participants
    context: list[tuple[int, str]] = field(default_factory=list)
    participants: list[str] = field(default_factory=list)
    header: str = ""


_BLOCK = re.compile(r"^(Cluster (\d+)(?: \(([^)]*)\))?):\s*$", re.MULTILINE)


def facts_blocks(user: str) -> list[FactsBlock]:
    """The clusters and windows of a facts-stage user prompt, as the model reads them."""
    heads = list(_BLOCK.finditer(user))
    blocks = []
    for k, head in enumerate(heads):
        body = user[head.end() : heads[k + 1].start() if k + 1 < len(heads) else len(user)]
        people = re.search(r"^Participants: (.*)$", body, re.MULTILINE)
        context, new = (body.split("New turns:", 1) if "New turns:" in body else ("", body))
        blocks.append(FactsBlock(number=int(head.group(2)), new=_items(new), context=_items(context),
                                 participants=[p.strip() for p in people.group(1).split(",")] if people else [],
                                 header=head.group(3) or ""))
    return blocks


def _items(text: str) -> list[tuple[int, str]]:
    return [(int(m.group(1)), m.group(2).strip()) for m in _ITEM.finditer(text)]


def _section(text: str, title: str) -> str:
    """The part of the user prompt after a ``Title:`` line up to the next title line."""
    match = re.search(rf"^{title}:\s*$(.*?)(?=^[A-Z][a-z]+:\s*$|\Z)", text, re.MULTILINE | re.DOTALL)
    return match.group(1) if match else ""


def _capitalised(text: str) -> list[str]:
    return [w for w in _CAP.findall(text) if w.lower() not in _STOP]


def _content_words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if len(w) >= 4 and w.lower() not in _STOP}


def _entity_triple(text: str) -> tuple[str | None, str | None, str | None]:
    """'Alice lives in Paris' → ('Alice', 'lives', 'Paris'): first capitalised word, next word, next capitalised."""
    words = text.split()
    for i, raw in enumerate(words):
        word = raw.strip(".,;:!?()\"'")
        if word and word[0].isupper() and word.lower() not in _STOP:
            prop = None
            for nxt in words[i + 1 :]:
                clean = nxt.strip(".,;:!?()\"'")
                if clean and clean.lower() not in _STOP and clean.isalpha() and clean.islower():
                    prop = clean.lower()
                    break
            rest = " ".join(words[i + 1 :])
            caps = [c for c in _capitalised(rest) if c != word]
            value = caps[0] if caps else (words[-1].strip(".,;:!?()\"'") if len(words) > i + 1 else None)
            return word, prop, value
    return None, None, None


@dataclass
class ScriptedModel:
    """Responder for ScriptedOpenAI; thread-safe; records the stage of every call."""

    timeout_s: float = 2.0
    contradiction_class: str = "replacement"
    contradiction_confidence: float = 0.95
    calls: Counter = field(default_factory=Counter)
    #: a word in a cluster's first observation → the entity the facts answer names for it
    entity_names: dict[str, str] = field(default_factory=dict)
    #: when set, the facts stage's answers: user prompt -> answer object (faults still apply first)
    facts_script: Callable[[str], dict[str, Any]] | None = None
    _faults: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def inject(self, stage: str, kind: str, times: int = 1) -> None:
        """The next ``times`` calls of ``stage`` ('*' = any) misbehave as ``kind``."""
        with self._lock:
            self._faults[stage].extend([kind] * times)

    def inject_at(self, call_number: int, kind: str) -> None:
        """Call number ``call_number`` (1-based, counting every chat request) misbehaves as ``kind``."""
        with self._lock:
            self._faults[f"#{call_number}"].append(kind)

    def _take_fault(self, stage: str) -> str | None:
        with self._lock:
            for key in (f"#{sum(self.calls.values())}", stage, "*"):
                if self._faults.get(key):
                    return self._faults[key].pop(0)
        return None

    def __call__(self, request: dict[str, Any]) -> Reply | str:
        match = _STAGE.search(system_prompt(request))
        stage = match.group(1) if match else "unknown"
        # Retries of an invalid answer carry the original prompt as the FIRST user message.
        users = [m.get("content", "") for m in request.get("messages", []) if m.get("role") == "user"]
        user = users[0] if users else last_user_message(request)
        with self._lock:
            self.calls[stage] += 1
        fault = self._take_fault(stage)
        if fault == "status500":
            return Reply(status=500, error_message="scripted outage")
        if fault == "status400":
            return Reply(status=400, error_message="prompt is too long for the context window")
        if fault == "status429":
            return Reply(status=429, error_message="slow down")
        if fault == "timeout":
            return Reply(content="{}", delay_s=self.timeout_s)
        if fault == "ramble":
            return Reply(ramble=True)
        if fault == "garbage":
            return "I am sorry, I cannot help with that {not json"
        if fault == "schema":
            return json.dumps({"unexpected": [1, 2, 3]})
        answer = getattr(self, f"_{stage}", lambda _u, _f: {})(user, fault)
        text = json.dumps(answer)
        if fault == "think":
            return f"<think>Let me think about {{the ids}} carefully.</think>\nSure! Here is the JSON:\n{text}"
        if fault == "fence":
            return f"Here you go:\n```json\n{text}\n```"
        return text

    # -- stages -----------------------------------------------------------------------------
    def _facts(self, user: str, fault: str | None) -> dict[str, Any]:
        if fault == "nothing":  # nothing worth keeping, said by leaving every cluster out
            return {"facts": []}
        if self.facts_script is not None:
            return self.facts_script(user)
        out = []
        for block in facts_blocks(user):
            number, items = block.number, block.new
            texts = [t for _, t in items]
            if fault == "invent":
                out.append({"cluster": number, "sources": [i for i, _ in items], "entity": "Bob", "property": "owns",
                            "value": "42 elephants", "summary": "Bob owns 42 elephants"})
                continue
            entity, prop, value = _entity_triple(texts[0]) if texts else (None, None, None)
            entity = next((name for word, name in self.entity_names.items() if texts and word in texts[0]), entity)
            excerpts = [" ".join(t.rstrip(".").split()[:8]) for t in texts[:3]]
            summary = f"{entity or 'it'} is noted as: " + " / ".join(excerpts)
            draft = {"cluster": number, "sources": [i for i, _ in items], "entity": entity, "property": prop,
                     "value": value, "summary": summary}
            stated = _STATED_DATE.search(" ".join(texts))
            if stated:  # a date the observations state: the fact holds from then
                draft["valid_from"] = stated.group(1)
            out.append(draft)
        return {"facts": out}

    def _contradictions(self, user: str, fault: str | None) -> dict[str, Any]:
        pairs = []
        for pair_id, text in _items(user):
            pairs.append({"pair": pair_id, "classification": self.contradiction_class,
                          "confidence": self.contradiction_confidence,
                          "explanation": f"the newer statement replaces the older one ({text[:60]})"})
        return {"pairs": pairs}

    def _entities(self, user: str, fault: str | None) -> dict[str, Any]:
        """Same entity when the words of one name (titles aside) are all among the other's."""
        pairs = []
        for pair_id, text in _items(user):
            match = re.match(r"NAME: (.*?) \| KNOWN: (.*?) \(also:", text)
            if not match:
                continue
            name, known = ({w.lower() for w in _WORD.findall(part)} - {"dr", "mr", "ms", "mrs"} for part in match.groups())
            pairs.append({"pair": pair_id, "same": bool(name and known and (name <= known or known <= name))})
        return {"pairs": pairs}

    def _relationships(self, user: str, fault: str | None) -> dict[str, Any]:
        rels = []
        for fact_id, text in _items(user):
            caps = list(dict.fromkeys(_capitalised(text)))
            if len(caps) < 2:
                continue
            end = text.find(caps[1], text.find(caps[0]) + len(caps[0]))
            start = text.rfind(caps[0], 0, end) + len(caps[0])
            between = [w.lower() for w in _WORD.findall(text[start:end]) if w.isalpha()][:3]
            relation = "_".join(between) or "related_to"
            rels.append({"fact_id": 999_999 if fault == "wrong_ids" else fact_id, "from": caps[0],
                         "relation_type": relation, "to": caps[1], "confidence": 0.9})
        return {"relationships": rels}

    def _causal_links(self, user: str, fault: str | None) -> dict[str, Any]:
        ids = [i for i, _ in _items(user)]
        links = []
        for k in range(0, len(ids) - 1, 2):
            links.append({"cause_id": ids[k], "effect_id": 999_999 if fault == "wrong_ids" else ids[k + 1],
                          "confidence": 0.8, "rationale": f"fact {ids[k]} precedes and explains fact {ids[k + 1]}"})
            links.append({"cause_id": ids[k], "effect_id": ids[k], "confidence": 0.9, "rationale": "self loop"})
        return {"links": links[:6]}

    def _patterns(self, user: str, fault: str | None) -> dict[str, Any]:
        facts = _items(_section(user, "Facts"))
        rels = _items(_section(user, "Relationships"))
        groups: dict[str, list[int]] = defaultdict(list)
        for fact_id, text in facts:
            caps = _capitalised(text)
            if caps:
                groups[caps[0]].append(fact_id)
        patterns = []
        for entity, ids in groups.items():
            if len(ids) >= 2:
                rel_ids = [r for r, t in rels if entity in t][:3]
                patterns.append({"pattern": f"{entity} recurs across {len(ids)} facts",
                                 "source_facts": ids[:5] + ([999_999] if fault == "wrong_ids" else []),
                                 "source_rels": rel_ids, "coherence": 0.8,
                                 "rationale": f"all cited facts are about {entity}"})
        return {"patterns": patterns}

    def _goal_progress(self, user: str, fault: str | None) -> dict[str, Any]:
        goals = _items(_section(user, "Goals"))
        facts = _items(_section(user, "Facts"))
        notes = []
        for goal_id, goal in goals:
            words = _content_words(goal)
            for fact_id, fact in facts:
                shared = words & _content_words(fact)
                if shared:
                    done = "done" in fact.lower() or "finished" in fact.lower()
                    notes.append({"goal_id": goal_id, "fact_id": fact_id,
                                  "assessment": "suggested_complete" if done else "progress",
                                  "note": f"fact mentions {', '.join(sorted(shared)[:3])}", "confidence": 0.8})
        return {"notes": notes}

    def _failure_patterns(self, user: str, fault: str | None) -> dict[str, Any]:
        failures = _items(_section(user, "Failures"))
        evidence = _items(_section(user, "Evidence"))
        findings = []
        for failure_id, failure in failures:
            what = _content_words(failure.split("|")[0])
            hits = [(e, t) for e, t in evidence if len(what & _content_words(t)) >= 2]
            for evidence_id, text in hits:
                findings.append({"type": "repetition", "failure_id": failure_id, "evidence_id": evidence_id,
                                 "evidence": text[:120], "confidence": 0.8})
            if len(hits) >= 2:
                entity, prop, value = _entity_triple(hits[0][1])
                findings.append({"type": "pattern", "failure_id": failure_id, "evidence_id": hits[0][0],
                                 "pattern_fact": f"{entity or 'it'} repeats: " + " ".join(hits[0][1].split()[:8]),
                                 "entity": entity, "property": prop, "value": value, "confidence": 0.85})
        return {"findings": findings}

    def _hypothesis_evidence(self, user: str, fault: str | None) -> dict[str, Any]:
        hypotheses = _items(_section(user, "Hypotheses"))
        facts = _items(_section(user, "Facts"))
        verdicts = []
        for hyp_id, hyp in hypotheses:
            words = _content_words(hyp.split("| plan:")[0])
            for fact_id, fact in facts:
                shared = words & _content_words(fact)
                if len(shared) < 2:
                    continue
                negative = any(n in fact.lower() for n in _NEGATIONS)
                verdicts.append({"hypothesis_id": hyp_id, "fact_id": fact_id,
                                 "verdict": "contradicts" if negative else "supports",
                                 "confidence": 0.95, "new_confidence": 0.1 if negative else 0.9,
                                 "reasoning": f"the fact speaks to {', '.join(sorted(shared)[:3])}"})
        return {"verdicts": verdicts}
