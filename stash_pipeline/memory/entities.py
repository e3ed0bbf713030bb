"""Entities: the subjects facts and relationships are about, one per namespace and name.

A fact's ``entity`` and a relationship's two ends are kept as written; each also points
at an entity (``facts.entity_id``, ``relationships.from_entity_id`` / ``to_entity_id``).
An entity has aliases, unique per namespace by their normalised form (``normalise``),
so "Alice", "alice" and "she (Alice)" are one alias of one entity. The consolidation
stages resolve names to entities (``stash_pipeline.stages.entity_resolution``); here
are the pure normalisation and the corrections and reads callers use.
"""

from __future__ import annotations

import re
import unicodedata

#: words that stand for a name rather than being one: "she (Alice)" is Alice
PRONOUNS = frozenset(
    {
        "i", "me", "my", "mine", "we", "us", "our", "ours", "you", "your", "yours",
        "he", "him", "his", "she", "her", "hers", "it", "its", "they", "them", "their", "theirs",
        "this", "that", "these", "those", "who", "whom",
    }
)
_PARENTHESISED = re.compile(r"^(?P<outside>[^()]*)\((?P<inside>[^()]*)\)(?P<after>[^()]*)$")


def _words(text: str) -> str:
    """Case-folded, compatibility-normalised, every run of punctuation or space one space."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(ch if ch.isalnum() else " " for ch in folded)
    return " ".join(kept.split())


def normalise(name: str) -> str:
    """The form two spellings of one name share: "Alice", " alice! " and "she (Alice)" → "alice".

    Case is folded and punctuation and spacing dropped. A parenthesised part names the
    subject when what stands outside it is only a pronoun or nothing ("she (Alice)",
    "(Alice)"); otherwise it is a gloss and is dropped ("Alice Chen (CTO)" → "alice chen").
    """
    if not isinstance(name, str):
        return ""
    match = _PARENTHESISED.match(name.strip())
    if match:
        outside = _words(match["outside"] + " " + match["after"])
        inside = _words(match["inside"])
        if inside and (not outside or all(word in PRONOUNS for word in outside.split())):
            return inside
        if outside:
            return outside
    return _words(name)
