"""The local admin token file that `stash up` writes: owner-only from creation, never written through a link."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from stash_pipeline import errors
from stash_pipeline.config import Settings
from stash_serve.up import ensure_admin_token


def test_admin_token_file_is_owner_only_even_with_an_open_umask(settings: Settings) -> None:
    old = os.umask(0)
    try:
        path, created = ensure_admin_token(settings)
    finally:
        os.umask(old)
    assert created
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().startswith("stash_")
    assert ensure_admin_token(settings) == (path, False)


def test_a_planted_link_is_refused_not_written_through(settings: Settings, tmp_path: Path) -> None:
    # Writing then chmod-ing follows a dangling symlink placed at the token's path and
    # leaves the admin secret wherever the link points; creating the file exclusively
    # (O_CREAT | O_EXCL) refuses it.
    elsewhere = tmp_path / "elsewhere" / "stolen"
    elsewhere.parent.mkdir()
    settings.home.mkdir(parents=True, exist_ok=True)
    (settings.home / "admin-token").symlink_to(elsewhere)
    with pytest.raises(errors.ConfigurationError):
        ensure_admin_token(settings)
    assert not elsewhere.exists()
