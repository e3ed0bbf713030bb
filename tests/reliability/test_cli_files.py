"""`stash import` / `stash export` with hostile or broken paths: no echo of file content,
no hang on a device or FIFO, a missing directory named as such."""

from __future__ import annotations

import os
import resource
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from stash_serve.cli import cli
from tests.reliability.conftest import REPO, STASH

pytestmark = pytest.mark.reliability

SECRET = "root:$6$S3CRETHASHxyz:19000:0:99999:7:::"


@pytest.fixture
def env(database_url: str, tmp_path: Path) -> dict[str, str]:
    return {"STASH_DATABASE_URL": database_url, "STASH_EMBEDDER": "hash", "STASH_HOME": str(tmp_path / "home")}


def _run(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


@pytest.mark.parametrize(
    ("name", "extra"),
    [("shadow", ["--format", "csv"]), ("shadow.csv", []), ("shadow", ["--format", "jsonl"]), ("shadow.jsonl", [])],
)
def test_import_never_echoes_the_file(env: dict[str, str], tmp_path: Path, name: str, extra: list[str]) -> None:
    assert _run(env, "namespace", "create", "/p").exit_code == 0
    file = tmp_path / name
    file.write_text(SECRET + "\nbin:*:19000:0:99999:7:::\n", encoding="utf-8")
    result = _run(env, "import", str(file), "-n", "/p", *extra)
    assert result.exit_code == 2, result.output
    assert "S3CRETHASH" not in result.output and "root:" not in result.output, result.output
    assert "unexpected" not in result.output


def test_import_of_an_undecodable_file_is_a_plain_error(env: dict[str, str], tmp_path: Path) -> None:
    _run(env, "namespace", "create", "/p")
    file = tmp_path / "blob.jsonl"
    file.write_bytes(b'{"content": "\xff\xfeS3CRETHASH"}\n')
    result = _run(env, "import", str(file), "-n", "/p")
    assert result.exit_code == 2 and "not UTF-8" in result.output and "S3CRETHASH" not in result.output


def _limit_memory() -> None:
    # the old code read /dev/zero into one string; keep a regression from eating the machine
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_import_refuses_non_regular_files(env: dict[str, str], tmp_path: Path, kind: str) -> None:
    if kind == "device":
        path = "/dev/zero"
    else:
        path = str(tmp_path / "pipe")
        os.mkfifo(path)  # nobody ever writes: opening it would block forever
    full_env = {**{k: v for k, v in os.environ.items() if not k.startswith("STASH_")}, **env}
    done = subprocess.run(
        [STASH, "import", path, "-n", "/p"], env=full_env, cwd=str(REPO), capture_output=True,
        text=True, timeout=60, preexec_fn=_limit_memory,
    )
    assert done.returncode == 2, done.stderr
    assert "not a regular file" in done.stderr


def test_export_into_a_missing_directory_names_it(env: dict[str, str], tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "dir" / "out.jsonl"
    result = _run(env, "export", str(target), "-n", "/")
    assert result.exit_code == 2, result.output
    assert "unexpected" not in result.output
    assert f"{target.parent} does not exist" in result.output
