"""`make up`'s first step, the install into .venv, says what it does and shows pip's progress.

The Makefile's install rule runs here with a stand-in Python whose venv holds a stand-in
pip that records its arguments, so nothing is downloaded.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

FAKE_PYTHON = """#!/bin/sh
# `python -m venv DIR`: a venv whose pip records its arguments and prints a progress line
[ "$1" = "-m" ] && [ "$2" = "venv" ] || exit 3
mkdir -p "$3/bin"
cat > "$3/bin/pip" <<'PIP'
#!/bin/sh
echo "$*" >> "$(dirname "$0")/../pip.log"
echo "Collecting something"
PIP
chmod +x "$3/bin/pip"
"""


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_install_says_what_it_does_and_lets_pip_show_progress(tmp_path: Path) -> None:
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    venv = tmp_path / "venv"
    result = subprocess.run(
        ["make", "--no-print-directory", "install", f"PYTHON={python}", f"VENV={venv}"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"installing Stash and its dependencies into {venv}")
    assert "few minutes" in lines[0]
    assert "Collecting something" in result.stdout  # pip's own progress reaches the terminal
    upgrade, install = (venv / "pip.log").read_text().splitlines()
    assert "--upgrade pip" in upgrade
    assert "-e .[dev]" in install and "--quiet" not in install.split() and "-q" not in install.split()
    assert (venv / ".installed").exists()
