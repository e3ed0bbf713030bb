"""`stash doctor` and `stash consolidate status` against model servers that misbehave in known ways.

Each server is the scripted OpenAI-compatible server; the doctor makes one tiny
structured call and must name the mode, the latency, or the fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from stash_pipeline.consolidation.reasoner import reset_mode_cache
from stash_serve.cli import cli
from testkit.openai_server import Reply, ScriptedOpenAI
from testkit.scripted_model import ScriptedModel


@pytest.fixture
def run(database_url: str, tmp_path: Path):
    reset_mode_cache()
    runner = CliRunner()
    base = {"STASH_DATABASE_URL": database_url, "STASH_EMBEDDER": "hash", "STASH_HOME": str(tmp_path / "home"),
            "STASH_REASONER_MODEL": "small", "STASH_REASONER_BACKOFF_S": "0.01"}

    def invoke(*args: str, expect: int = 0, **env: str):
        result = runner.invoke(cli, list(args), env={**base, **env}, catch_exceptions=False)
        assert result.exit_code == expect, result.output
        return result

    yield invoke
    reset_mode_cache()


def _endpoint_check(result) -> dict:
    return {c["check"]: c for c in json.loads(result.stdout)}["model endpoint"]


def test_doctor_finds_the_mode_a_500_refusing_server_accepts_and_status_shows_it(run):
    with ScriptedOpenAI(ScriptedModel(), reject_formats=("json_schema",), reject_status=500) as srv:
        check = _endpoint_check(run("doctor", "--json", STASH_OPENAI_BASE_URL=srv.base_url))
        assert check["ok"] is True
        assert f"reasoner small at {srv.base_url}: structured call answered in" in check["detail"]
        assert "mode json_object (a richer mode was refused:" in check["detail"]
        assert [r["body"]["max_tokens"] for r in srv.requests if r["path"].endswith("/chat/completions")] == [64, 64]
        status = run("consolidate", "status", STASH_OPENAI_BASE_URL=srv.base_url).output
        url = srv.base_url
    assert f"structured output: small at {url}: json_object (answered " in status
    assert 'refused before: Error code: 500 - "response_format" must be one of' in status


@pytest.mark.parametrize(
    ("reply", "env", "fix"),
    [
        (Reply(status=404, error_message="model 'small' not found, try pulling it first"), {},
         "HTTP 404: no model 'small' here"),
        (Reply(status=401, error_message="invalid api key"), {}, "fix: set STASH_OPENAI_API_KEY"),
        (Reply(content='{"ok": true}', delay_s=1.5), {"STASH_REASONER_TIMEOUT_S": "0.5"},
         "no answer within 0.5 s — fix:"),
        (Reply(ramble=True), {}, "did not finish a one-line JSON answer within 64 tokens"),
        (Reply(content="Sure, I am here!"), {}, "the model answers, but not with the JSON asked for"),
    ],
)
def test_doctor_says_what_to_fix(run, reply, env, fix):
    with ScriptedOpenAI(lambda request: reply) as srv:
        check = _endpoint_check(run("doctor", "--json", expect=1, STASH_OPENAI_BASE_URL=srv.base_url, **env))
    assert check["ok"] is False and fix in check["detail"], check["detail"]


def test_doctor_on_a_forced_mode_the_server_refuses(run):
    with ScriptedOpenAI(ScriptedModel(), reject_formats=("json_schema",), reject_status=500) as srv:
        check = _endpoint_check(run("doctor", "--json", expect=1, STASH_OPENAI_BASE_URL=srv.base_url,
                                    STASH_REASONER_STRUCTURED="json_schema"))
        status = run("consolidate", "status", STASH_OPENAI_BASE_URL=srv.base_url,
                     STASH_REASONER_STRUCTURED="json_schema").output
        url = srv.base_url
    assert "refuses response_format json_schema — fix: set STASH_REASONER_STRUCTURED=auto" in check["detail"]
    assert f"structured output: small at {url}: json_schema (set by STASH_REASONER_STRUCTURED)" in status


def test_doctor_on_a_server_that_is_down(run):
    with ScriptedOpenAI() as srv:
        url = srv.base_url
    check = _endpoint_check(run("doctor", "--json", expect=1, STASH_OPENAI_BASE_URL=url))
    assert "is not reachable" in check["detail"] and "fix: start the model server" in check["detail"]
