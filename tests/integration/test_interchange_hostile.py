"""A corpus of hostile exports, files and Go databases, each with its expected outcome:
what a hostile operator or tenant tried against the importers, and what they get now.

The scope guarantee is checked structurally after every import (``assert_confined``):
no imported reference points where the live tools would refuse to point it, so a token
scoped to one tree reaches no row outside it through an imported id.
"""

from __future__ import annotations

import json
import os
import uuid
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from stash_pipeline import errors
from stash_pipeline.db import catalog
from stash_pipeline.interchange import episode_files, export, files, go_import, readers
from stash_pipeline.interchange.writer import _within
from stash_pipeline.memory import episodes, facts, namespaces
from tests.conftest import _with_db
from tests.integration.test_interchange import _sql

SCHEMA = Path(__file__).resolve().parents[1] / "support" / "go_stash_schema.sql"


def assert_confined(store) -> None:
    """Every reference of every catalog table lands where its rule allows (see catalog.Ref)."""
    bad = []
    for table in catalog.TABLES:
        for column, ref in table.refs.items():
            if not ref.kind or table.name == "namespaces":
                continue
            target = catalog.BY_KIND[ref.kind].name
            rows = _sql(store, f"SELECT rn.slug AS row, tn.slug AS target FROM {table.name} r "
                        f"JOIN {target} t ON t.id = r.{column} JOIN namespaces rn ON rn.id = r.namespace_id "
                        "JOIN namespaces tn ON tn.id = t.namespace_id")
            bad += [(table.name, column, r) for r in rows if not _within(ref.scope, r["row"], r["target"])]
    for side, scope in (("child", "same"), ("parent", "tree")):
        for kind in catalog.LINEAGE_KINDS:
            target = catalog.BY_KIND[kind].name
            rows = _sql(store, f"SELECT rn.slug AS row, tn.slug AS target FROM lineage l JOIN {target} t "
                        f"ON t.id = l.{side}_id AND l.{side}_kind = %s JOIN namespaces rn ON rn.id = l.namespace_id "
                        "JOIN namespaces tn ON tn.id = t.namespace_id", kind)
            bad += [("lineage", side, r) for r in rows if not _within(scope, r["row"], r["target"])]
    assert not bad, bad


def secret_and_tenant(store, root: str = ""):
    """A tenant tree ``{root}/gx`` (two contradicting facts, a causal link, a goal) beside a
    secret ``{root}/gy-secret`` (a fact, a goal): (secret fact id, tenant's old fact id, secret goal id)."""
    tenant, hidden = f"{root}/gx", f"{root}/gy-secret"
    namespaces.create(store, tenant)
    namespaces.create(store, hidden)
    secret = facts.assert_fact(store, hidden, "The vault code is 1234").fact.id
    old = facts.assert_fact(store, tenant, "Billing owner is Alice").fact.id
    new = facts.assert_fact(store, tenant, "Billing owner is Bob").fact.id
    _sql(store, "INSERT INTO contradictions (namespace_id, old_fact_id, new_fact_id, entity, property, old_value, "
         "new_value, classification, confidence, explanation, method) SELECT id, %s, %s, 'billing', 'owner', "
         "'alice', 'bob', 'contradiction', 0.9, '', 'structured' FROM namespaces WHERE slug = %s", old, new, tenant)
    _sql(store, "INSERT INTO causal_links (namespace_id, cause_fact_id, effect_fact_id) "
         "SELECT id, %s, %s FROM namespaces WHERE slug = %s", old, new, tenant)
    [goal] = _sql(store, "INSERT INTO goals (namespace_id, content) SELECT id, 'secret plan' FROM namespaces "
                  "WHERE slug = %s RETURNING id", hidden)
    _sql(store, "INSERT INTO goals (namespace_id, content) SELECT id, 'tenant goal' FROM namespaces "
         "WHERE slug = %s", tenant)
    return secret, old, new, goal["id"]


def _edit(path: Path, change) -> None:
    lines = path.read_text().splitlines()
    out = [lines[0]] + [json.dumps(change(json.loads(line))) for line in lines[1:]]
    path.write_text("\n".join(out) + "\n")


def test_hand_edited_export_cannot_point_a_tenant_row_at_another_namespace(store, tmp_path):
    """Scope escape through an edited export: every /gx reference re-aimed at /gy-secret."""
    secret, old, _, secret_goal = secret_and_tenant(store)
    path = tmp_path / "all.jsonl"
    export.export_tree(store, "/", path)

    def aim(record):
        row = record["row"]
        if record["type"] in ("contradiction", "causal_link") and row.get("old_fact_id", row.get("cause_fact_id")):
            row["old_fact_id" if "old_fact_id" in row else "cause_fact_id"] = secret
        if record["type"] == "fact" and row["id"] == old:
            row["superseded_by"] = secret
        if record["type"] == "goal" and row["content"] == "tenant goal":
            row["parent_id"] = secret_goal
        return record

    _edit(path, aim)
    result = readers.import_export(store, path, into="/imp")
    assert result["skipped"]["contradictions"] == {"points into another namespace (allowed: same)": 1}
    assert result["skipped"]["causal_links"] == {"points into another namespace (allowed: same)": 1}
    assert result["skipped"]["goals"] == {"dropped: points into another namespace (allowed: ancestor)": 1}
    assert result["skipped"]["facts"] == {"dropped: points into another namespace (allowed: same)": 1}
    assert any(p.startswith("contradictions line ") and "column old_fact_id" in p for p in result["problems"])
    assert all("1234" not in p for p in result["problems"])
    assert_confined(store)
    with pytest.raises(errors.BadRow, match=r"^causal_links line \d+ column cause_fact_id: points into another"):
        readers.import_export(store, path, into="/imp2", stop=True)


def test_into_confines_slugs_by_path_segment(store, tmp_path):
    namespaces.create(store, "/exp")
    namespaces.create(store, "/t-prod")
    path = tmp_path / "exp.jsonl"
    export.export_tree(store, "/exp", path)
    lines = path.read_text().splitlines()
    lines.append(json.dumps({"type": "namespace", "row": {"id": 999999, "slug": "/exp-prod", "name": "x"}}))
    lines.insert(2, lines.pop())  # namespaces come first
    path.write_text("\n".join(lines) + "\n")
    result = readers.import_export(store, path, into="/t")
    assert result["skipped"]["namespaces"] == {"its path is not under the export's root /exp": 1}
    assert {n.slug for n in namespaces.list_(store, ["/"])} >= {"/t", "/t-prod"}
    assert _sql(store, "SELECT name FROM namespaces WHERE slug = '/t-prod'")[0]["name"] != "x"


@pytest.mark.parametrize("file_format", ["jsonl", "parquet"])
def test_importing_the_same_export_again_is_a_no_op_that_says_so(store, tmp_path, file_format):
    namespaces.create(store, "/src")
    facts.assert_fact(store, "/src", "Deploys happen on Fridays")
    path = tmp_path / ("src.jsonl" if file_format == "jsonl" else "src")
    if file_format == "jsonl":
        export.export_tree(store, "/src", path)
    else:
        export.export_tables(store, "/src", path)
    first = readers.import_export(store, path, into="/copy")
    assert first["rows"]["facts"] == 1 and first["already_imported"] is None
    again = readers.import_export(store, path, into="/copy")
    assert again["already_imported"] and again["rows"] == {} and again["identity"] == first["identity"]
    assert _sql(store, "SELECT count(*) FROM facts")[0]["count"] == 2  # the original and one copy


def test_caps_timestamps_and_path_length_hold_on_import(store, tmp_path):
    namespaces.create(store, "/caps")
    path = tmp_path / "caps.jsonl"
    export.export_tree(store, "/caps", path)
    cap = store.settings.max_content_bytes
    rows = [
        {"type": "episode", "row": {"id": 1, "namespace_id": None, "content": "x" * (cap * 2), "kind": "observation"}},
        {"type": "episode", "row": {"id": 2, "namespace_id": None, "content": "ok", "kind": "observation",
                                    "metadata": {"k": "v" * (store.settings.max_metadata_bytes + 1)}}},
        {"type": "episode", "row": {"id": 3, "namespace_id": None, "content": "ok", "kind": "observation",
                                    "occurred_at": "9999-12-31T23:59:59-14:00"}},
        {"type": "episode", "row": {"id": 4, "namespace_id": None, "content": "fine", "kind": "observation"}},
    ]
    lines = path.read_text().splitlines()
    ns_id = json.loads(lines[1])["row"]["id"]
    long_slug = "/caps" + "/" + "/".join(["a" * 60] * 9)  # over 512 characters
    lines.insert(2, json.dumps({"type": "namespace", "row": {"id": ns_id + 1, "slug": long_slug}}))
    for row in rows:
        row["row"]["namespace_id"] = ns_id
        lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n")
    result = readers.import_export(store, path, into="/capped")
    assert result["rows"]["episodes"] == 1
    reasons = result["skipped"]["episodes"]
    assert sum(reasons.values()) == 3 and any("bytes; the limit is" in r for r in reasons)
    assert any("must lie between" in r for r in reasons)
    assert "namespaces" in result["skipped"]
    assert max(len(r["slug"]) for r in _sql(store, "SELECT slug FROM namespaces")) <= 512


def test_manifest_paths_stay_inside_the_export_directory(store, tmp_path):
    namespaces.create(store, "/m")
    out = tmp_path / "out"
    export.export_tables(store, "/m", out)
    secret = tmp_path / "secret.parquet"
    secret.write_bytes((out / "episodes.parquet").read_bytes())
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["tables"]["episodes"]["file"] = "../secret.parquet"
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(errors.InvalidInput, match="does not name a file in the export directory"):
        readers.import_export(store, out)
    os.symlink(secret, out / "link.parquet")
    manifest["tables"]["episodes"]["file"] = "link.parquet"
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(errors.InvalidInput, match="leaves the export directory"):
        readers.import_export(store, out)


def test_hand_edited_manifest_gives_a_typed_error_without_content(store, tmp_path):
    namespaces.create(store, "/m")
    out = tmp_path / "out"
    export.export_tables(store, "/m", out)
    manifest = json.loads((out / "manifest.json").read_text())
    del manifest["tables"]["facts"]["columns"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(errors.InvalidInput, match="the entry for facts lacks"):
        readers.import_export(store, out)
    # a cell the reader cannot parse: the error names table and row, never the cell
    csv_out = tmp_path / "csv"
    facts.assert_fact(store, "/m", "A fact")
    export.export_tables(store, "/m", csv_out, format="csv")
    lines = (csv_out / "facts.csv").read_text().splitlines()
    lines[1] = lines[1].replace(lines[1].split(",")[0], '"SECRET-VALUE"', 1)
    (csv_out / "facts.csv").write_text("\n".join(lines) + "\n")
    manifest = json.loads((csv_out / "manifest.json").read_text())
    manifest["tables"]["facts"]["sha256"] = files.sha256(csv_out / "facts.csv")
    (csv_out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(errors.InvalidInput) as caught:
        readers.import_export(store, csv_out, into="/m2")
    assert caught.value.message.startswith("facts row") and "SECRET-VALUE" not in caught.value.message


def test_exports_refuse_to_overwrite_or_follow_a_symlink_unless_forced(store, tmp_path):
    namespaces.create(store, "/x")
    target = tmp_path / "x.jsonl"
    target.write_text("precious")
    with pytest.raises(errors.InvalidInput, match="already exists"):
        export.export_tree(store, "/x", target)
    assert target.read_text() == "precious"
    victim = tmp_path / "victim.txt"
    victim.write_text("do not touch")
    link = tmp_path / "planted.jsonl"
    link.symlink_to(victim)
    with pytest.raises(errors.InvalidInput, match="already exists"):
        export.export_tree(store, "/x", link)
    export.export_tree(store, "/x", link, force=True)  # replaces the link, never writes through it
    assert victim.read_text() == "do not touch" and not link.is_symlink()
    directory = tmp_path / "dirlink"
    directory.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(errors.InvalidInput, match="symlink"):
        export.export_tables(store, "/x", directory)


def test_readers_refuse_an_endless_line_within_the_bound(store, tmp_path, monkeypatch):
    monkeypatch.setattr(files, "MAX_RECORD_BYTES", 64 * 1024)
    namespaces.create(store, "/big")
    one_line = tmp_path / "one-line.csv"
    one_line.write_text("content\n" + "x" * (1024 * 1024))  # no newline: one endless row
    with pytest.raises(errors.InvalidInput) as caught:
        episode_files.import_episodes(store, "/big", one_line)
    assert "xxxx" not in caught.value.message
    jsonl = tmp_path / "one-line.jsonl"
    jsonl.write_text('{"content": "' + "x" * (1024 * 1024))
    with pytest.raises(errors.InvalidInput, match="longer than 65536 bytes"):
        episode_files.import_episodes(store, "/big", jsonl)
    tree = tmp_path / "tree.jsonl"
    export.export_tree(store, "/big", tree)
    with tree.open("a") as handle:
        handle.write('{"type": "episode", "row": {"content": "' + "x" * (1024 * 1024))
    with pytest.raises(errors.InvalidInput, match="longer than 65536 bytes"):
        readers.import_export(store, tree, into="/big2")
    table = pa.table({"id": [1], "namespace_id": [1], "content": ["x" * (1024 * 1024)]})
    out = tmp_path / "tables"
    export.export_tables(store, "/big", out)
    pq.write_table(table, out / "episodes.parquet")
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["tables"]["episodes"]["sha256"] = files.sha256(out / "episodes.parquet")
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(errors.InvalidInput, match="row group over"):
        readers.import_export(store, out, into="/big3")


def test_a_row_the_database_refuses_is_named_without_its_content(store, tmp_path):
    """A hand-edited row that passes the writer's checks but not the table's (here: no
    namespace) ends the import with where and which column, not the database's message,
    which quotes the whole row."""
    namespaces.create(store, "/nn")
    episodes.remember(store, "/nn", "SECRET-CONTENT of an episode")
    path = tmp_path / "nn.jsonl"
    export.export_tree(store, "/nn", path)
    lines = path.read_text().splitlines()
    for number, line in enumerate(lines):
        record = json.loads(line)
        if record.get("type") == "episode":
            del record["row"]["namespace_id"]
            lines[number] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(errors.BadRow, match=r"^episodes line \d+ column namespace_id: ") as caught:
        readers.import_export(store, path, into="/nn2")
    assert "SECRET" not in caught.value.message


# --- Go databases -------------------------------------------------------------------------

@contextmanager
def go_database(pg_admin_dsn, rows: str, encoding: str | None = None):
    name = f"go_hostile_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        extra = f" ENCODING '{encoding}' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0" if encoding else ""
        conn.execute(f'CREATE DATABASE "{name}"{extra}')
    dsn = _with_db(pg_admin_dsn, name)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(SCHEMA.read_text())
            conn.execute(rows)
        yield dsn
    finally:
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


SCOPE_ESCAPE = """
INSERT INTO namespaces (id, slug) VALUES (1, '/gx'), (2, '/gy-secret');
INSERT INTO episodes (id, namespace_id, content) VALUES (10, 2, 'secret episode'), (11, 1, 'tenant episode');
INSERT INTO facts (id, namespace_id, content, entity, property, value) VALUES
  (21, 2, 'The vault code is 1234', 'vault', 'code', '1234'),
  (22, 1, 'Billing owner is Bob', 'billing', 'owner', 'bob');
INSERT INTO fact_sources (fact_id, episode_id) VALUES (22, 10), (22, 11);
INSERT INTO contradictions (id, namespace_id, old_fact_id, new_fact_id, entity, property, old_value, new_value,
                            method, resolved, resolution) VALUES
  (51, 1, 21, 22, 'vault', 'code', '1234', 'bob', 'auto', true, 'superseded');
INSERT INTO causal_links (id, namespace_id, cause_fact_id, effect_fact_id) VALUES (81, 1, 21, 22);
INSERT INTO relationships (id, namespace_id, from_entity, relation_type, to_entity, source_fact_id)
VALUES (31, 1, 'bob', 'knows', 'vault', 21);
INSERT INTO goals (id, namespace_id, content) VALUES (61, 2, 'secret plan');
INSERT INTO goals (id, namespace_id, parent_id, content) VALUES (62, 1, 61, 'tenant goal');
INSERT INTO hypotheses (id, namespace_id, content, status, confirmed_fact_id, source_fact_ids)
VALUES (91, 1, 'Bob knows the vault', 'confirmed', 21, '{21}');
INSERT INTO patterns (id, namespace_id, content, source_fact_ids) VALUES (41, 1, 'a pattern', '{21, 22}');
"""


def test_go_rows_cannot_reference_another_namespace(store, pg_admin_dsn):
    with go_database(pg_admin_dsn, SCOPE_ESCAPE) as dsn:
        report = go_import.migrate_from_go(store, dsn)
    rows = report["rows"]
    for table in ("contradictions", "causal_links", "relationships"):
        assert table not in rows, table
    assert rows["goals"] == 2 and rows["hypotheses"] == 1
    assert any("goals row id" in p and "column parent_id" in p for p in report["problems"])
    assert any("column confirmed_fact_id" in p for p in report["problems"])
    vault = _sql(store, "SELECT retired_at, superseded_by FROM facts WHERE content = 'The vault code is 1234'")[0]
    assert vault == {"retired_at": None, "superseded_by": None}  # the tenant's contradiction did not retire it
    assert_confined(store)
    # migrated facts are linked to their entities, like new ones
    assert _sql(store, "SELECT count(*) FROM facts WHERE entity_id IS NULL")[0]["count"] == 0


def test_go_ledger_is_keyed_on_the_database_not_the_dsn_spelling(store, pg_admin_dsn):
    rows = "INSERT INTO namespaces (id, slug) VALUES (1, '/team');\n" \
           "INSERT INTO episodes (id, namespace_id, content) VALUES (11, 1, 'hello');"
    with go_database(pg_admin_dsn, rows) as dsn:
        first = go_import.migrate_from_go(store, dsn)
        assert first["rows"]["episodes"] == 1
        parts = conninfo_to_dict(dsn)
        other = make_conninfo(**{**parts, "host": "localhost" if parts["host"] != "localhost" else "127.0.0.1"})
        assert go_import.migrate_from_go(store, other)["imported"] == 0
    with go_database(pg_admin_dsn, rows) as second:  # another Go database, same address and shape
        assert go_import.migrate_from_go(store, second)["rows"]["episodes"] == 1


BAD_ROWS = f"""
INSERT INTO namespaces (id, slug) VALUES (1, '/team'), (2, '/{"/".join(["a" * 60] * 9)}');
INSERT INTO namespaces (id, slug, description) VALUES (3, '/verbose', repeat('d', 30000));
INSERT INTO episodes (id, namespace_id, content, occurred_at) VALUES
  (11, 1, 'fine', '2025-01-01T00:00:00Z'), (12, 1, 'forever', 'infinity'),
  (13, 1, repeat('x', 30000), '2025-01-01T00:00:00Z'), (14, 3, 'in the verbose namespace', '2025-01-01T00:00:00Z');
INSERT INTO facts (id, namespace_id, content, embedding, embedding_model) VALUES
  (21, 1, 'a fact with another model vector', '[{",".join(["0.5"] * 384)}]', 'other-model');
"""


def test_go_bad_rows_are_skipped_with_a_report_or_stop_the_run(store, pg_admin_dsn):
    with go_database(pg_admin_dsn, BAD_ROWS) as dsn:
        # namespaces come first: the over-long path stops the run, as it stops an export's import
        with pytest.raises(errors.BadRow, match=r"^namespaces row Go id 2 column slug: "):
            go_import.migrate_from_go(store, dsn, stop=True)
        assert _sql(store, "SELECT count(*) FROM episodes")[0]["count"] == 0
        report = go_import.migrate_from_go(store, dsn)
    assert report["rows"]["episodes"] == 1
    assert any(p.startswith("episodes row Go id 12 column occurred_at") for p in report["problems"])
    assert any("episodes row Go id 13 column content" in p and "bytes" in p for p in report["problems"])
    assert report["rows"]["facts"] == 1  # another model's vector: computed again
    assert report["skipped"]["namespaces"]
    assert max(len(r["slug"]) for r in _sql(store, "SELECT slug FROM namespaces")) <= 512
    # a Go namespace's description has the export's cap: refused and reported, its rows with it
    assert any(p.startswith("namespaces row Go id 3 column description") and "bytes" in p
               for p in report["problems"])
    assert _sql(store, "SELECT count(*) FROM namespaces WHERE slug = '/verbose'")[0]["count"] == 0
    assert report["skipped"]["episodes"]["its namespace was not imported"] == 1


def test_go_sql_ascii_database_is_read(store, pg_admin_dsn):
    rows = ("INSERT INTO namespaces (id, slug) VALUES (1, '/team');\n"
            "INSERT INTO episodes (id, namespace_id, content) VALUES (11, 1, E'caf\\xe9'), (12, 1, E'caf\\xc3\\xa9');")
    with go_database(pg_admin_dsn, rows, encoding="SQL_ASCII") as dsn:
        report = go_import.migrate_from_go(store, dsn)
    assert report["rows"]["episodes"] == 1
    assert any(p.startswith("episodes row Go id 11 column content: is not valid UTF-8") for p in report["problems"])
    assert _sql(store, "SELECT content FROM episodes ORDER BY id")[-1]["content"] == "café"


def test_go_rerun_links_new_rows_to_rows_of_an_earlier_run(store, pg_admin_dsn):
    """Rows added to the Go database after a first run reference rows that run imported; the
    writer finds their namespaces in Stash and applies the same rules."""
    rows = ("INSERT INTO namespaces (id, slug) VALUES (1, '/gx'), (2, '/gy-secret');\n"
            "INSERT INTO episodes (id, namespace_id, content) VALUES (11, 1, 'tenant'), (12, 2, 'secret');\n"
            "INSERT INTO facts (id, namespace_id, content) VALUES (21, 1, 'A tenant fact'), (22, 2, 'A secret'), "
            "(23, 1, 'Another tenant fact');")
    with go_database(pg_admin_dsn, rows) as dsn:
        go_import.migrate_from_go(store, dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO fact_sources (fact_id, episode_id) VALUES (21, 11), (21, 12)")
            conn.execute("INSERT INTO goals (id, namespace_id, content, notes) VALUES (61, 1, 'g', 'a note')")
            conn.execute("INSERT INTO causal_links (id, namespace_id, cause_fact_id, effect_fact_id) "
                         "VALUES (81, 1, 21, 23), (82, 1, 22, 21)")
        again = go_import.migrate_from_go(store, dsn)
    # lineage: fact 21 <- episode 11 (not <- the secret episode 12) and causal link 81 <- facts 21, 23
    assert again["rows"]["lineage"] == 3 and again["rows"]["causal_links"] == 1
    assert any(p.startswith("lineage row Go id 21:12 column parent_id: points into another namespace")
               for p in again["problems"])
    assert again["rows"]["goal_notes"] == 1
    assert_confined(store)
