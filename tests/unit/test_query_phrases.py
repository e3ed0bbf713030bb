"""The entity leg's query phrases: each word normalised once, a phrase its words' forms joined.

``query_phrases`` normalises each word once instead of each n-gram (recall's per-call
cost); the phrases must stay exactly what normalising each n-gram gives.
"""

from __future__ import annotations

import pytest

from stash_pipeline.memory.entities import normalise
from stash_pipeline.recall.config import DEFAULT
from stash_pipeline.recall.entities import _POSSESSIVE, _WORD, query_phrases


def by_ngram(text: str) -> list[str]:
    """The definition: every n-gram of the words, normalised as a whole."""
    words = _WORD.findall(_POSSESSIVE.sub("", text))
    seen: dict[str, None] = {}
    for size in range(1, DEFAULT.max_alias_words + 1):
        for start in range(len(words) - size + 1):
            if phrase := normalise(" ".join(words[start : start + size])):
                seen.setdefault(phrase, None)
    return list(seen)[: DEFAULT.max_phrases]


@pytest.mark.parametrize("text", [
    "What does Alice Chen's project use?",
    "Ｃａｆé ﬁle ＡＢＣ-12 Straße İstanbul ΣΊΣΥΦΟΣ node.js c++ c# a&b x²y ǅemal 𝔘𝔫𝔦",
    "e\u0301tude caf\u00e9 n\u0303 Ⅻ ㍱ ½ ﬀ ß",
    "who owns checkout-api's DB? (Alice) she’s the owner",
    "_a_ 1.2.3 v7.4.2 INC-8870 ERR_CONN_RESET -- & ++",
    " ".join(f"word{i}" for i in range(40)),  # more n-grams than max_phrases
])
def test_phrases_are_the_normalised_ngrams(text: str) -> None:
    assert query_phrases(text) == by_ngram(text)
