"""Poison timestamps: times that leave the supported range once converted to UTC are refused
on every input path (MCP tools, CLI flags, import files), and rows stored before the check
existed are repaired by the 0006 migration so reads work again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from mcp import Client

from stash_pipeline import errors, recall
from stash_pipeline.config import load_settings
from stash_pipeline.db.migrate import _config, migrate
from stash_pipeline.memory import episodes, validate
from stash_pipeline.store import Store
from stash_serve.cli import cli
from tests.mcp.conftest import fails, ok

pytestmark = pytest.mark.anyio

#: valid ISO-8601 with an offset, outside 1000-01-01 … 9000-01-01 once in UTC (year 10000 / year 0)
POISON = ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "9999-06-01T00:00:00Z", "0999-12-31T23:00:00Z"]


@pytest.mark.parametrize("value", POISON)
def test_validate_refuses_times_outside_the_range_after_utc_conversion(value: str) -> None:
    with pytest.raises(errors.InvalidInput, match="between 1000-01-01 and 9000-01-01"):
        validate.timestamp(value, "occurred_at")


def test_validate_answers_utc() -> None:
    when = validate.timestamp("2026-01-31T09:00:00+02:00", "t")
    assert when is not None and when.utcoffset().total_seconds() == 0 and when.hour == 7


@pytest.mark.parametrize("value", POISON)
async def test_tools_refuse_poison_timestamps_and_recall_keeps_working(server: Any, value: str) -> None:
    async with Client(server) as client:
        await ok(client, "create_namespace", {"namespace": "/fuzz", "description": "fuzz"})
        await ok(client, "remember", {"content": "ordinary note about deploys", "namespace": "/fuzz"})
        for tool, arguments in [
            ("remember", {"content": "x", "namespace": "/fuzz", "occurred_at": value}),
            ("remember_batch", {"namespace": "/fuzz", "items": [{"content": "y", "occurred_at": value}]}),
            ("recall", {"query": "deploys", "namespaces": "/fuzz", "as_of": value}),
            ("query_facts", {"namespaces": "/fuzz", "since": value}),
        ]:
            assert (await fails(client, tool, arguments))["error"] == "invalid_input", (tool, value)
        hits = await ok(client, "recall", {"query": "deploys", "namespaces": "/fuzz"})
        assert len(hits["results"]) == 1


@pytest.mark.parametrize("flag", ["--occurred-at"])
def test_cli_flags_refuse_poison_timestamps(database_url: str, tmp_path: Path, flag: str) -> None:
    env = {"STASH_DATABASE_URL": database_url, "STASH_EMBEDDER": "hash", "STASH_HOME": str(tmp_path / "home")}
    runner = CliRunner()
    assert runner.invoke(cli, ["namespace", "create", "/p"], env=env).exit_code == 0
    for value in POISON:
        done = runner.invoke(cli, ["remember", "x", "-n", "/p", flag, value], env=env)
        assert done.exit_code == 2 and "between 1000-01-01" in done.output, done.output
        done = runner.invoke(cli, ["recall", "x", "-n", "/p", "--as-of", value], env=env)
        assert done.exit_code == 2, done.output
        done = runner.invoke(cli, ["facts", "-n", "/p", "--since", value], env=env)
        assert done.exit_code == 2, done.output
    # naive flags are UTC, and still bounded
    assert runner.invoke(cli, ["remember", "x", "-n", "/p", flag, "8999-12-31T23:59:59"], env=env).exit_code == 0
    assert runner.invoke(cli, ["remember", "y", "-n", "/p", flag, "0999-01-01T00:00:00"], env=env).exit_code == 2


def test_import_files_refuse_poison_timestamps(store: Store, tmp_path: Path) -> None:
    from stash_pipeline.interchange import episode_files as interchange
    from stash_pipeline.memory import namespaces

    namespaces.create(store, "/p")
    file = tmp_path / "e.jsonl"
    file.write_text(
        "\n".join(json.dumps({"content": f"row {i}", "occurred_at": v}) for i, v in enumerate(POISON)) + "\n"
    )
    with pytest.raises(errors.InvalidInput) as caught:
        interchange.import_episodes(store, "/p", file)
    assert caught.value.message.count("between 1000-01-01") == len(POISON)
    with store.db.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM episodes").fetchone()["n"] == 0


def test_the_database_refuses_out_of_range_times(store: Store) -> None:
    with pytest.raises(errors.InvalidInput), store.db.transaction() as tx:
        tx.conn.execute(
            "INSERT INTO episodes (namespace_id, content, occurred_at, embedding, embedding_model) "
            "VALUES (1, 'raw', '9999-12-31T23:59:59-14:00', array_fill(0.1, ARRAY[384])::vector, 'hash-384')"
        )


@pytest.fixture
def pre_bounds_dsn(database_at: Any) -> str:
    """A database migrated only up to the revision before the timestamp bounds."""
    return str(database_at(_previous_revision()))


def _previous_revision() -> str:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(_config("postgresql://x/y", 384))
    down = script.get_revision("0006").down_revision
    assert isinstance(down, str)
    return down


def test_migration_repairs_rows_stored_before_the_check(pre_bounds_dsn: str, tmp_path: Path) -> None:
    with psycopg.connect(pre_bounds_dsn, autocommit=True) as conn:
        ns = conn.execute("INSERT INTO namespaces (slug) VALUES ('/fuzz') RETURNING id").fetchone()[0]
        ids = []
        for content, when in [("poison future deploy note", POISON[0]), ("poison past deploy note", POISON[1]),
                              ("ordinary deploy note", "2026-01-01T00:00:00Z")]:
            ids.append(conn.execute(
                "INSERT INTO episodes (namespace_id, content, occurred_at, embedding, embedding_model) "
                "VALUES (%s, %s, %s::timestamptz, array_fill(0.1, ARRAY[384])::vector, 'hash-384') RETURNING id",
                (ns, content, when),
            ).fetchone()[0])
    settings = load_settings(database_url=pre_bounds_dsn, home=tmp_path, embedder="hash", vector_dim=384)
    migrate(settings, pre_bounds_dsn)
    with Store.open(settings) as store:
        for episode_id in ids:
            got = episodes.get(store, episode_id)
            assert validate.MIN_TIMESTAMP <= got.occurred_at < validate.MAX_TIMESTAMP
        hits = recall.recall(store, "deploy note", namespaces=["/fuzz"])
        assert len(hits) == 3
        assert episodes.purge(store, ids[0]) is not None
