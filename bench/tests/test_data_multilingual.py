"""The multilingual set (bench/data/multilingual.py) has the promised shape.

No database: every scenario and every hard negative is written in all eight languages,
each in its own script, keys are unique, every question's one relevant memory is its own
scenario's in its own language, the split is DEV = every third scenario, and at most half
the questions share a longer word with their answer.
"""

from __future__ import annotations

import re

from bench.data import multilingual

SCRIPTS = {
    "zh": r"[\u4e00-\u9fff]", "ja": r"[\u3040-\u30ff]", "th": r"[\u0e01-\u0e5b]", "ar": r"[\u0620-\u064a]",
    "hi": r"[\u0900-\u097f]", "de": r"[a-zäöüß]", "es": r"[a-záéíóúñ]", "en": r"[a-z]",
}


def test_every_memory_and_question_is_written_in_every_language() -> None:
    for entry in multilingual.SCENARIOS:
        assert set(entry) == set(multilingual.LANGUAGES)
        for language, (memory, question) in entry.items():
            assert memory.strip() and question.strip()
            assert re.search(SCRIPTS[language], memory) and re.search(SCRIPTS[language], question), (language, memory)
    for entry in multilingual.DISTRACTORS:
        assert set(entry) == set(multilingual.LANGUAGES)
        assert all(re.search(SCRIPTS[language], text) for language, text in entry.items()), entry


def test_questions_point_at_their_own_memory_and_split_by_scenario() -> None:
    data = multilingual.load()
    assert set(data) == set(multilingual.LANGUAGES)
    for language, d in data.items():
        keys = [e["key"] for e in d["episodes"]]
        assert len(keys) == len(set(keys)) == len(multilingual.SCENARIOS) + len(multilingual.DISTRACTORS)
        assert len({e["content"] for e in d["episodes"]}) == len(keys)  # no memory twice
        for i, q in enumerate(d["questions"]):
            assert q["relevant"] == [f"{language}-{i:02d}"] and q["relevant"][0] in keys
            assert q["split"] == ("dev" if i % 3 == 0 else "test")
        assert sum(q["split"] == "dev" for q in d["questions"]) == 16


def test_at_least_half_the_questions_share_no_longer_word_with_their_answer() -> None:
    """The set measures search, not overlap: a question that quotes its memory is found by
    any keyword index. In the languages written with spaces and few inflections, at most
    half the questions share a word of five letters or more (a name, a product term) with
    their memory."""
    def words(text: str) -> set[str]:
        return {w for w in re.findall(r"\w+", text.lower()) if len(w) >= 5}

    for language in ("en", "de", "es"):
        sharing = [i for i, entry in enumerate(multilingual.SCENARIOS)
                   if words(entry[language][0]) & words(entry[language][1])]
        assert len(sharing) <= len(multilingual.SCENARIOS) // 2, (language, sharing)
