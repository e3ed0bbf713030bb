"""Rebuild: withdraw what a stage derived (and what followed from it), rewind, re-derive."""

from __future__ import annotations

from typing import Any

import pytest

from stash_pipeline import errors
from stash_pipeline.consolidation import rebuild, runner
from stash_pipeline.memory import facts as facts_api
from tests.integration.consolidation.conftest import rows, seed

TEXTS = [
    "Alice lives in Paris near the river Seine",
    "Bob deploys Kubernetes clusters every Friday",
    "Alice works at Acme on the billing service",
]


def live(store: Any, table: str, namespace: str) -> list[int]:
    return [
        r["id"]
        for r in rows(
            store,
            f"SELECT t.id FROM {table} t JOIN namespaces n ON n.id = t.namespace_id "
            "WHERE n.slug = %(ns)s AND t.withdrawn_at IS NULL ORDER BY t.id",
            ns=namespace,
        )
    ]


def cursor(store: Any, namespace: str, stage: str) -> int:
    (row,) = [r for r in runner.status(store, namespace) if r["namespace"] == namespace and r["stage"] == stage]
    return int(row["cursor"])


@pytest.fixture
def consolidated(cstore: Any) -> Any:
    seed(cstore, "/p/x", TEXTS)
    seed(cstore, "/p/y", TEXTS[:1])
    facts_api.assert_fact(cstore, "/p/x", "The billing service is written in Go.")
    runner.run_tree(cstore, "/p")
    assert live(cstore, "facts", "/p/x") and live(cstore, "relationships", "/p/x")
    return cstore


def test_preview_changes_nothing_and_says_what_would_go(consolidated: Any) -> None:
    store = consolidated
    before = (live(store, "facts", "/p/x"), live(store, "relationships", "/p/x"), cursor(store, "/p/x", "facts"))
    (report,) = rebuild.rebuild(store, "/p/x", "facts", apply=False)
    assert report.status == "preview" and not report.applied
    assert report.withdrawn == len(before[0]) - 1  # every synthesised fact, not the asserted one
    assert report.cascade.get("relationship", 0) >= 1
    assert report.cursor_was == before[2] > 0
    assert (live(store, "facts", "/p/x"), live(store, "relationships", "/p/x"), cursor(store, "/p/x", "facts")) == before


def test_rebuild_withdraws_rewinds_and_the_next_run_re_derives(consolidated: Any) -> None:
    store = consolidated
    old_facts = live(store, "facts", "/p/x")
    asserted = [r["id"] for r in rows(store, "SELECT id FROM facts WHERE origin = 'asserted'")]
    other = (live(store, "facts", "/p/y"), live(store, "relationships", "/p/y"))

    (report,) = rebuild.rebuild(store, "/p/x", "facts", apply=True)
    assert report.status == "rebuilt" and report.withdrawn == len(old_facts) - 1
    assert live(store, "facts", "/p/x") == asserted  # episodes and asserted facts stay
    assert live(store, "relationships", "/p/x") == []  # relationships of withdrawn facts followed
    assert cursor(store, "/p/x", "facts") == 0
    assert (live(store, "facts", "/p/y"), live(store, "relationships", "/p/y")) == other  # other namespace untouched
    episodes = rows(store, "SELECT count(*) AS n FROM episodes WHERE deleted_at IS NULL")[0]["n"]
    assert episodes == len(TEXTS) + 1

    runner.run_tree(store, "/p/x")
    new_facts = live(store, "facts", "/p/x")
    assert len(new_facts) == len(old_facts)
    assert min(set(new_facts) - set(asserted)) > max(set(old_facts) - set(asserted))  # new rows, not revived
    assert live(store, "relationships", "/p/x")  # downstream re-derived from the new facts
    reasons = {r["withdrawn_reason"] for r in rows(store, "SELECT withdrawn_reason FROM facts WHERE withdrawn_at IS NOT NULL")}
    assert reasons == {"rebuild of facts"}


def test_a_token_makes_a_repeated_rebuild_a_no_op(consolidated: Any) -> None:
    store = consolidated
    (first,) = rebuild.rebuild(store, "/p/x", "facts", apply=True, token="run-1")
    runner.run_tree(store, "/p/x")
    re_derived = live(store, "facts", "/p/x")
    (again,) = rebuild.rebuild(store, "/p/x", "facts", apply=True, token="run-1")  # a retried step
    assert first.status == "rebuilt" and again.status == "skipped"
    assert live(store, "facts", "/p/x") == re_derived
    (fresh,) = rebuild.rebuild(store, "/p/x", "facts", apply=True, token="run-2")  # a new rebuild
    assert fresh.status == "rebuilt" and fresh.withdrawn == len(re_derived) - 1


def test_rebuilding_relationships_brings_identical_ones_back(consolidated: Any) -> None:
    store = consolidated
    before = live(store, "relationships", "/p/x")
    facts_before = live(store, "facts", "/p/x")
    (report,) = rebuild.rebuild(store, "/p/x", "relationships", apply=True)
    assert report.withdrawn == len(before) and live(store, "relationships", "/p/x") == []
    assert live(store, "facts", "/p/x") == facts_before  # upstream untouched
    runner.run_all(store, "/p/x", stages=["relationships"])
    assert live(store, "relationships", "/p/x") == before  # the same rows, withdrawn then derived again


def test_a_tree_rebuilds_each_namespace_and_append_only_stages_refuse(consolidated: Any) -> None:
    store = consolidated
    reports = rebuild.rebuild(store, "/p", "facts", apply=False)
    assert [r.namespace for r in reports if r.withdrawn] == ["/p/x", "/p/y"]
    assert all(r.status == "preview" for r in reports)
    with pytest.raises(errors.InvalidInput, match="cannot be rebuilt"):
        rebuild.rebuild(store, "/p/x", "goal_progress", apply=True)
    with pytest.raises(errors.InvalidInput, match="unknown stage"):
        rebuild.rebuild(store, "/p/x", "nope", apply=True)


def test_cli_previews_then_rebuilds_with_yes(consolidated: Any, tmp_path: Any) -> None:
    import json

    from click.testing import CliRunner

    from stash_serve.cli import cli

    store = consolidated
    env = {
        "STASH_DATABASE_URL": store.settings.database_url,
        "STASH_EMBEDDER": "hash",
        "STASH_VECTOR_DIM": str(store.settings.vector_dim),
        "STASH_HOME": str(tmp_path / "home"),
    }
    runner = CliRunner()
    old = live(store, "facts", "/p/x")
    preview = runner.invoke(cli, ["consolidate", "rebuild", "-n", "/p/x", "--stage", "facts"], env=env)
    assert preview.exit_code == 0, preview.output
    assert "preview only: nothing was changed; add --yes" in preview.output
    assert live(store, "facts", "/p/x") == old
    done = runner.invoke(cli, ["consolidate", "rebuild", "-n", "/p/x", "--stage", "facts", "--yes", "--json"], env=env)
    assert done.exit_code == 0, done.output
    (report,) = json.loads(done.stdout)
    assert report["status"] == "rebuilt" and report["withdrawn"] == len(old) - 1
    assert cursor(store, "/p/x", "facts") == 0
    bad = runner.invoke(cli, ["consolidate", "rebuild", "-n", "/p/x", "--stage", "decay"], env=env)
    assert bad.exit_code != 0 and "cannot be rebuilt" in bad.output
