"""Table exports (Parquet / CSV + manifest) and their lossless round trip."""

from __future__ import annotations

import json
from datetime import datetime

import pyarrow.parquet as pq
import pytest

from stash_pipeline import errors
from stash_pipeline.db.catalog import TABLES
from stash_pipeline.interchange import export, files, readers
from stash_pipeline.memory import namespaces
from tests.integration.test_interchange import _build_tree, _sql

#: reference columns -> the id space they point into (lineage / dead letters carry their kind)
REFERENCES = {column: ref.kind for t in TABLES for column, ref in t.refs.items() if ref.kind}
KIND = {t.name: t.kind for t in TABLES}


def read_rows(directory, manifest):
    """Every table's rows as Python values (typed), read back from the files."""
    out = {name: [] for name in manifest["tables"]}
    for table, rows in readers.table_chunks(directory, manifest, 1000):
        out[table.name] += [row for _, row in rows]
    return out


def canonical(directory, root):
    """Rows with every id replaced by its ordinal in its table and slugs made relative to the root:
    two exports of the same memory compare equal whatever ids the database gave."""
    manifest = json.loads((directory / export.MANIFEST).read_text())
    tables = read_rows(directory, manifest)
    ordinal = {KIND[name]: {row["id"]: i for i, row in enumerate(rows)}
               for name, rows in tables.items() if rows and "id" in rows[0]}
    slug = {row["id"]: row["slug"][len(root):] or "/" for row in tables["namespaces"]}
    out = {}
    for name, rows in tables.items():
        canon = []
        for row in rows:
            row = dict(row)
            row.pop("id", None)
            if name == "namespaces":
                row["slug"] = slug_of(row["slug"], root)
            if "namespace_id" in row:
                row["namespace_id"] = slug[row["namespace_id"]]
            for column, kind in REFERENCES.items():
                if row.get(column) is not None and column in row and name not in ("lineage", "dead_letters"):
                    row[column] = ordinal[kind][row[column]]
            if name == "lineage":
                row["child_id"] = ordinal[row["child_kind"]][row["child_id"]]
                row["parent_id"] = ordinal[row["parent_kind"]][row["parent_id"]]
            if name == "dead_letters":
                row["item_id"] = ordinal[row["item_kind"]][row["item_id"]]
            canon.append(json.dumps(row, sort_keys=True, default=str))
        out[name] = canon
    return out


def slug_of(slug, root):
    return slug[len(root):] or "/"


@pytest.mark.parametrize("file_format", ["parquet", "csv"])
def test_round_trip_under_another_root_is_lossless(store, tmp_path, file_format):
    _build_tree(store)
    _sql(store, "INSERT INTO dead_letters (namespace_id, stage, item_kind, item_id, last_error, payload) "
         "SELECT n.id, 'facts', 'episode', e.id, 'boom', '{\"k\": [1, 2]}' FROM namespaces n "
         "JOIN episodes e ON e.namespace_id = n.id WHERE n.slug = '/a' ORDER BY e.id LIMIT 1")
    first = tmp_path / "first"
    manifest = export.export_tables(store, "/a", first, format=file_format)
    assert manifest["tables"]["episodes"]["rows"] == 3 and manifest["tables"]["facts"]["rows"] == 3
    assert manifest["tables"]["lineage"]["rows"] == 5 and manifest["tables"]["dead_letters"]["rows"] == 1
    assert manifest["schema_version"] and manifest["root"] == "/a"
    for name, entry in manifest["tables"].items():
        assert (first / entry["file"]).is_file(), name
        assert entry["sha256"] == files.sha256(first / entry["file"])
    names = {c["name"] for c in manifest["tables"]["episodes"]["columns"]}
    assert "embedding" not in names and "search" not in names and "metadata" in names

    result = readers.import_export(store, first, into="/copy/of-a")
    assert result["skipped"] == {} and result["vectors"] == "recomputed"
    assert result["rows"]["facts"] == 3 and result["rows"]["lineage"] == 5
    second = tmp_path / "second"
    export.export_tables(store, "/copy/of-a", second, format=file_format)
    before, after = canonical(first, "/a"), canonical(second, "/copy/of-a")
    for name in before:
        assert before[name] == after[name], name
    assert {n.slug for n in namespaces.list_(store, ["/copy"])} == {"/copy", "/copy/of-a", "/copy/of-a/sub"}
    [superseded] = _sql(store, "SELECT count(*) FROM facts f JOIN namespaces n ON n.id = f.namespace_id "
                        "WHERE n.slug = '/copy/of-a' AND superseded_by IS NOT NULL")
    assert superseded["count"] == 1


def test_parquet_columns_are_typed(store, tmp_path):
    _build_tree(store)
    manifest = export.export_tables(store, "/a", tmp_path / "out", with_vectors=True)
    schema = pq.read_schema(tmp_path / "out" / manifest["tables"]["episodes"]["file"])
    assert str(schema.field("occurred_at").type) == "timestamp[us, tz=UTC]"
    assert str(schema.field("metadata").type) == "string"
    assert str(schema.field("embedding").type) == "list<element: float>"
    rows = pq.read_table(tmp_path / "out" / "episodes.parquet").to_pylist()
    assert isinstance(rows[0]["created_at"], datetime) and len(rows[0]["embedding"]) == 384
    assert json.loads(rows[0]["metadata"]) == {"src": "chat"}


def test_vectors_travel_only_with_the_flag(store, tmp_path):
    _build_tree(store)
    # vectors no embedder would produce: a copy holding them took them from the file
    _sql(store, "UPDATE episodes SET embedding = array_fill(0.5, ARRAY[384])::vector")
    export.export_tables(store, "/a", tmp_path / "v", with_vectors=True)
    assert readers.import_export(store, tmp_path / "v", into="/b", with_vectors=True)["vectors"] == "reused"
    assert readers.import_export(store, tmp_path / "v", into="/c")["vectors"] == "recomputed"
    counts = _sql(store, "SELECT split_part(n.slug, '/', 2) AS root, count(*) FILTER "
                  "(WHERE e.embedding = array_fill(0.5, ARRAY[384])::vector) AS marked, count(*) AS total "
                  "FROM episodes e JOIN namespaces n ON n.id = e.namespace_id "
                  "WHERE split_part(n.slug, '/', 2) IN ('b', 'c') GROUP BY 1 ORDER BY 1")
    assert [(r["root"], r["marked"], r["total"]) for r in counts] == [("b", 3, 3), ("c", 0, 3)]


def test_a_tampered_file_is_refused(store, tmp_path):
    _build_tree(store)
    export.export_tables(store, "/a", tmp_path / "out", format="csv")
    with (tmp_path / "out" / "episodes.csv").open("a") as handle:
        handle.write("tampered\n")
    with pytest.raises(errors.InvalidInput, match="checksum"):
        readers.import_export(store, tmp_path / "out", into="/b")
    with pytest.raises(errors.InvalidInput, match="not an empty directory"):
        export.export_tables(store, "/a", tmp_path / "out")


def _measure(database_url, out, *args):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "tests.support.export_rss", database_url, str(out), *args],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_large_export_stays_in_bounded_memory(database_url, tmp_path):
    """20k episodes with their vectors. Read in one piece (one 20k-row chunk) the export
    allocates ~300 MB through Python at its peak; streamed in 5,000-row chunks ~75 MB. The
    bound sits between the two. It is held against tracemalloc's peak during the export,
    not the process's RSS, which also counts the warm-up and what the allocator keeps (it
    swung between +110 and +300 MB for the same streamed export)."""
    figures = _measure(database_url, tmp_path, "--fill", "20000", "--with-vectors")
    assert figures["rows"] == 20000
    assert figures["python_peak_mb"] < 150, figures


def test_round_trip_into_an_empty_database(store, tmp_path, pg_admin_dsn, template_db):
    import uuid

    import psycopg

    from stash_pipeline.config import load_settings
    from stash_pipeline.store import Store
    from tests.conftest import _with_db

    _build_tree(store)
    _sql(store, "UPDATE contradictions SET resolved = true, resolution = 'keep_both', resolution_note = 'both hold'")
    export.export_tables(store, "/a", tmp_path / "first", format="parquet")
    name = f"stash_t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    other = Store.open(load_settings(database_url=_with_db(pg_admin_dsn, name), home=tmp_path / "h2",
                                     embedder="hash", vector_dim=384))
    try:
        result = readers.import_export(other, tmp_path / "first")
        assert result["namespace"] == "/a" and result["skipped"] == {}
        export.export_tables(other, "/a", tmp_path / "second", format="parquet")
        assert canonical(tmp_path / "first", "/a") == canonical(tmp_path / "second", "/a")
        [note] = _sql(other, "SELECT resolution_note FROM contradictions")
        assert note["resolution_note"] == "both hold"
    finally:
        other.close()
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
