"""Recall's keyword leg in every language (migration 0022, ``stash_lexemes``).

Chinese, Japanese and Thai put no space between words: before 0022 a whole run was one
lexeme, and a question sharing a two-character word with a memory found nothing by
keyword. Pairs of characters are indexed instead, on both sides. Punctuation outside
ASCII no longer sticks to words, capitals outside ASCII are lowercased, and English keeps
its stemming and stop words, its lexemes unchanged for a text wholly in ASCII; words in
Arabic script and in Devanagari are stemmed by the arabic and hindi configurations.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from stash_pipeline import recall
from stash_pipeline.config import load_settings
from stash_pipeline.db.migrate import migrate
from stash_pipeline.memory import episodes, namespaces

NS = "/languages"

# (memory, a question sharing one word with it, written the way people ask)
CASES = {
    "zh": ("周五下午我们在会议室讨论了新的预算方案。", "预算的事是哪天谈的？"),
    "ja": ("来週の月曜日に大阪の支店で研修があります。", "研修はいつ？"),
    "th": ("เมื่อวานฉันไปหาหมอฟันที่คลินิกใกล้บ้าน", "ไปหาหมอฟันเมื่อไหร่"),
    "ko": ("다음 주 화요일에 부산 공장을 방문합니다.", "공장 방문은 언제야?"),
    "ar": ("اتفقنا على تأجيل الاجتماع إلى يوم الخميس.", "متى الاجتماع؟"),
    "hi": ("मेरी बहन अगले महीने पुणे में नई नौकरी शुरू करेगी।", "बहन की नौकरी कहाँ है?"),
    "es": ("Álvaro perdió las llaves del coche en el parque.", "¿Dónde perdió Álvaro las llaves?"),
    "de": ("Über das Wochenende hat Jonas den Zaun im Garten gestrichen.", "Wer hat den Zaun gestrichen?"),
    "en": ("Priya runs the on-call rotation for the payments team.", "who is running on-call?"),
}
FILLER = [
    "The weather was mild and nobody went outside.",
    "我昨天买了一本书。",
    "今日は雨が降っています。",
    "วันนี้อากาศดีมาก",
    "الطقس جميل اليوم.",
    "आज मौसम अच्छा है।",
    "Hoy hace buen tiempo.",
    "Heute ist das Wetter schön.",
]


def lexemes(store: Any, text: str) -> list[str]:
    with store.db.transaction() as tx:
        row = tx.conn.execute("SELECT tsvector_to_array(stash_lexemes(%s)) AS l", (text,)).fetchone()
    return list(row["l"])


@pytest.fixture
def languages(store: Any) -> dict[str, int]:
    namespaces.create(store, NS)
    items = [{"content": memory} for memory, _ in CASES.values()] + [{"content": text} for text in FILLER]
    # a result is a Remembered (its id an attribute) or, in older trees, a dict
    ids = [r.id for r in episodes.remember_batch(store, NS, items)]
    return dict(zip(CASES, ids, strict=False))


@pytest.mark.parametrize("language", list(CASES))
def test_keyword_recall_finds_the_memory_sharing_a_word(store: Any, languages: dict[str, int], language: str) -> None:
    hits = recall.recall(store, CASES[language][1], [NS], mode="text", limit=3)
    assert hits and hits[0].id == languages[language], (language, [(h.id, h.content) for h in hits])


def test_runs_without_spaces_are_indexed_as_character_pairs(store: Any) -> None:
    assert lexemes(store, "北京开会") == sorted(["北京", "京开", "开会"])
    assert lexemes(store, "会议、北京。") == sorted(["会议", "北京"])  # CJK punctuation splits runs
    assert lexemes(store, "我用Python写代码") == sorted(["我用", "python", "写代", "代码"])
    assert lexemes(store, "年") == ["年"]  # one character alone: itself
    assert "東京" in lexemes(store, "東京で")  # kanji and kana in one run
    assert "２０２４" not in lexemes(store, "２０２４年") and "2024" in lexemes(store, "２０２４年")  # NFKC


def test_punctuation_and_capitals_outside_ascii(store: Any) -> None:
    assert lexemes(store, "الاجتماع؟") == lexemes(store, "الاجتماع") != ["الاجتماع؟"]
    assert lexemes(store, "कल बैठक।") == lexemes(store, "कल बैठक")
    assert lexemes(store, "¿Dónde está ÁLVARO? «Über»") == sorted(["dónde", "está", "álvaro", "über"])


def test_arabic_and_hindi_words_are_stemmed_by_script(store: Any) -> None:
    assert lexemes(store, "الشعار") == lexemes(store, "شعار")  # the article
    assert lexemes(store, "بالقهوة") == lexemes(store, "قهوة")  # a preposition and the article
    assert lexemes(store, "लड़कों") == lexemes(store, "लड़के")  # an inflection


def test_english_is_stemmed_and_unchanged(store: Any) -> None:
    for text in ("I was running to the runs", "Priya's on-call rotation (payments), v2.0 at 10:30!"):
        with store.db.transaction() as tx:
            same = tx.conn.execute("SELECT stash_lexemes(%s) = to_tsvector('english', %s) AS same",
                                   (text, text)).fetchone()["same"]
        assert same, text
    assert lexemes(store, "running") == lexemes(store, "runs") == ["run"]


def test_the_statistics_count_the_stored_lexemes(store: Any, languages: dict[str, int]) -> None:
    with store.db.transaction() as tx:
        stored = tx.conn.execute(
            "SELECT u.lexeme, count(*) AS n FROM episodes e, unnest(e.search) u WHERE e.deleted_at IS NULL"
            " GROUP BY 1 ORDER BY 1").fetchall()
        kept = tx.conn.execute("SELECT lexeme, documents AS n FROM recall_term_stats ORDER BY 1").fetchall()
    assert [(r["lexeme"], r["n"]) for r in stored] == [(r["lexeme"], r["n"]) for r in kept]


def test_the_migration_reindexes_stored_rows_and_their_statistics(database_at: Any, tmp_path: Path) -> None:
    """Rows written before 0022 (one lexeme per run) are read with pairs after it, and the
    BM25 statistics match the rows as they now read."""
    dsn = database_at("0021")
    with psycopg.connect(dsn, autocommit=True) as conn:
        ns = conn.execute("INSERT INTO namespaces (slug) VALUES ('/old') RETURNING id").fetchone()[0]
        for text in ("周五下午我们在会议室讨论了新的预算方案。", "Priya runs the on-call rotation.", "删除的记录"):
            conn.execute("INSERT INTO episodes (namespace_id, content, embedding, embedding_model) "
                         "VALUES (%s, %s, array_fill(0.1, ARRAY[384])::vector, 'hash-384')", (ns, text))
        conn.execute("UPDATE episodes SET deleted_at = now() WHERE content = '删除的记录'")
        old = conn.execute("SELECT documents FROM recall_term_stats WHERE lexeme = '预算'").fetchone()
        assert old is None  # before: the run was one lexeme
    migrate(load_settings(database_url=dsn, home=tmp_path, embedder="hash", vector_dim=384), dsn)
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT documents FROM recall_term_stats WHERE lexeme = '预算'").fetchone() == (1,)
        assert conn.execute("SELECT documents FROM recall_term_stats WHERE lexeme = 'run'").fetchone() == (1,)
        assert conn.execute("SELECT count(*) FROM recall_term_stats WHERE lexeme = '删除'").fetchone() == (0,)
        assert conn.execute("SELECT documents, total_length FROM recall_text_stats").fetchone() == conn.execute(
            "SELECT count(*), sum(length(search)) FROM episodes WHERE deleted_at IS NULL").fetchone()
        assert conn.execute("SELECT count(*) FROM pg_indexes WHERE indexname IN "
                            "('episodes_search_gin', 'facts_search_gin')").fetchone() == (2,)
