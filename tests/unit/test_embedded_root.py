"""Run as root, the embedded server opens a way to its data for the `stash` service user, and no more.

A parent directory gets o+x only when the service user could not pass through it as
owner, group or other; directories it can already traverse keep their mode.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from stash_pipeline.config import load_settings
from stash_pipeline.db.embedded import SERVICE_USER, EmbeddedServer, _traversable_by

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the service-user path runs only as root")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_traversal_follows_the_first_matching_permission_class(tmp_path: Path) -> None:
    directory = tmp_path / "d"
    directory.mkdir()
    other_uid, other_gid = 54321, 54321
    os.chown(directory, 0, 0)
    for mode, expected in [(0o700, False), (0o701, True), (0o710, False), (0o755, True)]:
        directory.chmod(mode)
        assert _traversable_by(directory.stat(), other_uid, other_gid) is expected, oct(mode)
    # the group class applies to a member of the directory's group, whatever "others" allow
    os.chown(directory, 0, other_gid)
    directory.chmod(0o710)
    assert _traversable_by(directory.stat(), other_uid, other_gid)
    directory.chmod(0o701)
    assert not _traversable_by(directory.stat(), other_uid, other_gid)
    # and the owner class to the owner
    os.chown(directory, other_uid, 0)
    directory.chmod(0o100)
    assert _traversable_by(directory.stat(), other_uid, other_gid)


def test_only_parents_the_service_user_cannot_pass_get_o_plus_x(caplog: pytest.LogCaptureFixture) -> None:
    top = Path(tempfile.mkdtemp(prefix="stash-root-"))  # 0700, owned by root
    try:
        server = EmbeddedServer(load_settings(home=top / "closed" / "group" / "open" / "home"))
        closed, group, opened = top / "closed", top / "closed" / "group", top / "closed" / "group" / "open"
        opened.mkdir(parents=True)
        closed.chmod(0o700)
        server._prepare_root()  # creates the service user if needed
        entry = pwd.getpwnam(SERVICE_USER)
        os.chown(group, 0, entry.pw_gid)  # the service user's group may pass; others may not
        group.chmod(0o750)
        opened.chmod(0o755)
        top.chmod(0o700)
        closed.chmod(0o700)

        caplog.clear()
        server._prepare_root()

        changed = sorted(r.args[0] for r in caplog.records if r.levelname == "WARNING" and "o+x" in r.getMessage())
        assert changed == [top, closed]
        assert _mode(top) == 0o701
        assert _mode(closed) == 0o701
        assert _mode(group) == 0o750  # reachable through its group: untouched
        assert _mode(opened) == 0o755
        assert (server.data_dir.stat().st_uid, server.data_dir.stat().st_gid) == (entry.pw_uid, entry.pw_gid)
    finally:
        shutil.rmtree(top, ignore_errors=True)
