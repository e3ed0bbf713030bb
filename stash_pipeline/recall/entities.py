"""The entity leg of hybrid recall: the query's phrases that could name an entity.

"What does Alice work on?" shares no word with "achen moved to the Kestrel team": such
facts are found through resolved entities (``memory/entities.py``). The leg itself (names,
links, facts, scores) is part of the ``recall`` statement, its rule in the header of
``entity_leg`` in ``queries/recall.sql``, its bounds in ``RecallConfig``. Here: the
query's word n-grams (1 to ``max_alias_words`` words, a possessive "'s" dropped), each
normalised as aliases are (``entities.normalise``), at most ``max_phrases`` of them; the
statement looks them up by the unique (namespace_id, normalised) alias index. Exact
alias match only: no fuzzy matching on the hot path. Hybrid mode only. ``masked``: the
query with the names it holds replaced by a pronoun, for the vector leg.
"""

from __future__ import annotations

import re
from typing import Any

from stash_pipeline.memory.entities import normalise
from stash_pipeline.recall.config import DEFAULT, RecallConfig

_WORD = re.compile(r"[^\W_](?:[\w.+#&-]*[\w+#])?")
_POSSESSIVE = re.compile(r"['’]s\b", re.IGNORECASE)


def query_phrases(text: str, config: RecallConfig = DEFAULT) -> list[str]:
    """The normalised word n-grams of ``text`` that could be an alias, shortest first.

    >>> query_phrases("What does Alice Chen's project use?")[:6]
    ['what', 'does', 'alice', 'chen', 'project', 'use']
    """
    # each word normalised once: a phrase's form is its words' forms joined by spaces (a
    # word holds no parenthesis, and normalising maps character by character)
    words = [normalise(word) for word in _WORD.findall(_POSSESSIVE.sub("", text))]
    seen: dict[str, None] = {}
    for size in range(1, config.max_alias_words + 1):
        for start in range(len(words) - size + 1):
            phrase = " ".join(word for word in words[start : start + size] if word)
            if phrase:
                seen.setdefault(phrase, None)
    return list(seen)[: config.max_phrases]


def masked(text: str, named: list[str], config: RecallConfig = DEFAULT) -> str:
    """``text`` with each run of words that names an entity (``named``: normalised phrases,
    as ``query_phrases`` makes them) replaced by "they", "X's" by "their", longest first.

    A hybrid recall's query vector is mostly this form's (``recall.query_vector``): a model
    matches a name in the query to every text that carries it ("Would Priya like a handmade
    gift?" is nearest to Priya's "lol, yes"); the text and entity legs still go by the name.

    >>> masked("Would Alice Chen's team like it?", ["alice chen"])
    'Would their team like it?'
    """
    if not named:
        return text
    names = set(named)
    words = list(_WORD.finditer(text))
    out, at, i = [], 0, 0
    while i < len(words):
        for size in range(min(config.max_alias_words, len(words) - i), 0, -1):
            run = words[i : i + size]
            if " ".join(normalise(w.group()) for w in run) in names:
                end = run[-1].end()
                possessive = _POSSESSIVE.match(text, end)
                out += [text[at : run[0].start()], "their" if possessive else "they"]
                at = possessive.end() if possessive else end
                i += size
                while i < len(words) and words[i].start() < at:  # the "s" of a possessive
                    i += 1
                break
        else:
            i += 1
    return "".join(out) + text[at:]


def parameters(text: str, config: RecallConfig, *, enabled: bool) -> dict[str, Any]:
    """The entity leg's parameters of the ``recall`` statement (no phrases: the leg is off)."""
    return {
        "phrases": query_phrases(text, config) if enabled and config.entity_leg else [],
        "max_named": config.max_named,
        "links_per_entity": config.links_per_entity,
        "max_neighbours": config.max_neighbours,
        "entity_scan": config.entity_scan,
        "facts_per_entity": config.facts_per_entity,
        "max_facts": config.max_facts,
        "entity_credit": config.entity_credit,
        "entity_match": config.entity_match,
        "hop_factor": config.hop_factor,
    }
