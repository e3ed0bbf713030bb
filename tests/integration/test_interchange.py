from __future__ import annotations

import json
from datetime import UTC, datetime

import pandas as pd
import pytest

from stash_pipeline import errors
from stash_pipeline.interchange import episode_files as interchange
from stash_pipeline.interchange import export, readers
from stash_pipeline.memory import episodes, namespaces

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


# --- tree export / import ----------------------------------------------------------------

def _sql(store, statement, *params):
    with store.db.connection() as conn:
        cur = conn.execute(statement, params or None)
        rows = cur.fetchall() if cur.description else []
        conn.commit()
        return rows


def _build_tree(store):
    from stash_pipeline.memory import context, facts, lineage

    namespaces.create(store, "/a/sub", "Sub", "a child namespace")
    e1 = episodes.remember(store, "/a", "Alice owns billing", metadata={"src": "chat"}, idempotency_key="e1").id
    e2 = episodes.remember(store, "/a/sub", "Billing moved to the payments cluster").id
    episodes.remember(store, "/a", "forget me later")
    episodes.forget(store, "forget me later", "/a", threshold=0.9)
    old = facts.assert_fact(store, "/a", "Billing owner is Alice", entity="billing", property="owner",
                            value="alice", source_episode_ids=[e1]).fact
    new = facts.assert_fact(store, "/a", "Billing owner is Bob", entity="billing", property="owner",
                            value="bob", supersede=True).fact
    cluster = facts.assert_fact(store, "/a/sub", "Billing runs on payments", source_episode_ids=[e2]).fact
    facts.withdraw(store, cluster.id, "test withdrawal")
    [rel] = _sql(store, "INSERT INTO relationships (namespace_id, from_entity, relation_type, to_entity, "
                 "source_fact_id) SELECT id, 'bob', 'owns', 'billing', %s FROM namespaces WHERE slug = '/a' "
                 "RETURNING id", new.id)
    [pat] = _sql(store, "INSERT INTO patterns (namespace_id, content) SELECT id, 'owners change' FROM namespaces "
                 "WHERE slug = '/a' RETURNING id")
    with store.db.transaction() as tx:
        nsid = namespaces.resolve_id(tx, "/a")
        lineage.add(tx, nsid, "relationship", rel["id"], [("fact", new.id)])
        lineage.add(tx, nsid, "pattern", pat["id"], [("fact", old.id), ("relationship", rel["id"])])
    _sql(store, "INSERT INTO causal_links (namespace_id, cause_fact_id, effect_fact_id) "
         "SELECT id, %s, %s FROM namespaces WHERE slug = '/a'", old.id, new.id)
    [hyp] = _sql(store, "INSERT INTO hypotheses (namespace_id, content, verification_plan, confirmed_fact_id) "
                 "SELECT id, 'Bob will keep billing', 'ask Bob', %s FROM namespaces WHERE slug = '/a' RETURNING id",
                 new.id)
    _sql(store, "INSERT INTO hypothesis_evidence (hypothesis_id, fact_id, namespace_id, verdict, confidence, "
         "reasoning) SELECT %s, %s, id, 'supports', 0.8, 'because' FROM namespaces WHERE slug = '/a'",
         hyp["id"], new.id)
    [goal] = _sql(store, "INSERT INTO goals (namespace_id, content) SELECT id, 'ship billing v2' FROM namespaces "
                  "WHERE slug = '/a' RETURNING id")
    _sql(store, "INSERT INTO goals (namespace_id, parent_id, content) SELECT id, %s, 'write tests' "
                   "FROM namespaces WHERE slug = '/a/sub'", goal["id"])
    # a note lives with its goal, and its fact in the same namespace, as the live path writes them
    _sql(store, "INSERT INTO goal_notes (goal_id, namespace_id, author, content, fact_id) "
         "SELECT %s, id, 'model', 'progress', %s FROM namespaces WHERE slug = '/a'", goal["id"], new.id)
    _sql(store, "INSERT INTO failures (namespace_id, goal_id, content, reason, lesson) "
         "SELECT id, %s, 'broke prod', 'no tests', 'write tests' FROM namespaces WHERE slug = '/a'", goal["id"])
    context.set_(store, "/a", "billing migration")
    # something outside the tree that must not be exported
    namespaces.create(store, "/z")
    episodes.remember(store, "/z", "outside the tree")


ID_FIELDS = {
    "parent_id": "goal", "goal_id": "goal", "source_fact_id": "fact", "cause_fact_id": "fact",
    "effect_fact_id": "fact", "effect_failure_id": "failure", "old_fact_id": "fact", "new_fact_id": "fact",
    "confirmed_fact_id": "fact", "hypothesis_id": "hypothesis", "fact_id": "fact", "superseded_by": "fact",
    "entity_id": "entity", "merged_into": "entity", "other_entity_id": "entity", "from_entity_id": "entity",
    "to_entity_id": "entity",
}


def _canonical(path, root):
    """Rows with ids replaced by their ordinal per type and slugs made relative: comparable across imports."""
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    records = lines[1:]
    ordinal: dict[str, dict[int, int]] = {}
    for r in records:
        if "id" in r["row"]:
            table = ordinal.setdefault(r["type"], {})
            table[r["row"]["id"]] = len(table)
    ns_slug = {r["row"]["id"]: r["row"]["slug"][len(root):] or "/" for r in records if r["type"] == "namespace"}
    out = []
    for r in records:
        row = dict(r["row"])
        row.pop("id", None)
        if r["type"] == "namespace":
            row["slug"] = row["slug"][len(root):] or "/"
            row.pop("created_at"), row.pop("updated_at")
        if "namespace_id" in row:
            row["namespace_id"] = ns_slug[row["namespace_id"]]
        for field, kind in ID_FIELDS.items():
            if r["type"] != "lineage" and row.get(field) is not None:
                row[field] = ordinal[kind][row[field]]
        if r["type"] == "lineage":
            row["child_id"] = ordinal[row["child_kind"]][row["child_id"]]
            row["parent_id"] = ordinal[row["parent_kind"]][row["parent_id"]]
            row.pop("created_at")
        out.append((r["type"], json.dumps(row, sort_keys=True)))
    return sorted(out)


def test_tree_export_import_round_trip_is_lossless(store, tmp_path):
    _build_tree(store)
    first = tmp_path / "a.jsonl"
    exported = export.export_tree(store, "/a", first)
    assert exported["rows"]["namespaces"] == 2 and exported["rows"]["episodes"] == 3
    assert exported["rows"]["facts"] == 3 and exported["rows"]["lineage"] == 5
    assert '"embedding":' not in first.read_text() and "outside the tree" not in first.read_text()

    imported = readers.import_export(store, first, into="/copy/of-a")
    assert imported["rows"] == exported["rows"] and imported["skipped"] == {}
    second = tmp_path / "b.jsonl"
    export.export_tree(store, "/copy/of-a", second)
    assert _canonical(first, "/a") == _canonical(second, "/copy/of-a")
    # the copy behaves: its current facts and recall exclude the retired ones
    from stash_pipeline import recall
    from stash_pipeline.memory import facts

    assert [f.content for f in facts.query(store, "/copy/of-a")] == ["Billing owner is Bob"]
    hits = recall.recall(store, "billing owner", ["/copy/of-a"])
    assert "Billing owner is Alice" not in [h.content for h in hits]
    assert {n.slug for n in namespaces.list_(store, ["/copy"])} == {"/copy", "/copy/of-a", "/copy/of-a/sub"}


def test_tree_import_is_one_transaction(store, tmp_path):
    _build_tree(store)
    path = tmp_path / "a.jsonl"
    export.export_tree(store, "/a", path)
    before = _sql(store, "SELECT count(*) FROM episodes")[0]["count"]
    # the last fact breaks the content cap: with stop, the import ends there and nothing stays
    lines = path.read_text().splitlines()
    last = max(i for i, line in enumerate(lines) if json.loads(line).get("type") == "fact")
    record = json.loads(lines[last])
    record["row"]["content"] = "x" * (store.settings.max_content_bytes + 1)
    lines[last] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(errors.BadRow, match=r"^facts line \d+ column content: is \d+ bytes"):
        readers.import_export(store, path, into="/copy", stop=True)
    assert _sql(store, "SELECT count(*) FROM episodes")[0]["count"] == before
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "something else"}\n')
    with pytest.raises(errors.InvalidInput, match="not a Stash tree export"):
        readers.import_export(store, bad)
