"""The `stash` CLI against a real PostgreSQL: the issue's acceptance flow, the error
paths, and one happy path per command group (click's CliRunner, hash embedder)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner, Result

from stash_pipeline.stages import STAGES
from stash_serve.cli import cli
from stash_serve.cli.base import head_revision

Run = Callable[..., Result]


@pytest.fixture
def cli_env(database_url: str, tmp_path: Path) -> dict[str, str]:
    return {
        "STASH_DATABASE_URL": database_url,
        "STASH_EMBEDDER": "hash",
        "STASH_HOME": str(tmp_path / "home"),
    }


@pytest.fixture
def run(cli_env: dict[str, str]) -> Run:
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None, expect: int = 0, **env: str) -> Result:
        result = runner.invoke(cli, list(args), input=input, env={**cli_env, **env}, catch_exceptions=False)
        assert result.exit_code == expect, f"stash {' '.join(args)} → {result.exit_code}\n{result.output}"
        return result

    return invoke


def as_json(result: Result) -> object:
    return json.loads(result.stdout)


def contains_key(value: object, key: str) -> bool:
    if isinstance(value, dict):
        return key in value or any(contains_key(v, key) for v in value.values())
    if isinstance(value, list):
        return any(contains_key(v, key) for v in value)
    return False


# --- the acceptance flow -------------------------------------------------------------


def test_acceptance_flow(run: Run) -> None:
    assert run("migrate").output == f"schema already at revision {head_revision()}\n"
    assert run("namespace", "create", "/projects/x").output.startswith("created /projects/x")
    run("remember", "The office plants need water on Mondays", "-n", "/projects/x")
    remembered = run("remember", "The deploy uses blue-green on Fridays", "-n", "/projects/x", "--json")
    episode_id = as_json(remembered)["id"]

    hits = as_json(run("recall", "how do we deploy", "-n", "/projects/x", "--include-score-parts", "--json"))
    assert isinstance(hits, list) and len(hits) == 2
    first = hits[0]
    assert first["kind"] == "episode"
    assert first["id"] == episode_id
    assert first["content"] == "The deploy uses blue-green on Fridays"
    assert first["namespace"] == "/projects/x"
    assert set(first["score_parts"]) >= {"vector", "text"}
    assert first["score_parts"]["vector"] > 0
    assert first["score"] >= hits[1]["score"]
    assert not contains_key(hits, "embedding")
    # the tool's answer: no score parts unless asked, nothing null
    lean = as_json(run("recall", "how do we deploy", "-n", "/projects/x", "--json"))
    assert [h["id"] for h in lean] == [h["id"] for h in hits]
    assert not contains_key(lean, "score_parts") and None not in lean[0].values()

    table = run("recall", "how do we deploy", "-n", "/projects/x").output
    assert table.splitlines()[0].split()[:4] == ["KIND", "ID", "NAMESPACE", "SCORE"]
    assert "blue-green" in table.splitlines()[1]


def test_unmigrated_database_says_run_migrate(pg_admin_dsn: str, tmp_path: Path) -> None:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    name = f"stash_cli_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = make_conninfo(**{**conninfo_to_dict(pg_admin_dsn), "dbname": name})
    env = {"STASH_DATABASE_URL": dsn, "STASH_EMBEDDER": "hash", "STASH_HOME": str(tmp_path / "h")}
    runner = CliRunner()
    try:
        before = runner.invoke(cli, ["namespace", "list"], env=env)
        assert before.exit_code == 1
        assert before.output == "error: the database has no schema yet; run `stash migrate` first\n"
        migrated = runner.invoke(cli, ["migrate"], env=env)
        assert migrated.exit_code == 0, migrated.output
        assert migrated.output == f"schema migrated: (empty) → {head_revision()}\n"
        after = runner.invoke(cli, ["namespace", "list", "--json"], env=env)
        assert after.exit_code == 0, after.output
        assert [n["slug"] for n in json.loads(after.output)] == ["/"]
    finally:
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- error paths -------------------------------------------------------------------------


def test_bad_slug_is_exit_2_with_the_rule(run: Run) -> None:
    result = run("namespace", "create", "/Projects/X", expect=2)
    assert result.output.startswith("error: namespace segment 'Projects' in '/Projects/X' is invalid")
    assert "Traceback" not in result.output
    assert "/Projects" not in run("namespace", "list").output


def test_unknown_namespace_is_exit_2(run: Run) -> None:
    result = run("remember", "something", "-n", "/nope", expect=2)
    assert result.output.startswith("error: namespace '/nope' not found")
    # the remedy is named as this surface's command, never as the MCP tool
    assert result.output == "error: namespace '/nope' not found; create it first (stash namespace create /nope)\n"
    assert run("recall", "x", "-n", "/nope", expect=2).output.startswith("error: namespace '/nope' not found")


def test_oversized_and_empty_content_change_nothing(run: Run) -> None:
    run("namespace", "create", "/p")
    result = run("remember", "x" * 101, "-n", "/p", expect=2, STASH_MAX_CONTENT_BYTES="100")
    assert result.output == "error: content is 101 bytes; the limit is 100 (STASH_MAX_CONTENT_BYTES)\n"
    assert run("remember", "   ", "-n", "/p", expect=2).output == "error: content must not be empty\n"
    assert as_json(run("stats", "-n", "/p", "--json"))["episodes"] == 0


def test_unknown_record_and_bad_json_option(run: Run) -> None:
    assert run("episode", "show", "999", expect=2).output == "error: episode 999 not found\n"
    run("namespace", "create", "/p")
    bad = run("remember", "x", "-n", "/p", "--metadata", "[1, 2]", expect=2)
    assert bad.output.startswith("error: --metadata must be a JSON object")


def test_declined_confirmation_changes_nothing(run: Run) -> None:
    run("namespace", "create", "/p/q")
    result = run("namespace", "delete", "/p", input="n\n", expect=1)
    assert "this deletes /p, /p/q" in result.output
    assert "cancelled; nothing was changed" in result.output
    assert "/p/q" in run("namespace", "list").output


# --- one happy path per group -------------------------------------------------------------


def test_namespaces_and_init(run: Run) -> None:
    run("namespace", "create", "/projects/x", "--name", "Project X", "--description", "deploys")
    shown = as_json(run("namespace", "show", "/projects/x", "--json"))
    assert shown["namespace"]["name"] == "Project X"
    assert shown["counts"]["episodes"] == 0
    slugs = [n["slug"] for n in as_json(run("namespace", "list", "-n", "/projects", "--json"))]
    assert slugs == ["/projects", "/projects/x"]
    assert "created /self" in run("init").output
    assert "already present" in run("init").output
    run("remember", "kept", "-n", "/projects/x")
    deleted = run("namespace", "delete", "/projects", "--yes", "--json")
    assert as_json(deleted)["counts"]["episodes"] == 1
    assert [n["slug"] for n in as_json(run("namespace", "list", "--json"))] == [
        "/", "/self", "/self/capabilities", "/self/limits", "/self/preferences"
    ]


def test_episodes_stdin_show_forget_purge(run: Run) -> None:
    run("namespace", "create", "/p")
    first = as_json(run(
        "remember", "-", "-n", "/p", "--kind", "decision", "--metadata", '{"source": "chat"}',
        "--occurred-at", "2026-01-02T03:04:05Z", "--idempotency-key", "k1", "--json",
        input="We chose Postgres over MySQL\n",
    ))
    assert first["created"] is True
    replay = as_json(run("remember", "We chose Postgres over MySQL\n", "-n", "/p", "--idempotency-key", "k1", "--json"))
    assert replay == {**first, "created": False}
    episode = as_json(run("episode", "show", str(first["id"]), "--json"))
    assert episode["kind"] == "decision"
    assert episode["metadata"] == {"source": "chat"}
    assert episode["occurred_at"].startswith("2026-01-02T03:04:05")

    preview = run("forget", "We chose Postgres over MySQL", "-n", "/p", "--preview").output
    assert preview.startswith(f"would forget episode {first['id']} in /p")
    run("episode", "show", str(first["id"]))  # still there
    forgot = run("forget", "We chose Postgres over MySQL", "-n", "/p", "--yes").output
    assert forgot.startswith(f"forgot episode {first['id']}")
    run("episode", "show", str(first["id"]), expect=2)
    assert run("purge", "episode", str(first["id"]), "--yes").output == f"purged episode {first['id']} from /p\n"
    run("episode", "show", str(first["id"]), "--include-deleted", expect=2)


def test_forget_asks_and_respects_threshold(run: Run) -> None:
    run("namespace", "create", "/p")
    run("remember", "The cat sleeps on the red sofa", "-n", "/p")
    nothing = run("forget", "quarterly tax filing deadlines", "-n", "/p", "--threshold", "0.99").output
    assert nothing.startswith("nothing similar enough to forget")
    asked = run("forget", "The cat sleeps on the red sofa", "-n", "/p", input="y\n")
    assert "forget it?" in asked.output
    assert "forgot episode" in asked.output


def test_import_jsonl_and_csv(run: Run, tmp_path: Path) -> None:
    run("namespace", "create", "/p")
    jsonl = tmp_path / "episodes.jsonl"
    jsonl.write_text(
        "\n".join(json.dumps(r) for r in [
            {"content": "alpha", "kind": "note", "metadata": {"n": 1}, "idempotency_key": "a"},
            {"content": "beta", "occurred_at": "2026-03-01T00:00:00Z"},
        ]) + "\n",
        encoding="utf-8",
    )
    result = run("import", str(jsonl), "-n", "/p")
    assert "imported 2 rows into /p: 2 new, 0 already present" in result.stdout
    assert "imported 2/2" in result.stderr
    again = as_json(run("import", str(jsonl), "-n", "/p", "--json"))
    assert again["created"] == 1 and again["replayed"] == 1  # the keyed row is not duplicated

    csv = tmp_path / "episodes.csv"
    csv.write_text('content,kind,metadata\ngamma,note,"{""x"": 2}"\n', encoding="utf-8")
    assert as_json(run("import", str(csv), "-n", "/p", "--json"))["created"] == 1
    assert as_json(run("stats", "-n", "/p", "--json"))["episodes"] == 4

    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"content": "ok"}\n{"content": "x", "colour": "red"}\n', encoding="utf-8")
    failed = run("import", str(broken), "-n", "/p", expect=2)
    assert "unknown episode field(s): colour" in failed.output
    assert as_json(run("stats", "-n", "/p", "--json"))["episodes"] == 4  # the batch was all-or-nothing


def test_context(run: Run) -> None:
    run("namespace", "create", "/p")
    assert run("context", "get", "-n", "/p").output == "no current focus in /p\n"
    assert run("context", "set", "release freeze", "-n", "/p", "--ttl", "2h").output.startswith("focus of /p set until")
    assert as_json(run("context", "get", "-n", "/p", "--json"))["focus"] == "release freeze"
    run("context", "set", "x", "-n", "/p", "--ttl", "soon", expect=2)
    assert run("context", "clear", "-n", "/p").output == "focus of /p cleared\n"
    assert as_json(run("context", "get", "-n", "/p", "--json")) is None


def test_facts_and_contradictions(run: Run) -> None:
    run("namespace", "create", "/p")
    episode = as_json(run("remember", "Deploys happen on Fridays", "-n", "/p", "--json"))["id"]
    old = as_json(run(
        "fact", "assert", "Deploys happen on Fridays", "-n", "/p", "--entity", "deploy", "--property", "day",
        "--value", "friday", "--source-episode-ids", str(episode), "--json",
    ))
    new = as_json(run(
        "fact", "assert", "Deploys happen on Tuesdays", "-n", "/p", "--entity", "deploy", "--property", "day",
        "--value", "tuesday", "--json",
    ))
    old_id, new_id = old["fact"]["id"], new["fact"]["id"]
    assert [c["old_fact_id"] for c in new["contradictions"]] == [old_id]
    listed = as_json(run("facts", "-n", "/p", "--entity", "deploy", "--json"))
    assert sorted(f["id"] for f in listed) == sorted([old_id, new_id])
    assert not contains_key(listed, "embedding")
    lineage = as_json(run("fact", "show", str(old_id), "--lineage", "--json"))
    assert lineage["fact"]["source_episode_ids"] == [episode]

    contradiction = as_json(run("contradictions", "list", "-n", "/p", "--json"))
    assert len(contradiction) == 1
    resolved = run("contradictions", "resolve", str(contradiction[0]["id"]), "--action", "keep_new").output
    assert resolved.startswith(f"resolved contradiction {contradiction[0]['id']} (keep_new)")
    current = [f["id"] for f in as_json(run("facts", "-n", "/p", "--json"))]
    assert current == [new_id]
    history = [f["id"] for f in as_json(run("facts", "-n", "/p", "--include-history", "--json"))]
    assert sorted(history) == sorted([old_id, new_id])
    run("contradictions", "resolve", "1", "--action", "maybe", expect=2)

    assert run("fact", "withdraw", str(new_id), "--reason", "moved to canary").output.startswith(f"withdrew fact {new_id}")
    # a withdrawn fact gives its time back: the value it had replaced holds again
    assert [f["id"] for f in as_json(run("facts", "-n", "/p", "--json"))] == [old_id]
    assert run("fact", "purge", str(new_id), "--yes").output == f"purged fact {new_id} from /p\n"
    run("fact", "show", str(new_id), expect=2)
    assert run("purge", "fact", str(old_id), "--yes").output == f"purged fact {old_id} from /p\n"


def test_relationships_and_patterns_read(run: Run) -> None:
    assert run("relationships", "--json").output.strip() == "[]"
    assert run("patterns").output == "(none)\n"


def test_causal_links_and_mermaid(run: Run) -> None:
    run("namespace", "create", "/p")
    a = as_json(run("fact", "assert", "The cache was cold", "-n", "/p", "--json"))["fact"]["id"]
    b = as_json(run("fact", "assert", "Latency spiked at 9am", "-n", "/p", "--json"))["fact"]["id"]
    failure = as_json(run(
        "failure", "create", "Checkout timed out", "-n", "/p", "--reason", "slow db", "--lesson", "pre-warm", "--json"
    ))["id"]
    link = as_json(run("causal", "create", "-n", "/p", "--cause-id", str(a), "--effect-id", str(b), "--json"))
    run("causal", "create", "-n", "/p", "--cause-id", str(b), "--effect-failure-id", str(failure), "--confidence", "0.6")
    assert len(as_json(run("causal", "list", "-n", "/p", "--json"))) == 2
    steps = as_json(run("causal", "trace", str(a), "--json"))
    assert [(s["depth"], s["cause_fact_id"]) for s in steps] == [(1, a), (2, b)]
    diagram = run("causal", "trace", str(a), "--mermaid").output.splitlines()
    assert diagram[0] == "graph TD"
    assert f'  F{a}["fact {a}: The cache was cold"]' in diagram
    assert f"  F{a} -->|0.80| F{b}" in diagram
    assert f'  X{failure}{{{{"failure {failure}: Checkout timed out"}}}}' in diagram
    assert f"  F{b} -->|0.60| X{failure}" in diagram
    back = as_json(run("causal", "trace", str(b), "--direction", "backward", "--json"))
    assert [s["cause_fact_id"] for s in back] == [a]
    assert run("causal", "delete", str(link["id"])).output == f"deleted causal link {link['id']}\n"
    assert len(as_json(run("causal", "list", "-n", "/p", "--json"))) == 1
    run("causal", "trace", str(a), "--depth", "99", expect=2)


def test_hypothesis_lifecycle(run: Run) -> None:
    run("namespace", "create", "/p")
    created = as_json(run(
        "hypothesis", "create", "Caching halves latency", "-n", "/p", "--verification-plan", "A/B test", "--json"
    ))
    hid = str(created["id"])
    assert created["status"] == "proposed"
    refused = run("hypothesis", "confirm", hid, expect=2).output  # proposed → confirmed is not allowed
    assert refused.endswith(f"Test it first: mark it as testing (stash hypothesis test {hid})\n")
    assert "test_hypothesis" not in refused
    assert run("hypothesis", "test", hid).output.startswith(f"testing hypothesis {hid} (testing")
    refined = as_json(run("hypothesis", "refine", hid, "--content", "Caching cuts latency by a third", "--json"))
    assert refined["status"] == "proposed" and refined["content"] == "Caching cuts latency by a third"
    run("hypothesis", "test", hid)
    confirmed = run("hypothesis", "confirm", hid, "--rationale", "two weeks of data").output
    assert confirmed.startswith(f"confirmed hypothesis {hid}")
    assert [h["id"] for h in as_json(run("hypothesis", "list", "-n", "/p", "--status", "confirmed", "--json"))] == [
        int(hid)
    ]
    other = as_json(run("hypothesis", "create", "x", "-n", "/p", "--verification-plan", "y", "--json"))["id"]
    assert as_json(run("hypothesis", "reject", str(other), "--reason", "no", "--json"))["status"] == "rejected"
    assert as_json(run("hypothesis", "show", str(other), "--json"))["rejection_reason"] == "no"
    assert run("hypothesis", "delete", str(other)).output == f"deleted hypothesis {other}\n"
    run("hypothesis", "show", str(other), expect=2)


def test_goal_tree(run: Run) -> None:
    run("namespace", "create", "/p")
    parent = as_json(run("goal", "create", "Ship billing v2", "-n", "/p", "--priority", "2", "--json"))["id"]
    child = as_json(run("goal", "create", "Migrate invoices", "-n", "/p", "--parent-id", str(parent), "--json"))["id"]
    updated = as_json(run("goal", "update", str(parent), "--priority", "0", "--note", "after the freeze", "--json"))
    assert updated["priority"] == 0
    done = run("goal", "complete", str(child), "--note", "merged").output
    assert done == f"completed goal {child}\n  also completed parent goal(s) {parent}\n"
    shown = as_json(run("goal", "show", str(parent), "--json"))
    assert shown["status"] == "completed"
    assert [n["content"] for n in shown["notes"]] == ["after the freeze"]
    other = as_json(run("goal", "create", "Try Rust", "-n", "/p", "--json"))["id"]
    assert as_json(run("goal", "abandon", str(other), "--json"))["goal"]["status"] == "abandoned"
    assert len(as_json(run("goal", "list", "-n", "/p", "--top-level", "--json"))) == 2
    assert run("goal", "delete", str(parent), "--yes").output == f"deleted goal(s) {parent}, {child}\n"


def test_failures(run: Run) -> None:
    run("namespace", "create", "/p")
    fid = as_json(run("failure", "create", "Deploy broke checkout", "-n", "/p", "--reason", "missing migration",
                      "--lesson", "migrate first", "--json"))["id"]
    assert as_json(run("failure", "show", str(fid), "--json"))["lesson"] == "migrate first"
    assert "Deploy broke checkout" in run("failure", "list", "-n", "/p").output
    assert run("failure", "delete", str(fid)).output == f"deleted failure {fid}\n"
    run("failure", "show", str(fid), expect=2)


def test_stats_and_doctor(run: Run) -> None:
    run("namespace", "create", "/p")
    run("remember", "one", "-n", "/p")
    stats = as_json(run("stats", "--json"))
    assert stats["episodes"] == 1
    doctor = run("doctor").output.splitlines()
    # no model endpoint is optional: neither a pass nor a failure, and the doctor exits 0
    assert [line.split(":")[0] for line in doctor] == [
        "✓ settings", "✓ database", "✓ connections", "✓ migrations", "✓ embedder", "○ model endpoint"
    ]
    assert "hash-384 loads (384 dims), model lock OK" in doctor[4]
    assert doctor[5] == ("○ model endpoint: not configured (optional: the model stages need one; "
                         "set STASH_REASONER_MODEL and STASH_OPENAI_BASE_URL)")
    checks = {c["check"]: c for c in as_json(run("doctor", "--json"))}
    assert checks["model endpoint"]["status"] == "not configured" and checks["model endpoint"]["ok"] is True
    assert {c["status"] for name, c in checks.items() if name != "model endpoint"} == {"ok"}


def test_doctor_reports_what_to_fix(run: Run) -> None:
    result = run("doctor", "--json", expect=1, STASH_OPENAI_BASE_URL="http://127.0.0.1:1/v1")
    checks = {c["check"]: c for c in as_json(result)}
    assert checks["database"]["ok"] is True
    assert checks["model endpoint"]["ok"] is False and checks["model endpoint"]["status"] == "failed"
    # the cause, not the Python exception class it travelled in
    assert checks["model endpoint"]["detail"].startswith("http://127.0.0.1:1/v1 is not reachable")
    line = run("doctor", expect=1, STASH_OPENAI_BASE_URL="http://127.0.0.1:1/v1").output.splitlines()[-1]
    assert line.startswith("✗ model endpoint: http://127.0.0.1:1/v1 is not reachable")


def test_consolidation_without_a_reasoner(run: Run) -> None:
    run("namespace", "create", "/p")
    run("remember", "The deploy uses blue-green", "-n", "/p")
    # all stages: those that need no model run; the model stages are skipped, saying how to turn them on
    ran = run("consolidate", "run", "-n", "/p", "--json")
    assert [r["stage"] for r in as_json(ran)] == ["profiles", "decay"]
    model_stages = [spec.name for spec in STAGES if spec.needs_model]
    assert ran.stderr == (
        f"note: no reasoning model is configured, so the model stages were skipped: {', '.join(model_stages)}; "
        "to run them, set STASH_REASONER_MODEL and STASH_OPENAI_BASE_URL (in the environment of this process, "
        "and of the Dagster daemon and code server when Dagster runs), and consolidate again\n"
    )
    assert "note: no reasoning model is configured" in run("consolidate", "run", "-n", "/p").stderr
    # a model stage asked for by name is refused up front, with the next step, and nothing runs
    refused = run("consolidate", "run", "-n", "/p", "--stage", "facts", expect=1)
    assert refused.stderr.startswith(
        "error: stage facts needs a reasoning model and none is configured: set STASH_REASONER_MODEL"
    )
    assert refused.stderr.endswith("nothing was started. Only profiles and decay run without a model.\n")
    only = as_json(run("consolidate", "run", "-n", "/p", "--stage", "decay", "--json"))
    assert {r["stage"] for r in only} == {"decay"}
    run("consolidate", "run", "-n", "/p", "--stage", "nope", expect=2)
    status = as_json(run("consolidate", "status", "-n", "/p", "--json"))
    facts_row = next(s for s in status if s["stage"] == "facts" and s["namespace"] == "/p")
    assert facts_row["has_work"] is True and facts_row["backlog"] >= 1  # not configured: the cursor stays
    assert facts_row["cursor"] == 0


def test_consolidate_dry_run_changes_nothing_and_calls_no_model(run: Run) -> None:
    run("namespace", "create", "/p")
    for n in range(12):
        run("remember", f"Service {n} is deployed by team {n}", "-n", "/p")
    status_before = as_json(run("consolidate", "status", "-n", "/p", "--json"))
    # a configured model that does not answer: any call would fail the command
    model = {"STASH_REASONER_MODEL": "m", "STASH_OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}
    planned = as_json(run("consolidate", "run", "-n", "/p", "--dry-run", "--json", **model))
    facts = next(r for r in planned if r["stage"] == "facts")
    assert facts["action"] == "run" and facts["items"] == 12
    assert facts["model_calls"] == -(-12 // facts["items_per_call"])
    table = run("consolidate", "run", "-n", "/p", "--dry-run", **model)
    assert "facts" in table.stdout and "MODEL_CALLS" in table.stdout
    assert "nothing was changed" in table.stderr
    assert as_json(run("consolidate", "status", "-n", "/p", "--json")) == status_before
    only = as_json(run("consolidate", "run", "-n", "/p", "--stage", "decay", "--dry-run", "--json"))
    assert [r["stage"] for r in only] == ["decay"]


def test_tokens(run: Run) -> None:
    run("namespace", "create", "/projects/x")
    created = run("token", "create", "--namespace", "/projects/x", "--rights", "read,write", "--name", "ci")
    secret = created.stdout.strip()
    assert secret and "\n" not in secret
    assert "not shown again" in created.stderr
    listed = as_json(run("token", "list", "--json"))
    assert [(t["name"], t["namespaces"], t["rights"]) for t in listed] == [("ci", ["/projects/x"], ["read", "write"])]
    assert secret not in run("token", "list").output
    token_id = listed[0]["id"]
    assert run("token", "revoke", str(token_id)).output == f"revoked token {token_id}\n"
    assert run("token", "revoke", str(token_id), expect=2).output == f"error: no active token with id {token_id}\n"


def test_model_switch_needs_reembed(run: Run) -> None:
    run("namespace", "create", "/p")
    run("remember", "The deploy uses blue-green on Fridays", "-n", "/p")
    switched = run("recall", "deploy", "-n", "/p", expect=1, STASH_VECTOR_DIM="256")
    assert switched.output.startswith("error: the stored vectors were made by 'hash-384' (384 dims)")
    assert "stash reembed" in switched.output
    declined = run("reembed", input="n\n", expect=1, STASH_VECTOR_DIM="256")
    assert "cancelled; nothing was changed" in declined.output
    done = run("reembed", "--yes", "--json", "--batch-size", "10", STASH_VECTOR_DIM="256")
    report = json.loads(done.stdout)
    assert (report["model"], report["dim"], report["previous_dim"], report["episodes"]) == ("hash-256", 256, 384, 1)
    assert "1/1" in done.stderr
    hits = as_json(run("recall", "deploy", "-n", "/p", "--json", STASH_VECTOR_DIM="256"))
    assert [h["content"] for h in hits] == ["The deploy uses blue-green on Fridays"]


def test_embed_pending_clears_what_async_writes_left(run: Run) -> None:
    run("namespace", "create", "/p")
    # a CLI process runs no worker: with async writes its rows wait for one
    run("remember", "The cache warms up after each deploy", "-n", "/p", STASH_EMBED_ON_WRITE="async")
    run("remember", "Backups rotate weekly", "-n", "/p", STASH_EMBED_ON_WRITE="async")
    status = as_json(run("embed-pending", "--status", "--json"))
    assert (status["embedded"], status["still_pending"]) == (0, 2) and status["oldest_age_s"] >= 0
    done = as_json(run("embed-pending", "--json", "--batch-size", "1"))
    assert done == {"embedded": 2, "still_pending": 0, "oldest_age_s": None}
    assert "still_pending: 0" in run("embed-pending").output
    # a recall right after an async write embeds what waits in its scope itself (read-your-writes)
    run("remember", "Invoices go out on the first", "-n", "/p", STASH_EMBED_ON_WRITE="async")
    hits = as_json(run("recall", "when are invoices sent", "-n", "/p", "--json"))
    assert hits[0]["content"] == "Invoices go out on the first"
    assert as_json(run("embed-pending", "--status", "--json"))["still_pending"] == 0


def test_db_commands_with_an_external_database(run: Run) -> None:
    for sub in ("start", "stop", "status", "url"):
        result = run("db", sub)
        assert result.output.startswith("STASH_DATABASE_URL is set"), sub


def test_embedded_db_lifecycle() -> None:
    import shutil
    import tempfile

    from tests.conftest import free_port

    # Not pytest's tmp_path: every pytest session resets /tmp/pytest-of-root to 0700,
    # which would lock the service user out of a data directory below it.
    home = Path(tempfile.mkdtemp(prefix="stash-cli-db-"))
    port = free_port()
    env = {"STASH_HOME": str(home / "home"), "STASH_DB_PORT": str(port), "STASH_EMBEDDER": "hash"}
    runner = CliRunner()

    def go(*args: str) -> Result:
        result = runner.invoke(cli, list(args), env=env, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result

    try:
        # a command that needs the database starts the embedded server on demand, and says so
        first = runner.invoke(cli, ["namespace", "list"], env=env)
        assert first.exit_code == 1
        assert first.output.splitlines() == [
            f"started the embedded PostgreSQL on 127.0.0.1:{port} (it keeps running; `stash db stop` stops it)",
            "error: the database has no schema yet; run `stash migrate` first",
        ]
        assert go("db", "start").output.startswith(f"embedded PostgreSQL running on 127.0.0.1:{port}")
        assert json.loads(go("db", "status", "--json").output)["running"] is True
        url = go("db", "url").output.strip()
        assert url.startswith("postgresql://stash:") and url.endswith(f"@127.0.0.1:{port}/stash")
        go("migrate")
        go("namespace", "create", "/projects/x")
        go("remember", "The deploy uses blue-green on Fridays", "-n", "/projects/x")
        hits = json.loads(go("recall", "how do we deploy", "-n", "/projects/x", "--json").output)
        assert hits[0]["content"] == "The deploy uses blue-green on Fridays"
    finally:
        stopped = runner.invoke(cli, ["db", "stop"], env=env)
    assert stopped.output == "embedded PostgreSQL stopped\n"
    assert json.loads(go("db", "status", "--json").output)["running"] is False
    assert go("db", "stop").output == "embedded PostgreSQL was not running\n"
    shutil.rmtree(home, ignore_errors=True)


def test_serve_mcp_http_answers_health_and_stops_on_ctrl_c(database_url: str, tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time
    import urllib.request

    from tests.conftest import free_port

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STASH_")}
    env.update(STASH_DATABASE_URL=database_url, STASH_EMBEDDER="hash", STASH_HOME=str(tmp_path / "home"),
               STASH_ENV_FILE="/nonexistent/.env")
    stash = Path(sys.executable).with_name("stash")
    process = subprocess.Popen(
        [str(stash), "serve", "mcp", "--transport", "http", "--port", str(port), "--no-auth"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 30
        body = ""
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
                    body = response.read().decode()
                    break
            except OSError:
                if process.poll() is not None:
                    break
                time.sleep(0.2)
        assert body, f"no /healthz answer; stderr: {process.stderr.read() if process.poll() is not None else ''}"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode in (0, 130), process.stderr.read()
    assert "Traceback" not in process.stderr.read()


def test_serve_mcp_refuses_no_auth_on_a_public_host(run: Run) -> None:
    result = run("serve", "mcp", "--transport", "http", "--host", "0.0.0.0", "--no-auth", expect=1)
    assert result.output.startswith("error: --no-auth is only allowed on a loopback host")


def test_doctor_with_a_reachable_model_endpoint(run: Run) -> None:
    from testkit.openai_server import ScriptedOpenAI

    with ScriptedOpenAI() as server:
        url = server.base_url
        result = run("doctor", STASH_OPENAI_BASE_URL=url, STASH_REASONER_MODEL="scripted")
    last = result.output.splitlines()[-1]
    assert last.startswith(f"✓ model endpoint: {url} reachable")


def test_dead_letters(run: Run, database_url: str) -> None:
    namespace_id = as_json(run("namespace", "create", "/p", "--json"))["namespace"]["id"]
    with psycopg.connect(database_url, autocommit=True) as conn:
        ids = [
            conn.execute(
                "INSERT INTO dead_letters (namespace_id, stage, item_kind, item_id, attempts, last_error, status)"
                " VALUES (%s, %s, 'episode', %s, 3, 'model answer failed validation', 'dead') RETURNING id",
                (namespace_id, stage, item),
            ).fetchone()[0]
            for stage, item in (("facts", 11), ("facts", 12), ("patterns", 13))
        ]
    listed = as_json(run("dead-letters", "list", "-n", "/p", "--stage", "facts", "--json"))
    assert sorted(d["id"] for d in listed) == sorted(ids[:2])
    assert {d["last_error"] for d in listed} == {"model answer failed validation"}
    assert "model answer failed validation" in run("dead-letters", "list").output
    assert run("dead-letters", "retry", str(ids[0])).output == f"queued for retry: {ids[0]}\n"
    assert as_json(run("dead-letters", "list", "--status", "pending", "--json"))[0]["id"] == ids[0]
    declined = run("dead-letters", "drop", "-n", "/p", "--stage", "patterns", input="n\n", expect=1)
    assert "drop all dead letters of patterns in /p?" in declined.output
    assert run("dead-letters", "drop", "-n", "/p", "--stage", "patterns", "--yes").output == f"dropped: {ids[2]}\n"
    assert [d["id"] for d in as_json(run("dead-letters", "list", "--status", "dead", "--json"))] == [ids[1]]
    run("dead-letters", "list", "--stage", "nope", expect=2)


def test_export_and_restore_a_tree(run: Run, tmp_path: Path) -> None:
    run("namespace", "create", "/projects/x")
    episode = as_json(run("remember", "The deploy uses blue-green on Fridays", "-n", "/projects/x", "--json"))["id"]
    run("fact", "assert", "Deploys use blue-green", "-n", "/projects/x", "--source-episode-ids", str(episode))
    run("goal", "create", "Ship billing v2", "-n", "/projects/x")
    backup = tmp_path / "backup.jsonl"
    exported = as_json(run("export", str(backup), "-n", "/projects/x", "--json"))
    assert exported["rows"]["episodes"] == 1 and exported["rows"]["facts"] == 1 and exported["rows"]["goals"] == 1
    rows = [json.loads(line) for line in backup.read_text(encoding="utf-8").splitlines()]
    assert not contains_key([r.get("row") for r in rows], "embedding")  # no vectors in the file

    restored = run("import", str(backup), "-n", "/restored/x").output
    assert restored.startswith(f"restored {backup.name} into /restored/x:")
    facts = as_json(run("facts", "-n", "/restored/x", "--json"))
    assert [f["content"] for f in facts] == ["Deploys use blue-green"]
    copied_episode = facts[0]["source_episode_ids"][0]
    assert copied_episode != episode
    assert as_json(run("episode", "show", str(copied_episode), "--json"))["namespace"] == "/restored/x"
    hits = as_json(run("recall", "how do we deploy", "-n", "/restored/x", "--json"))
    # the fact carries the episode it rests on (one result per piece of evidence)
    shown = {h["id"] for h in hits if h["kind"] == "episode"}
    shown |= {s["id"] for h in hits for s in h.get("sources") or []}
    assert "fact" in {h["kind"] for h in hits} and copied_episode in shown

    no_namespace = tmp_path / "plain.jsonl"
    no_namespace.write_text('{"content": "x"}\n', encoding="utf-8")
    assert run("import", str(no_namespace), expect=2).output == "error: episode files go into one namespace: pass -n /path\n"
