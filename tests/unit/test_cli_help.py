"""Every `stash` command has help with an example, is documented in docs/cli.md, and
the commands that need no database (help, version, config) never open one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from stash_serve.cli import cli

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
#: nothing listens here; a command that tries to connect fails
CLOSED_PORT_DSN = "postgresql://stash:secret-pw@127.0.0.1:1/stash"


def command_paths(group: click.Group = cli, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths: list[tuple[str, ...]] = []
    for name, command in sorted(group.commands.items()):
        paths.append((*prefix, name))
        if isinstance(command, click.Group):
            paths.extend(command_paths(command, (*prefix, name)))
    return paths


ALL_PATHS = command_paths()


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> CliRunner:
    monkeypatch.setenv("STASH_DATABASE_URL", CLOSED_PORT_DSN)
    monkeypatch.setenv("STASH_HOME", str(tmp_path / "home"))
    return CliRunner()


def test_tree_covers_the_issue_commands() -> None:
    names = {" ".join(p) for p in ALL_PATHS}
    for expected in ("db start", "migrate", "namespace create", "remember", "recall", "purge fact", "doctor",
                     "version", "config", "context set", "import"):
        assert expected in names


@pytest.mark.parametrize("path", [(), *ALL_PATHS], ids=lambda p: "stash " + " ".join(p))
def test_help_has_text_and_example(runner: CliRunner, path: tuple[str, ...]) -> None:
    result = runner.invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Usage: ")
    body = result.output.split("\n", 2)[2]
    assert body.strip(), "help text is empty"
    assert "Example:" in result.output
    # the example runs the command it documents
    assert "stash " + " ".join(path) in result.output.split("Example:", 1)[1] or not path


@pytest.mark.parametrize("path", ALL_PATHS, ids=lambda p: "stash " + " ".join(p))
def test_every_command_is_documented(path: tuple[str, ...]) -> None:
    docs = DOCS.read_text(encoding="utf-8")
    heading = "stash " + " ".join(path)
    assert f"`{heading}`" in docs, f"{heading} is missing from docs/cli.md"


def test_version_and_config_work_without_a_database(runner: CliRunner) -> None:
    from stash_pipeline import __version__

    version = runner.invoke(cli, ["version"])
    assert version.exit_code == 0
    assert version.output == f"stash {__version__}\n"

    config = runner.invoke(cli, ["config"])
    assert config.exit_code == 0, config.output
    assert "STASH_DATABASE_URL" in config.output
    assert "secret-pw" not in config.output  # the password is masked
    assert "****" in config.output


def test_config_json_masks_secrets(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    monkeypatch.setenv("STASH_OPENAI_API_KEY", "sk-very-secret")
    result = runner.invoke(cli, ["config", "--json"])
    assert result.exit_code == 0
    view = json.loads(result.output)
    assert view["STASH_OPENAI_API_KEY"] == "****"
    assert "sk-very-secret" not in result.output


def test_a_database_command_fails_with_one_line(runner: CliRunner) -> None:
    start = time.monotonic()
    result = runner.invoke(cli, ["namespace", "list"])
    assert result.exit_code == 1
    assert result.output.startswith("error: database unavailable")
    assert "Traceback" not in result.output
    assert time.monotonic() - start < 10


def test_invalid_settings_are_one_clear_error(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STASH_DB_PORT", "not-a-port")
    result = runner.invoke(cli, ["config"])
    assert result.exit_code == 1
    assert result.output.startswith("error: invalid settings")
    assert "STASH_DB_PORT" in result.output


def test_bad_option_values_are_caller_errors(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["remember", "x", "-n", "/p", "--occurred-at", "yesterday"])
    assert result.exit_code == 2
    # the arguments model's words, the option named as typed (the value itself is not echoed)
    assert "error: invalid arguments: --occurred-at: not an ISO 8601 time" in result.output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["remember", "x"], "--namespace is required (e.g. -n /projects/x)"),
        (["goal", "create", "Ship v2"], "--namespace is required (e.g. -n /projects/x)"),
        (["consolidate", "rebuild", "--stage", "facts"], "--namespace is required (e.g. -n /projects/x)"),
        (["failure", "create", "x", "-n", "/p", "--lesson", "l"], "--reason is required"),
    ],
)
def test_a_required_option_left_out_is_named(runner: CliRunner, args: list[str], said: str) -> None:
    result = runner.invoke(cli, args)
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == f"Error: {said}"
    assert "Input should be" not in result.output


def _run_stash(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STASH_")}
    env.update(STASH_DATABASE_URL=CLOSED_PORT_DSN, STASH_ENV_FILE="/nonexistent/.env")
    stash = Path(sys.executable).with_name("stash")
    return subprocess.run([str(stash), *args], capture_output=True, text=True, env=env, timeout=30)


def test_installed_entry_point_is_quick_and_offline() -> None:
    start = time.monotonic()
    help_result = _run_stash("--help")
    version_result = _run_stash("version")
    elapsed = time.monotonic() - start
    assert help_result.returncode == 0, help_result.stderr
    assert "Commands:" in help_result.stdout
    assert version_result.returncode == 0
    assert version_result.stdout.startswith("stash ")
    assert elapsed < 10, f"two offline invocations took {elapsed:.1f}s"


def test_offline_commands_do_not_import_the_database_layer() -> None:
    code = (
        "import sys\n"
        "from stash_serve.cli import cli\n"
        "for args in (['--help'], ['version'], ['config'], ['namespace', '--help']):\n"
        "    try:\n"
        "        cli.main(args, prog_name='stash', standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "loaded = sorted(m for m in ('stash_pipeline.db', 'stash_pipeline.store', 'psycopg_pool') if m in sys.modules)\n"
        "print('LOADED=' + ','.join(loaded))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("STASH_")}
    env.update(STASH_DATABASE_URL=CLOSED_PORT_DSN, STASH_ENV_FILE="/nonexistent/.env")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "LOADED="


# --- the root group's error handling (a throwaway group of the real class) ----------------


def _group_raising(exc: BaseException) -> click.Group:
    from stash_serve.cli.base import StashGroup

    @click.group(cls=StashGroup)
    def root() -> None:
        """Root."""

    @root.command("boom")
    def boom() -> None:
        """Raise."""
        raise exc

    return root


@pytest.mark.parametrize(
    ("exc", "code", "line"),
    [
        ("InvalidNamespace", 2, "error: bad slug\n"),
        ("RecordNotFound", 2, "error: bad slug\n"),
        ("Conflict", 2, "error: bad slug\n"),
        ("AccessDenied", 2, "error: bad slug\n"),
        ("DatabaseUnavailable", 1, "error: bad slug\n"),
        ("ModelUnavailable", 1, "error: bad slug\n"),
    ],
)
def test_stash_errors_are_one_line_with_exit_code(exc: str, code: int, line: str) -> None:
    from stash_pipeline import errors

    result = CliRunner().invoke(_group_raising(getattr(errors, exc)("bad slug")), ["boom"])
    assert (result.exit_code, result.output) == (code, line)


def test_ctrl_c_exits_130_quietly() -> None:
    result = CliRunner().invoke(_group_raising(KeyboardInterrupt()), ["boom"])
    assert (result.exit_code, result.output) == (130, "")


def test_unexpected_errors_hide_the_traceback_unless_debugging(monkeypatch: pytest.MonkeyPatch) -> None:
    group = _group_raising(ValueError("kaput"))
    result = CliRunner().invoke(group, ["boom"])
    assert result.exit_code == 1
    assert result.output == "error: unexpected ValueError: kaput (set STASH_DEBUG=1 for a traceback)\n"
    monkeypatch.setenv("STASH_DEBUG", "1")
    debug = CliRunner().invoke(group, ["boom"])
    assert isinstance(debug.exception, ValueError)


def test_option_parsers() -> None:
    from stash_pipeline.errors import InvalidInput
    from stash_pipeline.memory.validate import record_ids
    from stash_serve.cli import base

    assert record_ids("3, 1,2", "--source-fact-ids") == [3, 1, 2]
    with pytest.raises(InvalidInput, match="--source-fact-ids must be a positive integer"):
        record_ids("1,x", "--source-fact-ids")
    with pytest.raises(InvalidInput, match="must be a JSON object"):
        base.parse_json_object('"text"')


def test_mermaid_escapes_and_cuts_labels() -> None:
    from types import SimpleNamespace

    from stash_serve.cli.graph import mermaid

    step = SimpleNamespace(cause_fact_id=1, cause='He said "go"', effect_fact_id=None, effect_failure_id=9,
                           effect="x" * 80, confidence=0.5)
    lines = mermaid([step], 1).splitlines()
    assert lines == [
        "graph TD",
        '  F1["fact 1: He said #quot;go#quot;"]',
        '  X9{{"failure 9: ' + "x" * 49 + '…"}}',
        "  F1 -->|0.50| X9",
    ]
    assert mermaid([], 4).splitlines() == ["graph TD", '  F4["fact 4"]']


def test_cheap_head_revision_matches_alembic() -> None:
    from stash_pipeline.db.migrate import head_revision as alembic_head
    from stash_serve.cli.base import head_revision

    assert head_revision() == alembic_head()


def test_the_reference_lists_every_option_of_every_command() -> None:
    """docs/cli.md's "Arguments and options:" lines are written from the commands
    (``python -m stash_serve.cli.reference`` rewrites them); a new option shows up there."""
    from stash_serve.cli.reference import synced

    docs = DOCS.read_text(encoding="utf-8")
    assert synced(docs, cli) == docs, "run `python -m stash_serve.cli.reference` to update docs/cli.md"
