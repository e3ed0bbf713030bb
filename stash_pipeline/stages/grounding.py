"""Grounding: whether a drafted text says only what its sources say.

Used by the facts stage (a fact against the cluster or conversation window it came from,
plus the window's participants) and the failure-patterns stage. Every capitalised word /
proper noun and every number in a checked field must occur in the sources (a word
matches when it, or its stem — all but the last three letters, at least four — starts a
source word), and most content words too: "Alice uses Python" cannot become "Bob owns
elephants". A summary may not copy a source either (anti-verbatim).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stash_pipeline.stages import prompts

# -- words ----------------------------------------------------------------------------------------
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


#: the share of a field's content words (4+ letters) that may be absent from the sources,
#: per field (None: no wording rule, names and numbers are still checked)
DEFAULT_LIMITS: dict[str, float | None] = {"summary": 0.5, "entity": 0.34, "value": 0.34}
_BRITISH = re.compile(r"is(e|es|ed|ing|ation|ations)$")


def _spelling(word: str) -> str:
    """One spelling for -ise/-ize words ("organising" and "organizing" match)."""
    return _BRITISH.sub(r"iz\1", word)


def _stem_match(word: str, vocabulary: set[str]) -> bool:
    word = _spelling(word)
    if word in vocabulary:
        return True
    if len(word) < 5:
        return False
    stem = word[: max(4, len(word) - 3)]
    return any(v.startswith(stem) for v in vocabulary)


def grounding_errors(
    fields: dict[str, str | None],
    sources: list[str],
    names: list[str] | tuple[str, ...] = (),
    limits: dict[str, float | None] | None = None,
) -> list[str]:
    """Why ``fields`` are not grounded in ``sources`` and the participants' ``names`` (empty list = grounded).

    Names and numbers are checked in every field; the wording rule uses ``limits``
    (default ``DEFAULT_LIMITS``; a field it does not list gets 0.34).
    """
    limits = DEFAULT_LIMITS if limits is None else limits
    source_text = " ".join([*sources, *names])
    vocabulary = {_spelling(w.lower()) for w in _WORD.findall(source_text)}
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
        limit = limits.get(name, 0.34)
        if content and limit is not None:
            absent = [w for w in content if not _stem_match(w, vocabulary)]
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


#: the facts stage's wording rule. A summary is a paraphrase, often an abstraction over
#: several turns ("Priya likes making things by hand" from a knitting class and a
#: lopsided scarf): it may use words of its own, but not mostly. A value is a normalised
#: attribute ("yes", "self-employed"): its names and numbers are checked, not its wording.
#: The entity is written as in the sources.
FACT_LIMITS: dict[str, float | None] = {"summary": 0.75, "entity": 0.34, "value": None}


def validate(draft: prompts.FactDraft, sources: list[str], names: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Why a drafted fact may not be kept, given the items shown with it and the participants."""
    problems = []
    copy = verbatim_error(draft.summary or "", sources)
    if copy:
        problems.append(copy)
    problems += grounding_errors(
        {"summary": draft.summary, "entity": draft.entity, "value": draft.value}, sources, names, FACT_LIMITS
    )
    return problems


