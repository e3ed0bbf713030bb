from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest

from stash_pipeline.config import Settings, load_settings, parse_duration
from stash_pipeline.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_follow_the_reference():
    s = load_settings()
    assert s.database_url is None and s.embedded
    assert s.embedder == "minilm-int8" and s.vector_dim == 384
    assert s.max_content_bytes == 10_000
    assert s.context_ttl == timedelta(hours=1)
    assert s.consolidation_window == timedelta(hours=168)
    assert (s.decay_factor, s.expiry_threshold) == (0.95, 0.1)
    assert s.consolidation_similarity_threshold == 0.85
    assert not s.reasoner_configured


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("30m", 1800), ("1h", 3600), ("168h", 604800), ("1h30m", 5400), ("7d", 604800), ("45", 45)]
)
def test_durations(text, seconds):
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "1x", "h", "1h garbage", "-5m"])
def test_bad_durations_fail(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_invalid_settings_fail_with_one_line_each(monkeypatch):
    monkeypatch.setenv("STASH_DECAY_FACTOR", "1.5")
    monkeypatch.setenv("STASH_DB_PORT", "notaport")
    monkeypatch.setenv("STASH_EMBEDDER", "word2vec")
    with pytest.raises(ConfigurationError) as info:
        load_settings()
    lines = str(info.value).splitlines()[1:]
    assert len(lines) == 3
    assert {line.split(":")[0].strip() for line in lines} == {"STASH_DECAY_FACTOR", "STASH_DB_PORT", "STASH_EMBEDDER"}


def test_openai_embedder_needs_model_and_endpoint():
    with pytest.raises(ConfigurationError, match="STASH_EMBEDDING_MODEL"):
        load_settings(embedder="openai")


def test_dotenv_file_and_empty_values(tmp_path, monkeypatch):
    env = tmp_path / "stash.env"
    env.write_text("STASH_DATABASE_URL=\nSTASH_CONTEXT_TTL=2h\nSTASH_REASONER_TOKEN_BUDGET=\n")
    monkeypatch.setenv("STASH_ENV_FILE", str(env))
    s = load_settings()
    assert s.database_url is None and s.reasoner_token_budget is None
    assert s.context_ttl == timedelta(hours=2)


def test_secrets_are_masked(monkeypatch):
    s = load_settings(openai_api_key="sk-very-secret", database_url="postgresql://u:hunter2@h:5432/stash")
    view = s.public_view()
    text = repr(view)
    assert "sk-very-secret" not in text and "hunter2" not in text
    assert view["STASH_OPENAI_API_KEY"] == "****"


def test_env_example_lists_every_setting():
    text = (ROOT / ".env.example").read_text()
    listed = set(re.findall(r"^STASH_([A-Z0-9_]+)=", text, re.MULTILINE))
    assert listed == {name.upper() for name in Settings.model_fields}
