"""The import writer's one INSERT per chunk: each written row is matched back to the row
it was given (the id is drawn by the table's trigger), rows a unique key already held are
reported as such, duplicates inside one chunk are written once, vectors travel in binary."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stash_pipeline import errors
from stash_pipeline.interchange import export, readers
from stash_pipeline.interchange.writer import Writer, vector_text
from stash_pipeline.memory import episodes, namespaces
from tests.integration.test_interchange import _sql


def _episode(ns: int, content: str, key: str | None, vector) -> dict:
    return {"namespace_id": ns, "content": content, "kind": "observation", "metadata": {"c": content},
            "idempotency_key": key, "embedding": vector, "embedding_model": "hash-384"}


def test_one_insert_per_chunk_maps_every_written_row_back_to_its_record(store):
    ns = namespaces.create(store, "/w").namespace.id
    episodes.remember(store, "/w", "already here", idempotency_key="held")
    dim = store.settings.vector_dim
    vectors = [np.full(dim, i / 10, dtype=np.float32) for i in range(6)]
    rows = [
        _episode(ns, "first", "a", vectors[0]),
        _episode(ns, "collides with a stored row", "held", vectors[1]),
        _episode(ns, "collides with the first", "a", vectors[2]),
        _episode(ns, "same text twice", None, vectors[3]),
        _episode(ns, "same text twice", None, vectors[4]),
        _episode(ns, "given as text", "t", vector_text(vectors[5])),  # the Go reader's form
    ]
    with store.db.transaction() as tx:
        written = Writer(store, tx).write_rows("episodes", [dict(r) for r in rows])
    assert [w is None for w in written] == [False, True, True, False, False, False]
    for row, result in zip(rows, written, strict=True):
        if result is None:
            continue
        assert result["namespace_id"] == ns
        [stored] = _sql(store, "SELECT content, idempotency_key, metadata, embedding::text AS v FROM episodes "
                        "WHERE id = %s", result["id"])
        assert (stored["content"], stored["idempotency_key"], stored["metadata"]) == (
            row["content"], row["idempotency_key"], row["metadata"])
        expected = row["embedding"] if isinstance(row["embedding"], str) else vector_text(row["embedding"])
        assert np.allclose(np.array(stored["v"].strip("[]").split(","), dtype=float),
                           np.array(expected.strip("[]").split(","), dtype=float))
    assert written[3]["id"] != written[4]["id"]


def test_a_table_without_ids_reports_which_rows_were_new(store):
    ns = namespaces.create(store, "/w").namespace.id
    one = episodes.remember(store, "/w", "one").id
    two = episodes.remember(store, "/w", "two").id
    edge = {"child_kind": "episode", "child_id": two, "parent_kind": "episode", "namespace_id": ns}
    with store.db.transaction() as tx:
        first = Writer(store, tx).write_rows("lineage", [edge | {"parent_id": one}])
    with store.db.transaction() as tx:
        again = Writer(store, tx).write_rows("lineage", [edge | {"parent_id": two}, edge | {"parent_id": one},
                                                        edge | {"parent_id": two}])
    assert first == [{"namespace_id": ns}]
    assert again == [{"namespace_id": ns}, None, None]


def test_an_episode_kind_is_checked_as_the_live_path_checks_it(store, tmp_path):
    """A bad kind is one reported row (not a database error that ends the import); a
    missing one takes the default, as ``remember`` gives it."""
    namespaces.create(store, "/k")
    for i in range(3):
        episodes.remember(store, "/k", f"episode {i}", kind="note")
    path = tmp_path / "k.jsonl"
    export.export_tree(store, "/k", path)
    lines = path.read_text().splitlines()
    kinds = iter(["Not A Kind!", None, "decision"])
    edited = [lines[0]]
    for line in lines[1:]:
        record = json.loads(line)
        if record["type"] == "episode":
            record["row"]["kind"] = next(kinds)
        edited.append(json.dumps(record))
    path.write_text("\n".join(edited) + "\n")
    result = readers.import_export(store, path, into="/k2")
    assert result["rows"]["episodes"] == 2
    assert list(result["skipped"]["episodes"]) == ["must be lowercase letters, digits and '_', starting with a letter"]
    assert any(p.startswith("episodes line ") and "column kind" in p for p in result["problems"])
    stored = _sql(store, "SELECT e.kind FROM episodes e JOIN namespaces n ON n.id = e.namespace_id "
                  "WHERE n.slug = '/k2' ORDER BY e.id")
    assert [r["kind"] for r in stored] == ["observation", "decision"]
    with pytest.raises(errors.BadRow, match=r"^episodes line \d+ column kind: "):
        readers.import_export(store, path, into="/k3", stop=True)
