from __future__ import annotations

import json
from datetime import UTC, datetime

import pandas as pd
import pytest

from stash_pipeline import errors
from stash_pipeline.memory import interchange, namespaces

NS = "/imports"


@pytest.fixture(autouse=True)
def ns(store):
    namespaces.create(store, NS)


def all_episodes(store):
    with store.db.connection() as conn:
        return conn.execute(
            "SELECT content, kind, metadata, idempotency_key, occurred_at FROM episodes ORDER BY id"
        ).fetchall()


def write_jsonl(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_jsonl_import_with_all_fields(store, tmp_path):
    path = write_jsonl(tmp_path / "e.jsonl", [
        {"content": "first", "occurred_at": "2026-01-02T03:04:05Z", "kind": "note", "metadata": {"a": 1},
         "idempotency_key": "k1"},
        "",
        {"content": "second"},
    ])
    seen = []
    out = interchange.import_episodes(store, NS, path, progress=lambda done, total: seen.append((done, total)))
    assert out == {"namespace": NS, "rows": 2, "created": 2, "replayed": 0, "batches": 1}
    assert seen == [(2, 2)]
    rows = all_episodes(store)
    assert [r["content"] for r in rows] == ["first", "second"]
    assert rows[0]["kind"] == "note" and rows[0]["metadata"] == {"a": 1} and rows[0]["idempotency_key"] == "k1"
    assert rows[0]["occurred_at"] == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert rows[1]["kind"] == "observation" and rows[1]["metadata"] == {}
    # re-import is safe for keyed rows
    again = interchange.import_episodes(store, NS, path)
    assert again["replayed"] == 1 and again["created"] == 1


def test_bad_rows_reported_by_line_and_nothing_written(store, tmp_path):
    path = write_jsonl(tmp_path / "bad.jsonl", [
        {"content": "fine"},
        {"content": ""},
        "{not json",
        {"content": "x", "metadata": [1]},
        {"content": "ok", "colour": "red"},
        "[1, 2]",
        {"content": "a", "idempotency_key": "dup"},
        {"content": "b", "idempotency_key": "dup"},
    ])
    with pytest.raises(errors.InvalidInput) as info:
        interchange.import_episodes(store, NS, path)
    message = info.value.message
    for line in ("line 2:", "line 3:", "line 4:", "line 5:", "line 6:", "line 8:"):
        assert line in message
    assert "line 1:" not in message and "line 7:" not in message
    assert "nothing was imported" in message
    assert all_episodes(store) == []


def test_csv_import(store, tmp_path):
    path = tmp_path / "e.csv"
    pd.DataFrame([
        {"content": "from csv, with a comma", "occurred_at": "2026-02-01T10:00:00+01:00", "kind": "",
         "metadata": '{"source": "crm"}', "idempotency_key": ""},
        {"content": "second row", "occurred_at": "", "kind": "ticket", "metadata": "", "idempotency_key": "t-9"},
    ]).to_csv(path, index=False)
    out = interchange.import_episodes(store, NS, path)
    assert out["created"] == 2
    rows = all_episodes(store)
    assert rows[0]["content"] == "from csv, with a comma" and rows[0]["metadata"] == {"source": "crm"}
    assert rows[0]["occurred_at"] == datetime(2026, 2, 1, 9, 0, tzinfo=UTC)
    assert rows[1]["kind"] == "ticket" and rows[1]["idempotency_key"] == "t-9"


def test_csv_bad_row_line_numbers_count_the_header(store, tmp_path):
    path = tmp_path / "e.csv"
    pd.DataFrame([{"content": "ok", "metadata": ""}, {"content": "bad", "metadata": "{oops"}]).to_csv(
        path, index=False
    )
    with pytest.raises(errors.InvalidInput, match="line 3: metadata is not valid JSON"):
        interchange.import_episodes(store, NS, path)
    bad_columns = tmp_path / "c.csv"
    pd.DataFrame([{"text": "x"}]).to_csv(bad_columns, index=False)
    with pytest.raises(errors.InvalidInput, match="unknown column"):
        interchange.import_episodes(store, NS, bad_columns)
    assert all_episodes(store) == []


def test_parquet_import_in_batches(store, tmp_path, monkeypatch):
    monkeypatch.setattr(interchange, "BATCH_SIZE", 4)
    path = tmp_path / "e.parquet"
    pd.DataFrame({
        "content": [f"parquet episode {i}" for i in range(10)],
        "occurred_at": pd.to_datetime(["2026-03-01T00:00:00Z"] * 10, utc=True),
        "metadata": [json.dumps({"i": i}) for i in range(10)],
    }).to_parquet(path)
    seen = []
    out = interchange.import_episodes(store, NS, path, progress=lambda d, t: seen.append(d))
    assert out == {"namespace": NS, "rows": 10, "created": 10, "replayed": 0, "batches": 3}
    assert seen == [4, 8, 10]
    rows = all_episodes(store)
    assert [r["metadata"]["i"] for r in rows] == list(range(10))
    assert rows[0]["occurred_at"] == datetime(2026, 3, 1, tzinfo=UTC)


def test_format_and_namespace_errors(store, tmp_path):
    path = write_jsonl(tmp_path / "e.txt", [{"content": "x"}])
    with pytest.raises(errors.InvalidInput, match="format"):
        interchange.import_episodes(store, NS, path)
    assert interchange.import_episodes(store, NS, path, format="jsonl")["created"] == 1
    with pytest.raises(errors.NamespaceNotFound):
        interchange.import_episodes(store, "/nope", path, format="jsonl")
    with pytest.raises(errors.InvalidInput, match="no such file"):
        interchange.import_episodes(store, NS, tmp_path / "missing.jsonl")
    empty = write_jsonl(tmp_path / "empty.jsonl", [""])
    with pytest.raises(errors.InvalidInput, match="no episodes"):
        interchange.import_episodes(store, NS, empty)
