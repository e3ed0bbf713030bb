"""`stash migrate-from-go`: a Go Stash-shaped database (a second database on the test server)
with awkward rows, migrated dry, for real, and again (which imports nothing)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from stash_pipeline.interchange import go_import
from tests.conftest import _with_db
from tests.integration.test_cli import Run, as_json, cli_env, run  # noqa: F401  (fixtures)
from tests.integration.test_interchange import _sql
from tests.integration.test_interchange_hostile import go_database

SCHEMA = Path(__file__).resolve().parents[1] / "support" / "go_stash_schema.sql"
V25 = "[" + ",".join(["0.25"] * 384) + "]"
V50 = "[" + ",".join(["0.5"] * 384) + "]"

ROWS = f"""
INSERT INTO settings (key, value) VALUES ('vector_dimension', '384'), ('embedding_model', 'hash-384');
INSERT INTO namespaces (id, slug, name, persona) VALUES
  (1, '/team', 'Team', 'terse and exact'), (2, '/team/alpha/', 'Alpha', ''),
  (3, 'Weird Space!', 'Weird', ''), (4, '///', 'Broken', '');
INSERT INTO episodes (id, namespace_id, content, embedding, embedding_model, occurred_at, deleted_at) VALUES
  (11, 1, 'Alice owns billing', '{V25}', 'hash-384', '2025-01-01T10:00:00Z', NULL),
  (12, 1, 'Billing moved to Bob', NULL, NULL, '2025-01-02T10:00:00Z', NULL),
  (13, 2, 'Alpha ships on Fridays', '{V50}', 'text-embedding-3-small', '2025-01-03T10:00:00Z', NULL),
  (14, 1, 'a mistaken note', NULL, NULL, '2025-01-04T10:00:00Z', '2025-01-05T10:00:00Z'),
  (15, 4, 'lost in a broken namespace', NULL, NULL, '2025-01-04T10:00:00Z', NULL),
  (16, 3, 'weird but kept', NULL, NULL, '2025-01-06T10:00:00Z', NULL);
INSERT INTO facts (id, namespace_id, content, embedding, embedding_model, confidence, valid_from, valid_until,
                   entity, property, value, deleted_at, metadata) VALUES
  (21, 1, 'Billing owner is Alice', '{V25}', 'hash-384', 0.6, '2025-01-01T11:00:00Z', '2025-01-02T11:00:00Z',
   'billing', 'owner', 'alice', NULL, '{{"source_episode_ids": [11, 999], "uuids": []}}'),
  (22, 1, 'Billing owner is Bob', NULL, NULL, 0.7, NULL, NULL, 'billing', 'owner', 'bob', NULL, NULL),
  (23, 1, 'A deleted fact', NULL, NULL, 0.5, NULL, NULL, NULL, NULL, NULL, '2025-02-01T00:00:00Z', NULL),
  (24, 2, 'Alpha releases weekly', NULL, NULL, 0.9, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO fact_sources (fact_id, episode_id) VALUES (21, 11), (22, 12), (24, 13), (23, 14);
INSERT INTO relationships (id, namespace_id, from_entity, relation_type, to_entity, source_fact_id, deleted_at)
VALUES (31, 1, 'Bob', 'Owns', 'billing', 22, NULL), (32, 1, 'x', 'knows', 'y', NULL, NULL),
       (33, 1, 'Alice', 'owned', 'billing', 21, '2025-01-03T00:00:00Z');
INSERT INTO patterns (id, namespace_id, content, source_fact_ids, source_rel_ids, coherence_score) VALUES
  (41, 1, 'Owners of billing change', '{{21, 22, 12345}}', '{{31}}', 0.8);
INSERT INTO contradictions (id, namespace_id, old_fact_id, new_fact_id, entity, property, old_value, new_value,
                            confidence, method, resolved, resolution, resolved_at) VALUES
  (51, 1, 21, 22, 'billing', 'owner', 'alice', 'bob', 0.95, 'auto', true, 'superseded', '2025-01-02T11:00:00Z'),
  (52, 1, 22, 23, 'billing', 'owner', 'bob', '?', 0.6, 'structured', true, 'resolved', '2025-02-02T00:00:00Z');
INSERT INTO goals (id, namespace_id, parent_id, content, status, notes, deleted_at) VALUES
  (61, 1, NULL, 'Retire the old billing', 'active', '', '2025-03-01T00:00:00Z'),
  (62, 1, 61, 'Hand billing to Bob', 'active',
   E'[PROGRESS] Bob has the keys (confidence: 0.80)\\nask Alice for the runbook\\n[SUGGESTED COMPLETE] handed over',
   NULL);
INSERT INTO failures (id, namespace_id, goal_id, content, reason, lesson) VALUES
  (71, 1, 62, 'Billing broke during handover', '', '');
INSERT INTO causal_links (id, namespace_id, cause_fact_id, effect_fact_id, effect_failure_id) VALUES
  (81, 1, 21, 22, NULL), (82, 1, 22, NULL, 71);
INSERT INTO hypotheses (id, namespace_id, content, status, verification_plan, confirmed_fact_id,
                        source_fact_ids) VALUES
  (91, 1, 'Bob keeps billing', 'testing', 'ask Bob', NULL, '{{22}}'),
  (92, 1, 'Alice left billing', 'confirmed', '', 22, '{{21}}'),
  (93, 1, 'Gone', 'rejected', 'check', NULL, '{{}}');
INSERT INTO contexts (namespace_id, focus, expires_at) VALUES (1, 'billing handover', '2030-01-01T00:00:00Z');
INSERT INTO embedding_cache (text_hash, model, text, embedding) VALUES
  ('abc', 'hash-384', 'cached text', '{V25}'), ('def', 'other-model', 'other', '{V50}');
INSERT INTO consolidation_progress (namespace_id, last_episode_id, last_fact_id, last_failure_id)
VALUES (1, 12, 22, 71);
"""


@pytest.fixture
def go_dsn(pg_admin_dsn):
    name = f"go_stash_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = _with_db(pg_admin_dsn, name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA.read_text())
        conn.execute(ROWS)
    yield dsn
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def one(store, statement, *params):
    return _sql(store, statement, *params)[0]


def test_dry_run_then_real_run_then_nothing(store, go_dsn):
    dry = go_import.migrate_from_go(store, go_dsn, dry_run=True)
    assert dry["dry_run"] and dry["imported"] > 0
    assert one(store, "SELECT count(*) FROM episodes")["count"] == 0
    assert one(store, "SELECT count(*) FROM imported_rows")["count"] == 0

    real = go_import.migrate_from_go(store, go_dsn)
    rows, skipped = real["rows"], real["skipped"]
    assert {k: rows[k] for k in ("episodes", "facts", "goals", "failures")} == {
        "episodes": 5, "facts": 4, "goals": 2, "failures": 1}
    assert real["imported"] == dry["imported"]  # the dry run said exactly what happened
    assert skipped["namespaces"] == {"slug '///' has no usable Stash path": 1}
    assert skipped["namespaces (renamed)"] == {"'/team/alpha/' -> /team/alpha": 1, "'Weird Space!' -> /weird-space": 1}
    assert skipped["episodes"] == {"its namespace was not imported": 1}
    assert skipped["relationships"] == {"no source fact (a Stash relationship comes from one fact)": 1}
    # the source ids that do not exist (episode 999, fact 12345) are lineage that points outside the import
    assert real["problems"] == ["lineage row Go facts id 21 column parent_id: points outside the import",
                                "lineage row Go patterns id 41 column parent_id: points outside the import"]
    assert rows["embedding_cache"] == 1
    assert real["vectors"] == {"reused": 2, "recomputed": 7}

    # soft-deleted rows are kept as retired, with why
    episode = one(store, "SELECT deleted_at, deleted_reason FROM episodes WHERE content = 'a mistaken note'")
    assert episode["deleted_at"] is not None and episode["deleted_reason"] == "deleted in Go Stash"
    fact = one(store, "SELECT withdrawn_at, withdrawn_reason FROM facts WHERE content = 'A deleted fact'")
    assert fact["withdrawn_at"] is not None and fact["withdrawn_reason"] == "deleted in Go Stash"
    # vectors reused when model and dimension match, else recomputed
    assert one(store, "SELECT embedding = %s::vector AS same FROM episodes WHERE content = 'Alice owns billing'",
               V25)["same"]
    assert not one(store, "SELECT embedding = %s::vector AS same FROM episodes "
                   "WHERE content = 'Alpha ships on Fridays'", V50)["same"]
    # validity, supersession and the contradiction resolutions
    alice = one(store, "SELECT f.valid_until, b.content AS by FROM facts f JOIN facts b ON b.id = f.superseded_by "
                "WHERE f.content = 'Billing owner is Alice'")
    assert alice["by"] == "Billing owner is Bob" and alice["valid_until"] is not None
    resolutions = _sql(store, "SELECT classification, resolution, resolution_note FROM contradictions ORDER BY id")
    assert [tuple(r.values()) for r in resolutions] == [
        ("replacement", "superseded", None), ("contradiction", None, "resolved")]
    # fact_sources and metadata source ids become lineage
    assert one(store, "SELECT count(*) FROM lineage WHERE child_kind = 'fact' AND parent_kind = 'episode'")[
        "count"] == 4
    assert one(store, "SELECT count(*) FROM lineage WHERE child_kind = 'pattern'")["count"] == 3
    # goal notes become the append-only log; the soft-deleted parent stays the parent
    notes = _sql(store, "SELECT author, kind, content, confidence FROM goal_notes ORDER BY id")
    assert [(n["author"], n["kind"], n["content"]) for n in notes] == [
        ("model", "progress", "Bob has the keys"), ("caller", "note", "ask Alice for the runbook"),
        ("model", "suggested_complete", "handed over")]
    assert abs(notes[0]["confidence"] - 0.8) < 1e-6
    child = one(store, "SELECT p.deleted_at FROM goals g JOIN goals p ON p.id = g.parent_id "
                "WHERE g.content = 'Hand billing to Bob'")
    assert child["deleted_at"] is not None
    failure = one(store, "SELECT reason, goal_id IS NOT NULL AS has_goal FROM failures")
    assert failure == {"reason": "(not recorded in Go Stash)", "has_goal": True}
    statuses = _sql(store, "SELECT status, confirmed_fact_id IS NOT NULL AS confirmed FROM hypotheses ORDER BY id")
    assert [(s["status"], s["confirmed"]) for s in statuses] == [
        ("testing", False), ("confirmed", True), ("rejected", False)]
    assert one(store, "SELECT count(*) FROM causal_links WHERE effect_failure_id IS NOT NULL")["count"] == 1
    assert one(store, "SELECT description FROM namespaces WHERE slug = '/team'")["description"].endswith(
        "Persona: terse and exact")
    # Go's cursors become stage checkpoints at the Stash ids of the rows they had consumed
    cursors = {r["stage"]: (r["cursor"], r["aux_cursor"]) for r in _sql(
        store, "SELECT c.stage, c.cursor, c.aux_cursor FROM stage_checkpoints c "
        "JOIN namespaces n ON n.id = c.namespace_id WHERE n.slug = '/team'")}
    moved = one(store, "SELECT id FROM episodes WHERE content = 'Billing moved to Bob'")["id"]
    bob = one(store, "SELECT id FROM facts WHERE content = 'Billing owner is Bob'")["id"]
    failure_id = one(store, "SELECT id FROM failures")["id"]
    assert cursors["facts"] == (moved, 0) and cursors["relationships"] == (bob, 0)
    assert cursors["failure_patterns"] == (0, failure_id)

    again = go_import.migrate_from_go(store, go_dsn)
    assert again["imported"] == 0
    assert again["skipped"]["episodes"] == {"already imported by an earlier run": 6}
    assert again["skipped"]["facts"] == {"already imported by an earlier run": 4}
    assert one(store, "SELECT count(*) FROM episodes")["count"] == 5


def test_cli_reports_json_and_refuses_a_non_go_database(run: Run, go_dsn, database_url) -> None:  # noqa: F811
    dry = run("migrate-from-go", "--from", go_dsn, "--dry-run")
    assert "dry run: nothing was written" in dry.output and "episodes" in dry.output
    summary = as_json(run("migrate-from-go", "--from", go_dsn, "--json"))
    assert summary["imported"] > 0 and summary["rows"]["facts"] == 4
    assert as_json(run("migrate-from-go", "--from", go_dsn, "--json"))["imported"] == 0
    refused = run("migrate-from-go", "--from", database_url, expect=2)
    assert "not a Go Stash database" in refused.output
    assert "password" not in json.dumps(summary)


LEDGER_ROWS = ("INSERT INTO namespaces (id, slug) VALUES (1, '/team');\n"
               "INSERT INTO episodes (id, namespace_id, content) VALUES (11, 1, '{episode}');\n"
               "INSERT INTO facts (id, namespace_id, content) VALUES (21, 1, 'A fact about the team');")


def _legacy_key(dsn: str) -> str:
    """The ledger key the version before wrote: the DSN's host, port and database name."""
    parts = conninfo_to_dict(dsn)
    return f"go-stash:{parts.get('host', 'localhost')}:{parts.get('port', 5432)}/{parts.get('dbname', '')}"


def test_a_ledger_keyed_on_the_dsn_is_recognised_after_an_upgrade(store, pg_admin_dsn):
    with go_database(pg_admin_dsn, LEDGER_ROWS.format(episode="hello")) as dsn:
        first = go_import.migrate_from_go(store, dsn)
        assert first["imported"] == 3
        legacy = _legacy_key(dsn)
        _sql(store, "UPDATE imported_rows SET source = %s", legacy)  # as an earlier version recorded it
        again = go_import.migrate_from_go(store, dsn)
        assert again["imported"] == 0, again["rows"]
        assert again["ledger_adopted_from"] == legacy
        assert [r["source"] for r in _sql(store, "SELECT DISTINCT source FROM imported_rows")] == [first["source"]]
        name = conninfo_to_dict(dsn)["dbname"]
    # another Go database that took the same name at the same address: its rows read otherwise
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(SCHEMA.read_text())
            conn.execute(LEDGER_ROWS.format(episode="goodbye"))
        _sql(store, "UPDATE imported_rows SET source = %s", legacy)
        other = go_import.migrate_from_go(store, dsn)
        assert other["ledger_adopted_from"] is None and other["rows"]["episodes"] == 1
        assert _sql(store, "SELECT count(*) FROM imported_rows WHERE source = %s", legacy)[0]["count"] == 3
    finally:
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_go_namespace_added_later_on_a_path_an_earlier_run_took_is_refused(store, go_dsn):
    """A later run checks a new Go namespace's path against the paths earlier runs created,
    as one run checks its namespaces against each other: '/Team/' (added after the first
    run) maps to /team, which Go namespace 1 already holds, so it and its rows are refused,
    not quietly merged into /team."""
    go_import.migrate_from_go(store, go_dsn)
    with psycopg.connect(go_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO namespaces (id, slug, name) VALUES (5, '/Team/', 'Team again')")
        conn.execute("INSERT INTO episodes (id, namespace_id, content, occurred_at) "
                     "VALUES (17, 5, 'a note for the other team', '2025-01-07T10:00:00Z')")

    again = go_import.migrate_from_go(store, go_dsn)
    assert again["skipped"]["namespaces"] == {
        "already imported by an earlier run": 4,  # the broken '///' is recorded too
        "slug '/Team/' maps to /team, already taken by another Go namespace": 1}
    assert again["skipped"]["episodes"] == {"already imported by an earlier run": 6,
                                            "its namespace was not imported": 1}
    assert one(store, "SELECT count(*) FROM episodes WHERE content = 'a note for the other team'")["count"] == 0
